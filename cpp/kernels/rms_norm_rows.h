// Row kernels of RMSNorm, its backward (CANN RmsNormGrad's dx) and the fused
// backward, dispatched per ISA like the LayerNorm row kernels
// (layer_norm_rows.h).
//
// Each function works on `rows` consecutive rows of `cols` elements (row r
// at offset r * cols) that share one gamma; the drivers in rms_norm.cc split
// the work into blocks and groups. rstd and gamma are float32; inputs and
// outputs are the storage dtype T. Every sum over a row uses the fixed
// 16-lane association of lanes.h, so results do not depend on the ISA
// variant.
//
// The math, per row of H columns (CANN RmsNorm: the mean of squares is the
// sum times the float32 reciprocal of H, then epsilon is added):
//   rstd = 1 / sqrt(sum(x^2) * (1/H) + epsilon)          (1/H: 1 when H = 0)
//   y    = (x * rstd) * gamma
//   x1   = dy * gamma,  s = sum(x1 * x),  a = (-(rstd^3) * s) * (1/H)
//   dx   = a * x + x1 * rstd   (= rstd * (x1 - xhat * mean(x1 * xhat)))
//   res_for_gamma = x * rstd   (xhat)
#pragma once

#include <cstdint>

#include "base/dtypes.h"

namespace jax_lngb {

// y and the float32 rstd of each row.
using RmsForwardRowsFn = void (*)(const void* x, int64_t rows, int64_t cols, const float* gamma, float epsilon,
                                  bool stream, void* y, float* rstd);

// dx and res_for_gamma, both stored as T (CANN's chain hands res_for_gamma
// to LayerNormGradBeta through memory). `stream` selects non-temporal
// stores (never changes a value).
using RmsGradRowsFn = void (*)(const void* dy, const void* x, const float* rstd, const float* gamma, int64_t rows,
                               int64_t cols, bool stream, void* dx, void* res_for_gamma);

// The fused backward's rows: dx as RmsGradRowsFn computes it, and
// res_for_gamma, computed in float32 but never stored, added with dy into
// the float32 gamma accumulators (`cols` floats) by LayerNormGradBeta's
// reduction step (reduce_step.h): rows in order, so the sums are
// reduce_rows' pd_gamma over the float32 res_for_gamma and dy widened to
// float32, bit for bit.
using RmsGradReduceFn = void (*)(const void* dy, const void* x, const float* rstd, const float* gamma, int64_t rows,
                                 int64_t cols, bool stream, void* dx, float* acc_gamma);

struct RmsNormRowsTable {
  RmsForwardRowsFn forward[kNumDTypes];
  RmsGradRowsFn grad[kNumDTypes];
  RmsGradReduceFn grad_reduce[kNumDTypes];
  void (*stream_fence)();  // orders non-temporal stores before a block is reported done
};

// The table of the active ISA (see cpu_features.h).
const RmsNormRowsTable& rms_norm_rows();

}  // namespace jax_lngb
