// Residual add fused with LayerNorm or RMSNorm on the CPU, forward and
// backward (jax_lngb.add_layer_norm / add_rms_norm).
//
//   forward:  h = round_R(float(x) + float(residual)),  y = norm(h) * scale (+ beta)
//   backward: d_sum = round_R(dx_norm(dy) + float(dh)),
//             pd_gamma = sum over rows of x_hat * dy,  pd_beta = sum over rows of dy
//
// x, y and dy are in one storage dtype, residual, h, dh and d_sum in another
// (R, residual's): a float32 residual stream can carry 16-bit activations.
// The scale is gamma, or 1 + gamma formed in float32 (zero_centered).
// Layout as in layer_norm.h: `groups` problems of `rows` x `cols`, gamma and
// beta float32 shared (stride 0) or one row per group (stride cols), per-row
// statistics float32. All arithmetic is float32 with separately rounded
// operations; the formulas are layer_norm_rows.h's and rms_norm_rows.h's on
// the float32 h.
//
// Determinism: the rows are split into blocks by make_row_partition
// (partition.h), a function of the shape alone; each (group, block) adds its
// rows' parameter terms in row order into its own float32 partial, and the
// partials of a group are added in block order and narrowed once. Which
// thread computes a block never changes a bit.
//
// Every function returns nullptr on success, else a static description of
// what is wrong.
#pragma once

#include <cstdint>

#include "base/dtypes.h"
#include "base/executor.h"

namespace jax_lngb {

enum class AddNormKind : int { kLayer = 0, kRms = 1 };

struct AddNormForwardProblem {
  AddNormKind kind = AddNormKind::kLayer;
  DType x_dtype = DType::kF32;  // x and y
  DType r_dtype = DType::kF32;  // residual and h
  const void* x = nullptr;
  const void* residual = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;  // nullptr: no bias (always for kRms)
  int64_t param_stride = 0;     // 0 or cols, for gamma and beta alike
  bool zero_centered = false;
  void* y = nullptr;
  void* h = nullptr;
  float* mean = nullptr;      // kLayer: [groups * rows]
  float* variance = nullptr;  // kLayer: [groups * rows]
  float* rstd = nullptr;      // kRms:   [groups * rows]
  int64_t groups = 1;
  int64_t rows = 0;
  int64_t cols = 0;
  float epsilon = 1e-5f;
};

const char* add_norm_forward(const AddNormForwardProblem& p, const CpuExecutor& ex);

struct AddNormBackwardProblem {
  AddNormKind kind = AddNormKind::kLayer;
  DType dy_dtype = DType::kF32;   // dy (x's dtype)
  DType h_dtype = DType::kF32;    // dh, h, d_sum (residual's dtype)
  DType out_dtype = DType::kF32;  // pd_gamma, pd_beta
  const void* dy = nullptr;
  const void* dh = nullptr;
  const void* h = nullptr;
  const float* mean = nullptr;      // kLayer
  const float* variance = nullptr;  // kLayer
  const float* rstd = nullptr;      // kRms
  const float* gamma = nullptr;
  int64_t gamma_stride = 0;  // 0 or cols
  bool zero_centered = false;
  void* d_sum = nullptr;     // both d_x and d_residual
  void* pd_gamma = nullptr;  // [groups, cols]
  void* pd_beta = nullptr;   // [groups, cols], or nullptr: not computed
  int64_t groups = 1;
  int64_t rows = 0;
  int64_t cols = 0;
  float epsilon = 1e-5f;
};

const char* add_norm_backward(const AddNormBackwardProblem& p, const CpuExecutor& ex);

}  // namespace jax_lngb
