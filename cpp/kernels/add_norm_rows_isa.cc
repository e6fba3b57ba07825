// One instantiation of the residual add + norm row kernels per ISA; see
// simd.h for how this file is compiled several times.
#include "add_norm_rows_isa.h"

#include "add_norm_rows_table.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

namespace {
template <typename X, typename R, bool kLayer>
void forward_erased(const void* x, const void* residual, int64_t rows, int64_t cols, const float* scale,
                    const float* beta, float eps, bool stream, void* y, void* h, float* stat0, float* stat1) {
  auto run = [&](auto kBeta) {
    add_forward_rows<X, R, kLayer, decltype(kBeta)::value>(static_cast<const X*>(x), static_cast<const R*>(residual),
                                                           rows, cols, scale, beta, eps, stream, static_cast<X*>(y),
                                                           static_cast<R*>(h), stat0, stat1);
  };
  // RMSNorm has no beta: one variant.
  if constexpr (kLayer) {
    if (beta != nullptr) return run(std::true_type{});
  }
  run(std::false_type{});
}

template <typename D, typename R, bool kLayer>
void backward_erased(const void* dy, const void* dh, const void* h, const float* stat0, const float* stat1,
                     const float* scale, int64_t rows, int64_t cols, float eps, bool stream, void* d_sum, float* acc_g,
                     float* acc_b) {
  auto run = [&](auto kBeta) {
    add_backward_rows<D, R, kLayer, decltype(kBeta)::value>(static_cast<const D*>(dy), static_cast<const R*>(dh),
                                                            static_cast<const R*>(h), stat0, stat1, scale, rows, cols,
                                                            eps, stream, static_cast<R*>(d_sum), acc_g, acc_b);
  };
  if constexpr (kLayer) {
    if (acc_b != nullptr) return run(std::true_type{});
  }
  run(std::false_type{});
}

template <typename X, typename R>
void fill(AddNormRowsTable& t) {
  constexpr int i = int(dtype_of<X>()), j = int(dtype_of<R>());
  t.forward[0][i][j] = &forward_erased<X, R, true>;
  t.forward[1][i][j] = &forward_erased<X, R, false>;
  t.backward[0][i][j] = &backward_erased<X, R, true>;
  t.backward[1][i][j] = &backward_erased<X, R, false>;
}

template <typename X>
void fill_row(AddNormRowsTable& t) {
  fill<X, float>(t);
  fill<X, f16_t>(t);
  fill<X, bf16_t>(t);
}

void fence() { stream_fence(); }
}  // namespace

AddNormRowsTable add_norm_rows_table() {
  AddNormRowsTable t{};
  fill_row<float>(t);
  fill_row<f16_t>(t);
  fill_row<bf16_t>(t);
  t.stream_fence = &fence;
  return t;
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
