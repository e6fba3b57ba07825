// RMSNorm on the CPU: the forward (CANN RmsNorm, saving rstd), the backward
// rows CANN's RmsNormGrad computes (dx, plus res_for_gamma for
// LayerNormGradBeta), and the fused backward that adds res_for_gamma into
// the gamma reduction in the same pass.
//
// Layout as in layer_norm.h: `groups` independent problems of `rows` x
// `cols` one after another (groups are what vmap adds); gamma float32,
// shared by every group (stride 0) or one row of `cols` per group (stride
// cols); rstd float32, one per row; row data in the storage dtype, all
// arithmetic in float32. The formulas are in rms_norm_rows.h.
//
// Every function returns nullptr on success, else a static description of
// what is wrong.
#pragma once

#include <cstdint>

#include "base/dtypes.h"
#include "base/executor.h"

namespace jax_lngb {

struct RmsNormForwardProblem {
  DType dtype = DType::kF32;  // x and y
  const void* x = nullptr;
  const float* gamma = nullptr;
  int64_t gamma_stride = 0;  // 0 or cols
  void* y = nullptr;
  float* rstd = nullptr;  // [groups * rows]
  int64_t groups = 1;
  int64_t rows = 0;
  int64_t cols = 0;
  float epsilon = 1e-6f;
};

const char* rms_norm_forward(const RmsNormForwardProblem& p, const CpuExecutor& ex);

// dx and res_for_gamma = x * rstd, both in the input dtype (the chained
// backward feeds res_for_gamma to LayerNormGradBeta).
struct RmsNormGradProblem {
  DType dtype = DType::kF32;  // dy, x, dx, res_for_gamma
  const void* dy = nullptr;
  const void* x = nullptr;
  const float* rstd = nullptr;
  const float* gamma = nullptr;
  int64_t gamma_stride = 0;
  void* dx = nullptr;
  void* res_for_gamma = nullptr;
  int64_t groups = 1;
  int64_t rows = 0;
  int64_t cols = 0;
};

const char* rms_norm_grad(const RmsNormGradProblem& p, const CpuExecutor& ex);

// The fused backward: dx, and per group
//   pd_gamma[g] = sum over the group's rows of (x * rstd) * dy
// with res_for_gamma kept in registers. Blocks of rows follow
// make_row_partition (partition.h), fixed by the shape; each block's
// float32 sums go to its own partial and the partials are added in block
// order, then narrowed once: no thread count or ISA changes a bit.
struct RmsNormBackwardProblem {
  DType dtype = DType::kF32;      // dy, x, dx
  DType out_dtype = DType::kF32;  // pd_gamma
  const void* dy = nullptr;
  const void* x = nullptr;
  const float* rstd = nullptr;
  const float* gamma = nullptr;
  int64_t gamma_stride = 0;
  void* dx = nullptr;
  void* pd_gamma = nullptr;  // [groups, cols]
  int64_t groups = 1;
  int64_t rows = 0;
  int64_t cols = 0;
};

const char* rms_norm_backward(const RmsNormBackwardProblem& p, const CpuExecutor& ex);

}  // namespace jax_lngb
