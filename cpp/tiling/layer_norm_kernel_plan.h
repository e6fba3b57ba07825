// Host planning of our Ascend LayerNorm kernels (ascend/layer_norm_kernels.asc):
// the rows per API call that fit the unified buffer (UB), the
// sharedTmpBuffer each call gets, CANN's API tilings for a full and a last
// tile, and the launch geometry.
//
// Each *_ub_bytes function adds up the kernel's InitBuffer calls, in their
// order (each rounded up to 32 bytes); the CPU emulation checks the kernel
// against the UB size, so a plan that disagrees with its kernel faults in
// the tests.
#pragma once

#include <cstdint>
#include <vector>

#include "tiling/grad_beta_kernel_plan.h"  // NpuArchDefaults, npu_arch_defaults
#include "tiling/layer_norm_grad_beta_tiling.h"
#include "tiling/layer_norm_grad_tiling.h"
#include "tiling/layer_norm_kernel_tiling.h"
#include "tiling/layer_norm_tiling.h"

namespace jax_lngb::tiling {

struct LayerNormKernelRequest {
  int64_t rows = 0;           // B*S
  int64_t h = 0;              // storage H: h * type_size (and h * out_type_size) multiples of 32
  int64_t original_h = 0;     // the real H (<= h); 0 means h
  int64_t type_size = 4;      // x's element: 2 (half) or 4 (float)
  int64_t out_type_size = 4;  // fused backward: pd_gamma / pd_beta's element
  int64_t ub_bytes = 196608;  // unified buffer per core
  int64_t num_cores = 40;     // upper bound on block_dim
  double epsilon = 1e-5;
  NpuArch npu_arch = NpuArch::kDav2201;
};

struct LayerNormForwardKernelPlan {
  jax_lngb_ascend::LayerNormForwardKernelTiling tiling{};
  LayerNormTiling api_tile;  // decoded copies of tiling.api_tile / api_last
  LayerNormTiling api_last;
  uint32_t block_dim = 0;
  uint64_t ub_bytes_used = 0;
  uint64_t stat_elems() const { return uint64_t(tiling.num_tiles) * tiling.stat_stride; }
  std::vector<uint8_t> pack() const;  // 272 bytes
};

struct LayerNormBackwardKernelPlan {
  jax_lngb_ascend::LayerNormBackwardKernelTiling tiling{};
  LayerNormGradTiling lng_tile;  // decoded copies
  LayerNormGradTiling lng_last;
  LayerNormGradBetaTiling gb_tile;
  LayerNormGradBetaTiling gb_last;
  uint32_t block_dim = 0;          // cores of the backward kernel
  uint32_t combine_block_dim = 0;  // fused: cores of the combine kernel
  uint64_t workspace_bytes = 0;    // fused: float32 [num_groups, 2, h]
  uint64_t ub_bytes_used = 0;
  uint64_t combine_ub_bytes_used = 0;
  uint64_t stat_elems() const { return uint64_t(tiling.gb.num_tiles) * tiling.stat_stride; }
  std::vector<uint8_t> pack() const;  // 496 bytes
};

// Throws TilingError (with the numbers) for bad requests and when one row
// does not fit the unified buffer (the APIs never split H).
LayerNormForwardKernelPlan plan_layer_norm_forward_kernel(const LayerNormKernelRequest& req);
// fused: the fused backward (LayerNormGrad -> LayerNormGradBeta); otherwise
// LayerNormGrad alone (pd_x and res_for_gamma in x's type).
LayerNormBackwardKernelPlan plan_layer_norm_backward_kernel(const LayerNormKernelRequest& req, bool fused);

// What the kernels' Init allocate for a tile of `tile_rows` rows.
uint64_t layer_norm_forward_ub_bytes(uint64_t tile_rows, uint64_t h, uint64_t type_size, bool padded,
                                     uint64_t tmp_bytes, uint64_t buffer_num);
uint64_t layer_norm_backward_ub_bytes(uint64_t tile_rows, uint64_t h, uint64_t type_size, bool padded, bool fused,
                                      uint64_t tmp_bytes, uint64_t buffer_num);

}  // namespace jax_lngb::tiling
