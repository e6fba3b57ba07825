// Row kernels of LayerNorm, its backward (CANN LayerNormGrad) and the fused
// backward, dispatched per ISA like the gamma/beta reduction.
//
// Each function works on `rows` consecutive rows of `cols` elements (row r
// at offset r * cols) that share one gamma/beta; the drivers in
// layer_norm_*.cc split the work into blocks and groups. Statistics and
// parameters are float32; inputs and outputs are the storage dtype T.
// Every sum over a row uses the fixed 16-lane association of lanes.h, so
// results do not depend on the ISA variant.
#pragma once

#include <cstdint>

#include "base/dtypes.h"

namespace jax_lngb {

// y = (x - mean) * rstd * gamma + beta over each row, with a shifted and
// refined mean: m = ref + sum(x - ref) / H for ref the row's first element
// (see shift_of in layer_norm_rows_isa.h), then, in the second pass,
// variance = sum((x - m)^2) / H and mean = m + sum(x - m) / H (two passes
// over the row, which stays in cache); rstd = 1 / sqrt(variance + epsilon).
// Writes mean and variance (float32, one per row) for the backward.
// beta == nullptr: y = (x - mean) * rstd * gamma, no bias read or added.
using ForwardRowsFn = void (*)(const void* x, int64_t rows, int64_t cols, const float* gamma, const float* beta,
                               float epsilon, bool stream, void* y, float* mean, float* variance);

// CANN LayerNormGrad (SPEC section 3) for each row, with the per-row
// constants taken out of the sums:
//   x1 = dy * gamma, x2 = x - mean, rstd = 1 / sqrt(variance + epsilon)
//   pd_var  = -0.5 * rstd^3 * sum(x1 * x2)
//   pd_mean = -rstd * sum(x1) + pd_var * (1/H) * (-2 * sum(x2))
//   pd_x    = pd_var * (2/H) * x2 + pd_mean * (1/H) + x1 * rstd
//   res_for_gamma = x2 * rstd
// pd_x and res_for_gamma are stored as T. `stream` selects non-temporal
// stores for them (never changes a value).
using GradRowsFn = void (*)(const void* dy, const void* x, const float* variance, const float* mean, const float* gamma,
                            int64_t rows, int64_t cols, float epsilon, bool stream, void* pd_x, void* res_for_gamma);

// The fused backward's rows (layer_norm_backward.cc): pd_x as GradRowsFn
// computes it, and res_for_gamma, computed in float32 as well but never
// stored, added together with dy into the float32 gamma/beta accumulators
// (`cols` floats each) by the reduction's step (reduce_step.h): rows in
// order, up to kReduceRowBlock rows per load and store of the accumulators
// (any count adds in the same order). The sums are reduce_rows' over the
// float32 res_for_gamma and dy widened to float32, bit for bit.
// acc_beta == nullptr (a LayerNorm without beta): only the gamma sums.
using GradReduceFn = void (*)(const void* dy, const void* x, const float* variance, const float* mean,
                              const float* gamma, int64_t rows, int64_t cols, float epsilon, bool stream, void* pd_x,
                              float* acc_gamma, float* acc_beta);

struct LayerNormRowsTable {
  ForwardRowsFn forward[kNumDTypes];
  GradRowsFn grad[kNumDTypes];
  GradReduceFn grad_reduce[kNumDTypes];
  void (*stream_fence)();  // orders non-temporal stores before a block is reported done
};

// The table of the active ISA (see cpu_features.h).
const LayerNormRowsTable& layer_norm_rows();

}  // namespace jax_lngb
