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

#include "dtypes.h"

namespace jax_lngb {

// res and dy point at row 0, column 0 of a [rows, cols] window whose rows
// are ld_res / ld_dy elements apart. acc_* point at `cols` floats.
using ReduceRowsFn = void (*)(const void* res, const void* dy, int64_t rows, int64_t cols,
                              int64_t ld_res, int64_t ld_dy, float* acc_gamma, float* acc_beta);

// How the inputs reach the kernel. Both kinds give the same bits; they
// differ only in the order they touch memory.
enum class ReduceInputs {
  kCached,    // in cache already (a fused producer's rows), or small
  kStreamed,  // streamed from memory once: res and dy of one dtype
};

// Kernel for (res dtype, dy dtype) on the active ISA. Supported pairs: equal
// dtypes, and float32 res with any dy (res_for_gamma produced in float32 by a
// fused kernel); kStreamed only for equal dtypes. Returns nullptr for
// anything else.
ReduceRowsFn reduce_rows_fn(DType res, DType dy, ReduceInputs inputs = ReduceInputs::kCached);

// Which loop suits a reduction over `total_bytes` of input (both operands)
// in rows of `row_bytes` (one operand): the streaming loop for inputs larger
// than the last-level cache whose rows are a few cache lines to a few KiB
// long; the register-blocked loop for everything else (cache-resident
// inputs, where it computes faster; rows so short that a row is one or two
// steps; rows long enough that its 2 x 4 streams are each long). Either
// gives the same bits.
inline constexpr int64_t kStreamedInputBytes = int64_t(24) << 20;
inline ReduceInputs reduce_inputs_for(int64_t total_bytes, int64_t row_bytes) {
  return total_bytes >= kStreamedInputBytes && row_bytes > 256 && row_bytes <= 3072 ? ReduceInputs::kStreamed
                                                                                    : ReduceInputs::kCached;
}

// Typed convenience wrapper.
template <typename TRes, typename TDy>
void reduce_rows(const TRes* res, const TDy* dy, int64_t rows, int64_t cols, int64_t ld_res,
                 int64_t ld_dy, float* acc_gamma, float* acc_beta);

}  // namespace jax_lngb
