// Host planning of our Ascend RMSNorm kernels (ascend/rms_norm_kernel.asc):
// rows per tile given the unified buffer (UB), the API tilings of each
// tile (CANN's RmsNorm and LayerNormGradBeta tilings), the group split and
// combine geometry of the backward, and the launch geometry.
//
// Each plan mirrors its kernel's buffer allocations exactly (ub_bytes_used
// is what the kernel's InitBuffer calls add up to), and the CPU emulation
// checks that it fits.
#pragma once

#include <cstdint>
#include <vector>

#include "tiling/grad_beta_kernel_plan.h"  // NpuArch, npu_arch_defaults
#include "tiling/rms_norm_kernel_tiling.h"
#include "tiling/rms_norm_tiling.h"

namespace jax_lngb::tiling {

struct RmsNormPlanRequest {
  int64_t rows = 0;           // B*S
  int64_t h = 0;              // storage H; h * type sizes multiples of 32 bytes
  int64_t original_h = 0;     // the real H, >= 2 (CANN's RmsNorm reduction needs two columns)
  int64_t in_type_size = 4;   // x (and dy, y, dx): 2 (half) or 4 (float)
  int64_t out_type_size = 4;  // backward only: pd_gamma, 2 or 4
  double epsilon = 1e-6;      // forward only
  int64_t ub_bytes = 196608;  // unified buffer per core
  int64_t num_cores = 40;     // upper bound on block_dim
  NpuArch npu_arch = NpuArch::kDav2201;
};

struct RmsNormForwardKernelPlan {
  jax_lngb_ascend::RmsNormForwardKernelTiling tiling{};
  RmsNormTiling api_tile, api_last;
  uint32_t block_dim = 0;
  uint64_t rstd_elems = 0;  // float32 rstd output: num_tiles * rstd_stride
  uint64_t ub_bytes_used = 0;
  std::vector<uint8_t> pack() const;  // the kernel's tiling bytes (160)
};

struct RmsNormBackwardKernelPlan {
  jax_lngb_ascend::RmsNormBackwardKernelTiling tiling{};
  LayerNormGradBetaTiling api_tile, api_last;
  uint32_t block_dim = 0;          // cores of the partials kernel
  uint32_t combine_block_dim = 0;  // cores of grad_beta_kernel.asc's combine kernel
  uint64_t rstd_elems = 0;         // float32 rstd operand: num_tiles * rstd_stride
  uint64_t workspace_bytes = 0;    // fp32 [num_groups, 2, h]
  uint64_t ub_bytes_used = 0;
  uint64_t combine_ub_bytes_used = 0;
  std::vector<uint8_t> pack() const;  // the kernel's tiling bytes (256)
};

RmsNormForwardKernelPlan plan_rms_norm_forward_kernel(const RmsNormPlanRequest& req);
RmsNormBackwardKernelPlan plan_rms_norm_backward_kernel(const RmsNormPlanRequest& req);

// Unified-buffer bytes the kernels allocate for a tile of `tile_rows` rows
// (each InitBuffer rounds up to 32 bytes).
uint64_t rms_norm_forward_ub_bytes(uint64_t tile_rows, uint64_t h, uint64_t original_h, uint64_t in_type_size,
                                   uint64_t buffer_num);
uint64_t rms_norm_backward_ub_bytes(uint64_t tile_rows, uint64_t h, uint64_t original_h, uint64_t in_type_size,
                                    uint64_t buffer_num);

// GetSumMaxMinTmpSize(n, 4, ...): the float Sum's sharedTmpBuffer bytes.
uint64_t sum_tmp_bytes_f32(uint64_t n);

}  // namespace jax_lngb::tiling
