// LayerNormGradBeta on the CPU: pd_gamma[g, :] = sum over rows of
// res_for_gamma * dy and pd_beta[g, :] = sum over rows of dy, for each of
// `groups` independent [rows, cols] problems laid out one after another.
// Groups are what vmap adds: one [cols] result per mapped element.
#pragma once

#include <cstdint>

#include "dtypes.h"
#include "executor.h"

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

// Writes n float32 values as `out` dtype (round to nearest even).
void store_as(DType out, const float* src, void* dst, int64_t n);

}  // namespace jax_lngb
