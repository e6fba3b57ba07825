// LayerNorm on the CPU: the forward, CANN's LayerNormGrad, and the fused
// backward that chains LayerNormGrad into LayerNormGradBeta in one pass.
//
// Inputs are `groups` independent problems of `rows` x `cols` laid out one
// after another (groups are what vmap adds). gamma/beta are float32, either
// shared by every group (stride 0) or one row of `cols` per group (stride
// cols). Statistics (mean, variance) are float32, one per row. Row data are
// the storage dtype; all arithmetic is float32.
//
// Every function returns nullptr on success, else a static description of
// what is wrong.
#pragma once

#include <cstdint>

#include "base/dtypes.h"
#include "base/executor.h"

namespace jax_lngb {

struct LayerNormForwardProblem {
  DType dtype = DType::kF32;  // x and y
  const void* x = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;  // nullptr: no bias, y = xhat * gamma (nothing added)
  int64_t gamma_stride = 0;     // 0 or cols
  int64_t beta_stride = 0;      // 0 or cols
  void* y = nullptr;
  float* mean = nullptr;      // [groups * rows]
  float* variance = nullptr;  // [groups * rows], biased (divided by H)
  int64_t groups = 1;
  int64_t rows = 0;
  int64_t cols = 0;
  float epsilon = 1e-5f;
};

const char* layer_norm_forward(const LayerNormForwardProblem& p, const CpuExecutor& ex);

// CANN LayerNormGrad: pd_x and res_for_gamma, both in the input dtype.
struct LayerNormGradProblem {
  DType dtype = DType::kF32;  // dy, x, pd_x, res_for_gamma
  const void* dy = nullptr;
  const void* x = nullptr;
  const float* variance = nullptr;
  const float* mean = nullptr;
  const float* gamma = nullptr;
  int64_t gamma_stride = 0;
  void* pd_x = nullptr;
  void* res_for_gamma = nullptr;
  int64_t groups = 1;
  int64_t rows = 0;
  int64_t cols = 0;
  float epsilon = 1e-5f;
};

const char* layer_norm_grad(const LayerNormGradProblem& p, const CpuExecutor& ex);

// The fused backward: LayerNormGrad's pd_x, and LayerNormGradBeta of its
// res_for_gamma (kept in float32, in cache) and dy, per group:
//   pd_gamma[g] = sum over the group's rows of res_for_gamma * dy
//   pd_beta[g]  = sum over the group's rows of dy
// computed by the same reduction (reduce_rows) and block partials
// (GradBetaPartials, combine_partials) as LayerNormGradBeta.
struct LayerNormBackwardProblem {
  DType dtype = DType::kF32;      // dy, x, dx
  DType out_dtype = DType::kF32;  // pd_gamma, pd_beta
  const void* dy = nullptr;
  const void* x = nullptr;
  const float* variance = nullptr;
  const float* mean = nullptr;
  const float* gamma = nullptr;
  int64_t gamma_stride = 0;
  void* dx = nullptr;
  void* pd_gamma = nullptr;  // [groups, cols]
  void* pd_beta = nullptr;   // [groups, cols]; nullptr: no beta, no sum of dy formed
  int64_t groups = 1;
  int64_t rows = 0;
  int64_t cols = 0;
  float epsilon = 1e-5f;
};

const char* layer_norm_backward(const LayerNormBackwardProblem& p, const CpuExecutor& ex);

// Outputs at least this large are written with non-temporal stores (they
// cannot stay in cache for a consumer anyway, and skipping the read for
// ownership saves a third of the traffic). Never changes a value.
inline constexpr int64_t kStreamOutputBytes = int64_t(16) << 20;

}  // namespace jax_lngb
