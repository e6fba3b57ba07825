// Row kernels of the residual add fused with LayerNorm or RMSNorm
// (add_norm.h), dispatched per ISA like the norms' own row kernels
// (layer_norm_rows.h, rms_norm_rows.h).
//
// Each function works on `rows` consecutive rows of `cols` elements that
// share one scale (gamma, or 1 + gamma already formed by the driver) and
// beta; the drivers in add_norm.cc split the work into blocks and groups.
// The row sums use the fixed 16-lane association of lanes.h and the norm
// kernels' own accumulator counts, and every formula is theirs, on the
// float32 value of the stored h: y, mean, variance and rstd are the bits
// `layer_norm` / `rms_norm` give for that h, on every ISA variant.
#pragma once

#include <cstdint>

#include "base/dtypes.h"

namespace jax_lngb {

// h = round_R(x + residual) and y = norm(h) * scale (+ beta; beta nullptr:
// none); stat0 is the mean (LayerNorm) or rstd (RMSNorm) of each row,
// stat1 the variance (LayerNorm; unused for RMSNorm). `stream` selects
// non-temporal stores for y and h (never changes a value).
using AddNormForwardRowsFn = void (*)(const void* x, const void* residual, int64_t rows, int64_t cols,
                                      const float* scale, const float* beta, float epsilon, bool stream, void* y,
                                      void* h, float* stat0, float* stat1);

// d_sum = round_R(dnorm(dy) + dh), and each row's x_hat * dy (and dy, when
// acc_beta is not nullptr) added in row order into the float32
// accumulators (`cols` floats each) by LayerNormGradBeta's step
// (reduce_step.h).
using AddNormBackwardRowsFn = void (*)(const void* dy, const void* dh, const void* h, const float* stat0,
                                       const float* stat1, const float* scale, int64_t rows, int64_t cols,
                                       float epsilon, bool stream, void* d_sum, float* acc_gamma, float* acc_beta);

// Indexed [kind][dtype of x, y, dy][dtype of residual, h, dh, d_sum], kind
// 0 LayerNorm, 1 RMSNorm (AddNormKind).
struct AddNormRowsTable {
  AddNormForwardRowsFn forward[2][kNumDTypes][kNumDTypes];
  AddNormBackwardRowsFn backward[2][kNumDTypes][kNumDTypes];
  void (*stream_fence)();  // orders non-temporal stores before a block is reported done
};

// The table of the active ISA (see cpu_features.h).
const AddNormRowsTable& add_norm_rows();

}  // namespace jax_lngb
