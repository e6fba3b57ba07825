// One instantiation of the RMSNorm row kernels per ISA; see simd.h for how
// this file is compiled several times.
#include "rms_norm_rows_isa.h"

#include "rms_norm_rows_table.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

namespace {
template <typename T>
void forward_erased(const void* x, int64_t rows, int64_t cols, const float* gamma, float eps, bool stream, void* y,
                    float* rstd) {
  rms_forward_rows(static_cast<const T*>(x), rows, cols, gamma, eps, stream, static_cast<T*>(y), rstd);
}

template <typename T>
void grad_erased(const void* dy, const void* x, const float* rstd, const float* gamma, int64_t rows, int64_t cols,
                 bool stream, void* dx, void* res) {
  rms_grad_rows(static_cast<const T*>(dy), static_cast<const T*>(x), rstd, gamma, rows, cols, stream,
                static_cast<T*>(dx), static_cast<T*>(res));
}

template <typename T>
void grad_reduce_erased(const void* dy, const void* x, const float* rstd, const float* gamma, int64_t rows,
                        int64_t cols, bool stream, void* dx, float* acc_gamma) {
  rms_grad_reduce_rows(static_cast<const T*>(dy), static_cast<const T*>(x), rstd, gamma, rows, cols, stream,
                       static_cast<T*>(dx), acc_gamma);
}

template <typename T>
void fill(RmsNormRowsTable& t) {
  constexpr int i = int(dtype_of<T>());
  t.forward[i] = &forward_erased<T>;
  t.grad[i] = &grad_erased<T>;
  t.grad_reduce[i] = &grad_reduce_erased<T>;
}

void fence() { stream_fence(); }
}  // namespace

RmsNormRowsTable rms_norm_rows_table() {
  RmsNormRowsTable t{};
  fill<float>(t);
  fill<f16_t>(t);
  fill<bf16_t>(t);
  t.stream_fence = &fence;
  return t;
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
