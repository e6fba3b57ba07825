// Host planning of our Ascend LayerNormGradBeta kernels: how many rows one
// LayerNormGradBeta call handles given the unified buffer (UB), the
// sharedTmpBuffer size, the group split, and the launch geometry.
//
// The plan mirrors the kernel's buffer allocations exactly (ub_bytes_used
// is what the kernel's InitBuffer calls add up to), and the CPU emulation
// checks that it fits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tiling/grad_beta_kernel_tiling.h"
#include "tiling/layer_norm_grad_beta_tiling.h"
#include "tiling/layer_norm_grad_tiling.h"  // NpuArch

namespace jax_lngb::tiling {

// How big a sharedTmpBuffer to give LayerNormGradBeta.
enum class TmpBufferPolicy {
  kAuto,   // what one call needs for a single pass: the minimum when the
           // source is reused (half is always computed on fp32 copies that
           // are reused) or the implementation ignores the buffer (3510),
           // else one tile of fp32 products
  kMin,    // GetLayerNormGradBetaMaxMinTmpSize's minimum
  kMax,    // ... its maximum
  kBytes,  // exactly `tmp_bytes`
};

// What the plan needs to know about an NPU architecture.
//
// LayerNormGradBeta has two implementations in CANN (asc-devkit,
// impl/adv_api/detail/normalization/layernormgrad/):
//   common (dav-2002, dav-2201): walks the call's rows in chunks of
//     oneCalSize elements through sharedTmpBuffer, with originalHLength as
//     the row stride;
//   3510 (dav-3510, 5102): ignores sharedTmpBuffer, oneCalSize and
//     originalHLength, strides rows by hLength and counts them in a
//     uint16_t (a call with bsLength > 65535 never ends).
// The plan hands either one only calls it handles: hLength ==
// originalHLength == the padded H, and at most kMaxRowsPerCall3510 rows per
// call on the 3510 implementation.
struct NpuArchDefaults {
  int64_t ub_bytes;     // unified buffer a TPipe may use on one core
  int64_t num_cores;    // default upper bound on block_dim
  const char* block;    // what block_dim counts: "vector cores" or "AI cores"
  bool grad_beta_3510;  // LayerNormGradBeta is the 3510 implementation
};

inline constexpr uint32_t kMaxRowsPerCall3510 = 65535;

NpuArchDefaults npu_arch_defaults(NpuArch arch);

struct GradBetaPlanRequest {
  int64_t rows = 0;           // B*S
  int64_t h = 0;              // storage H; h * in_type_size and h * out_type_size multiples of 32
  int64_t original_h = 0;     // the real H (<= h), for information only
  int64_t in_type_size = 4;   // 2 (half) or 4 (float)
  int64_t out_type_size = 4;  // 2 (half) or 4 (float)
  int64_t ub_bytes = 196608;  // unified buffer per vector core
  int64_t num_cores = 8;      // vector cores available (upper bound on block_dim)
  TmpBufferPolicy tmp_policy = TmpBufferPolicy::kAuto;
  int64_t tmp_bytes = 0;                 // for kBytes
  bool is_reuse_source = false;          // float only
  NpuArch npu_arch = NpuArch::kDav2201;  // which LayerNormGradBeta implementation runs the tiles
};

struct GradBetaKernelPlan {
  jax_lngb_ascend::GradBetaKernelTiling tiling{};
  LayerNormGradBetaTiling api_tile;  // decoded copies of tiling.api_tile / api_last
  LayerNormGradBetaTiling api_last;
  uint32_t block_dim = 0;          // cores of the partials kernel
  uint32_t combine_block_dim = 0;  // cores of the combine kernel
  uint64_t workspace_bytes = 0;    // fp32 [num_groups, 2, h]
  uint64_t ub_bytes_used = 0;      // partials kernel
  uint64_t combine_ub_bytes_used = 0;

  std::vector<uint8_t> pack() const;  // the kernel's tiling bytes (224)
};

GradBetaKernelPlan plan_grad_beta_kernel(const GradBetaPlanRequest& req);

// Parses "auto", "min" or "max"; throws TilingError otherwise.
TmpBufferPolicy parse_tmp_policy(const std::string& name);

// Unified-buffer bytes the partials kernel allocates for a tile of `tile_rows`
// rows (each InitBuffer rounds up to 32 bytes), and the combine kernel for a
// chunk of `chunk_cols` columns.
uint64_t partials_ub_bytes(uint64_t tile_rows, uint64_t h, uint64_t in_type_size, uint64_t stack_bytes,
                           uint64_t buffer_num);
uint64_t combine_ub_bytes(uint64_t chunk_cols, uint64_t out_type_size, uint64_t buffer_num);

}  // namespace jax_lngb::tiling
