// The gamma/beta reduction: the one implementation of
//
//     acc_gamma[c] += sum_r res[r, c] * dy[r, c]
//     acc_beta[c]  += sum_r dy[r, c]
//
// used by LayerNormGradBeta and by every fused kernel that feeds it. Products
// are rounded to float32, then added to the float32 accumulators in row order
// (AscendC's order within a block). Inputs are widened to float32 on load;
// nothing is accumulated in 16 bits.
#pragma once

#include <cstdint>

#include "base/cpu_features.h"
#include "base/dtypes.h"

namespace jax_lngb {

// res and dy point at row 0, column 0 of a [rows, cols] window whose rows
// are ld_res / ld_dy elements apart. acc_* point at `cols` floats.
using ReduceRowsFn = void (*)(const void* res, const void* dy, int64_t rows, int64_t cols, int64_t ld_res,
                              int64_t ld_dy, float* acc_gamma, float* acc_beta);

// The loops behind the reduction. All add each column's terms in row order
// into the same float32 accumulators, so all give the same bits; they
// differ only in the order they touch memory.
enum class ReduceLoop {
  kBlocked,          // 4 rows x 2 vectors per step: inputs in cache, or small
  kBlockedPrefetch,  // the same (3 rows for short 16-bit rows), requesting each
                     // row 4 KiB ahead (long rows from memory)
  kRowwise,          // one row at a time (medium rows from memory)
};

// Kernel for res and dy both of `dtype` on the active ISA (LayerNormGradBeta
// takes them in one dtype; the fused backward, whose res_for_gamma is
// float32 beside a 16-bit dy, adds into the accumulators through
// reduce_step.h instead). Returns nullptr for an invalid DType.
ReduceRowsFn reduce_rows_fn(DType dtype, ReduceLoop loop = ReduceLoop::kBlocked);

// Writes n float32 sums as `out` dtype, the last step of every gamma/beta
// reduction: each NaN becomes the one canonical quiet NaN (0x7FC00000, in
// 16 bits 0x7E00 / 0x7FC0), so that ISA variants, which may leave different
// NaNs in their partials, give the same bits; everything else is rounded to
// nearest even exactly as from_float (dtypes.h). Vectorised per ISA: with
// few rows and many columns, H >> rows, narrowing one value at a time was a
// sixth of the whole reduction's time.
using StoreSumsFn = void (*)(const float* sums, void* dst, int64_t n);
StoreSumsFn store_sums_fn(DType out);

// The loop for a LayerNormGradBeta over `total_bytes` of input (both
// operands) in rows of `row_bytes` (one operand) on a CPU of `vendor` running
// the `isa` kernels. Inputs that fit the last-level cache take the blocked
// loop, which computes fastest. From memory the memory systems we measured
// want different loops, with the same bits either way (kernel / probe from
// cpp/bench's timing driver, 2 cores):
// * AMD with the AVX-512 kernels (measured on Zen 4): rows of a few cache
//   lines to 3 KiB take the row-wise loop. The blocked loop reads 2 x 4
//   short streams at once, which that memory system served well below its
//   streaming rate (10% slower in float32, 30% in the 16-bit formats at
//   H = 768); longer rows are long streams that the blocked loop reads
//   well, with a prefetch ahead in each row; rows of at most 256 bytes make
//   4 rows one stream already.
// * AMD with the AVX2 kernels (measured on Zen 3, which has no AVX-512): up
//   to 3 KiB, rows longer than 256 bytes take the blocked loop with
//   prefetch (16-bit [65536, 768] 1.21-1.38 against 1.24-1.49 row-wise and
//   1.55-1.92 without prefetch; float32 0.98-1.01 against 1.01-1.09
//   row-wise; later alternate runs put the two within noise of each other);
//   longer rows take the blocked loop without software prefetch, whose
//   long streams that core's own prefetchers follow (float32 [4096, 4096]
//   0.95-1.02 against 1.20-1.30 with prefetch, [1024, 16384] 0.98-1.13
//   against 1.19-1.20, 16-bit [64, 262144] 1.08-1.18 against 1.23-1.33).
// * Intel (and CPUs we have not measured): every row length takes the
//   blocked loop with prefetch. On a Xeon with AVX-512 the row-wise loop
//   was the slowest of the three at every shape (1.2x-2x the time of the
//   prefetching loop from 64 to 262144 columns), and the prefetching loop
//   beat the plain one from memory even for 64-column rows (f32
//   [262144, 64] 3.8 vs 4.9 ms on two cores).
inline constexpr int64_t kStreamedInputBytes = int64_t(24) << 20;
inline ReduceLoop reduce_loop_for(int64_t total_bytes, int64_t row_bytes, CpuVendor vendor, Isa isa) {
  if (total_bytes < kStreamedInputBytes) return ReduceLoop::kBlocked;
  if (vendor != CpuVendor::kAmd) return ReduceLoop::kBlockedPrefetch;
  if (row_bytes <= 256) return ReduceLoop::kBlocked;
  if (isa == Isa::kAvx512) return row_bytes <= 3072 ? ReduceLoop::kRowwise : ReduceLoop::kBlockedPrefetch;
  return row_bytes <= 3072 ? ReduceLoop::kBlockedPrefetch : ReduceLoop::kBlocked;
}

// Typed convenience wrapper (blocked loop).
template <typename T>
void reduce_rows(const T* res, const T* dy, int64_t rows, int64_t cols, int64_t ld_res, int64_t ld_dy, float* acc_gamma,
                 float* acc_beta);

}  // namespace jax_lngb
