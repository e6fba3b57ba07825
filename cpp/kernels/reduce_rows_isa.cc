// One instantiation of the reduction per ISA; see simd.h for how this file
// is compiled several times.
#include "reduce_rows_isa.h"

#include "reduce_rows_table.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

namespace {
template <typename T, bool kPrefetch = false, int kRows = kReduceRowBlock>
void erased(const void* res, const void* dy, int64_t rows, int64_t cols, int64_t ld_res, int64_t ld_dy, float* acc_g,
            float* acc_b) {
  reduce_rows_impl<T, kPrefetch, kRows>(static_cast<const T*>(res), static_cast<const T*>(dy), rows, cols, ld_res,
                                        ld_dy, acc_g, acc_b);
}
// 16-bit rows from memory with prefetch: blocks of 3 rows for short rows,
// 4 for long ones. Each row is a stream of its own with a prefetch ahead in
// it; with short rows (at most 2 KiB per chunk row) 2 x 4 such streams, with
// the conversions between load and add, streamed slower on a Xeon than 2 x 3:
// at [65536, 768] the kernel took 1.20x (f16) and 1.19x (bf16) the time of
// the streaming-read probe with 4 rows, 1.14-1.17x and 1.15-1.21x with 3.
// With 4096-column chunks (8 KiB rows) 4 rows were 4-8% faster. float32
// showed no difference and keeps kReduceRowBlock.
template <typename T>
void erased_prefetch16(const void* res, const void* dy, int64_t rows, int64_t cols, int64_t ld_res, int64_t ld_dy,
                       float* acc_g, float* acc_b) {
  if (cols * int64_t(sizeof(T)) <= 2048) {
    erased<T, true, 3>(res, dy, rows, cols, ld_res, ld_dy, acc_g, acc_b);
  } else {
    erased<T, true, kReduceRowBlock>(res, dy, rows, cols, ld_res, ld_dy, acc_g, acc_b);
  }
}
template <typename T>
void erased_rowwise(const void* res, const void* dy, int64_t rows, int64_t cols, int64_t ld_res, int64_t ld_dy,
                    float* acc_g, float* acc_b) {
  reduce_rows_rowwise_impl(static_cast<const T*>(res), static_cast<const T*>(dy), rows, cols, ld_res, ld_dy, acc_g,
                           acc_b);
}
template <typename T>
void erased_store_sums(const float* sums, void* dst, int64_t n) {
  store_sums_impl(sums, static_cast<T*>(dst), n);
}
}  // namespace

ReduceRowsTable reduce_rows_table() {
  ReduceRowsTable t{};
  t.blocked[int(DType::kF32)] = &erased<float>;
  t.blocked[int(DType::kF16)] = &erased<f16_t>;
  t.blocked[int(DType::kBF16)] = &erased<bf16_t>;
  t.blocked_prefetch[int(DType::kF32)] = &erased<float, true>;
  t.blocked_prefetch[int(DType::kF16)] = &erased_prefetch16<f16_t>;
  t.blocked_prefetch[int(DType::kBF16)] = &erased_prefetch16<bf16_t>;
  t.rowwise[int(DType::kF32)] = &erased_rowwise<float>;
  t.rowwise[int(DType::kF16)] = &erased_rowwise<f16_t>;
  t.rowwise[int(DType::kBF16)] = &erased_rowwise<bf16_t>;
  t.store_sums[int(DType::kF32)] = &erased_store_sums<float>;
  t.store_sums[int(DType::kF16)] = &erased_store_sums<f16_t>;
  t.store_sums[int(DType::kBF16)] = &erased_store_sums<bf16_t>;
  return t;
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
