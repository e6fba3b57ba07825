// One instantiation of the LayerNorm row kernels per ISA; see simd.h for how
// this file is compiled several times.
#include "layer_norm_rows_isa.h"

#include "layer_norm_rows_table.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

namespace {
template <typename T>
void forward_erased(const void* x, int64_t rows, int64_t cols, const float* gamma, const float* beta, float eps,
                    bool stream, void* y, float* mean, float* variance) {
  forward_rows(static_cast<const T*>(x), rows, cols, gamma, beta, eps, stream, static_cast<T*>(y), mean, variance);
}

template <typename T>
void grad_erased(const void* dy, const void* x, const float* variance, const float* mean, const float* gamma,
                 int64_t rows, int64_t cols, float eps, bool stream, void* pd_x, void* res) {
  grad_rows(static_cast<const T*>(dy), static_cast<const T*>(x), variance, mean, gamma, rows, cols, eps, stream,
            static_cast<T*>(pd_x), static_cast<T*>(res));
}

template <typename T>
void grad_reduce_erased(const void* dy, const void* x, const float* variance, const float* mean, const float* gamma,
                        int64_t rows, int64_t cols, float eps, bool stream, void* pd_x, float* acc_gamma,
                        float* acc_beta) {
  grad_reduce_rows(static_cast<const T*>(dy), static_cast<const T*>(x), variance, mean, gamma, rows, cols, eps, stream,
                   static_cast<T*>(pd_x), acc_gamma, acc_beta);
}

template <typename T>
void fill(LayerNormRowsTable& t) {
  constexpr int i = int(dtype_of<T>());
  t.forward[i] = &forward_erased<T>;
  t.grad[i] = &grad_erased<T>;
  t.grad_reduce[i] = &grad_reduce_erased<T>;
}

void fence() { stream_fence(); }
}  // namespace

LayerNormRowsTable layer_norm_rows_table() {
  LayerNormRowsTable t{};
  fill<float>(t);
  fill<f16_t>(t);
  fill<bf16_t>(t);
  t.stream_fence = &fence;
  return t;
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
