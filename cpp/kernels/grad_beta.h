// LayerNormGradBeta on the CPU: pd_gamma[g, :] = sum over rows of
// res_for_gamma * dy and pd_beta[g, :] = sum over rows of dy, for each of
// `groups` independent [rows, cols] problems laid out one after another.
// Groups are what vmap adds: one [cols] result per mapped element.
#pragma once

#include <cstdint>

#include "base/dtypes.h"
#include "base/executor.h"

namespace jax_lngb {

struct GradBetaProblem {
  DType in_dtype = DType::kF32;   // res_for_gamma and dy
  DType out_dtype = DType::kF32;  // pd_gamma and pd_beta
  const void* res_for_gamma = nullptr;
  const void* dy = nullptr;
  void* pd_gamma = nullptr;
  void* pd_beta = nullptr;
  int64_t groups = 1;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Returns nullptr on success, else a static description of what is wrong.
const char* grad_beta(const GradBetaProblem& p, const CpuExecutor& ex);

// Block partials of a gamma/beta reduction, as every producer lays them out:
// [groups][blocks][2][cols] float32, gamma then beta for each block.
struct GradBetaPartials {
  float* data = nullptr;
  int64_t groups = 0;
  int64_t blocks = 0;
  int64_t cols = 0;

  float* gamma(int64_t g, int64_t b) const { return data + ((g * blocks + b) * 2) * cols; }
  float* beta(int64_t g, int64_t b) const { return gamma(g, b) + cols; }
};

// Adds the partials of each group in block order and narrows the sums once
// into pd_gamma/pd_beta ([groups][cols] of out dtype). `col_chunk` sets the
// granularity of the parallel split (it cannot change any result).
void combine_partials(const GradBetaPartials& partials, DType out, void* pd_gamma, void* pd_beta, int64_t col_chunk,
                      const CpuExecutor& ex);

}  // namespace jax_lngb
