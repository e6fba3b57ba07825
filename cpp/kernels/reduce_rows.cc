#include "reduce_rows.h"

#include "base/cpu_features.h"
#include "reduce_rows_table.h"

namespace jax_lngb {

namespace {
ReduceRowsTable active_table() {
  switch (active_isa()) {
#if defined(JAX_LNGB_HAVE_AVX512)
    case Isa::kAvx512:
      return avx512::reduce_rows_table();
#endif
#if defined(JAX_LNGB_HAVE_AVX2)
    case Isa::kAvx2:
      return avx2::reduce_rows_table();
#endif
    default:
      return generic::reduce_rows_table();
  }
}

const ReduceRowsTable& isa_table() {
  static const ReduceRowsTable table = active_table();
  return table;
}
}  // namespace

StoreSumsFn store_sums_fn(DType out) { return is_valid_dtype(out) ? isa_table().store_sums[int(out)] : nullptr; }

ReduceRowsFn reduce_rows_fn(DType dtype, ReduceLoop loop) {
  const ReduceRowsTable& table = isa_table();
  // A DType decoded from foreign bits must not index past the table.
  if (!is_valid_dtype(dtype)) return nullptr;
  switch (loop) {
    case ReduceLoop::kBlocked:
      return table.blocked[int(dtype)];
    case ReduceLoop::kBlockedPrefetch:
      return table.blocked_prefetch[int(dtype)];
    case ReduceLoop::kRowwise:
      return table.rowwise[int(dtype)];
  }
  return nullptr;
}

template <typename T>
void reduce_rows(const T* res, const T* dy, int64_t rows, int64_t cols, int64_t ld_res, int64_t ld_dy, float* acc_gamma,
                 float* acc_beta) {
  reduce_rows_fn(dtype_of<T>())(res, dy, rows, cols, ld_res, ld_dy, acc_gamma, acc_beta);
}

template void reduce_rows<float>(const float*, const float*, int64_t, int64_t, int64_t, int64_t, float*, float*);
template void reduce_rows<f16_t>(const f16_t*, const f16_t*, int64_t, int64_t, int64_t, int64_t, float*, float*);
template void reduce_rows<bf16_t>(const bf16_t*, const bf16_t*, int64_t, int64_t, int64_t, int64_t, float*, float*);

}  // namespace jax_lngb
