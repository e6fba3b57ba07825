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

#include "dtypes.h"

namespace jax_lngb {

// y = (x - mean) * rstd * gamma + beta, with mean = sum(x) / H,
// variance = sum((x - mean)^2) / H (two passes over the row, which stays in
// cache) and rstd = 1 / sqrt(variance + epsilon). Writes mean and variance
// (float32, one per row) for the backward.
using ForwardRowsFn = void (*)(const void* x, int64_t rows, int64_t cols, const float* gamma,
                               const float* beta, float epsilon, bool stream, void* y, float* mean,
                               float* variance);

// CANN LayerNormGrad (SPEC section 3) for each row, with the per-row
// constants taken out of the sums:
//   x1 = dy * gamma, x2 = x - mean, rstd = 1 / sqrt(variance + epsilon)
//   pd_var  = -0.5 * rstd^3 * sum(x1 * x2)
//   pd_mean = -rstd * sum(x1) + pd_var * (1/H) * (-2 * sum(x2))
//   pd_x    = pd_var * (2/H) * x2 + pd_mean * (1/H) + x1 * rstd
//   res_for_gamma = x2 * rstd
// pd_x is stored as T; res_for_gamma as T (`grad`) or float32 (`grad_f32`,
// the fused backward's cache-resident scratch). `stream` selects
// non-temporal stores for pd_x (never changes a value).
using GradRowsFn = void (*)(const void* dy, const void* x, const float* variance,
                            const float* mean, const float* gamma, int64_t rows, int64_t cols,
                            float epsilon, bool stream, void* pd_x, void* res_for_gamma);

// The fused backward splits a long row's second pass into column ranges
// (layer_norm_backward.cc) and so keeps the row's constants between the
// passes: x2 = x - mean, pd_x = a * x2 + b + x1 * rstd and
// res_for_gamma = x2 * rstd, with a = pd_var * (2/H), b = pd_mean * (1/H).
struct GradRowCoeffs {
  float mean, rstd, a, b;
};

// The first pass of `rows` rows: their sums, into one GradRowCoeffs each.
using GradCoeffsFn = void (*)(const void* dy, const void* x, const float* variance,
                              const float* mean, const float* gamma, int64_t rows, int64_t cols,
                              float epsilon, GradRowCoeffs* coeffs);
// The second pass over columns [c0, c1) of those rows: pd_x (at its place
// in the [rows, cols] output) and float32 res_for_gamma, row r's columns at
// res_for_gamma + r * ld_res. Same values as GradRowsFn's, element for
// element.
using GradColsFn = void (*)(const void* dy, const void* x, const GradRowCoeffs* coeffs,
                            const float* gamma, int64_t rows, int64_t cols, int64_t c0, int64_t c1,
                            bool stream, void* pd_x, float* res_for_gamma, int64_t ld_res);

struct LayerNormRowsTable {
  ForwardRowsFn forward[kNumDTypes];
  GradRowsFn grad[kNumDTypes];      // res_for_gamma in the input dtype
  GradRowsFn grad_f32[kNumDTypes];  // res_for_gamma in float32
  GradCoeffsFn grad_coeffs[kNumDTypes];
  GradColsFn grad_cols_f32[kNumDTypes];
  void (*stream_fence)();           // orders non-temporal stores before a block is reported done
};

// The table of the active ISA (see cpu_features.h).
const LayerNormRowsTable& layer_norm_rows();

}  // namespace jax_lngb
