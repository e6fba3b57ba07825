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

// Kernel for (res dtype, dy dtype) on the active ISA. Supported pairs: equal
// dtypes, and float32 res with any dy (res_for_gamma produced in float32 by a
// fused kernel). Returns nullptr for anything else.
ReduceRowsFn reduce_rows_fn(DType res, DType dy);

// Typed convenience wrapper.
template <typename TRes, typename TDy>
void reduce_rows(const TRes* res, const TDy* dy, int64_t rows, int64_t cols, int64_t ld_res,
                 int64_t ld_dy, float* acc_gamma, float* acc_beta);

}  // namespace jax_lngb
