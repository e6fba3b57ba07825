// The tilings our Ascend RMSNorm kernels read from global memory.
//
// Shared by the host planner (rms_norm_kernel_plan.cc) and the AscendC
// kernel source (ascend/rms_norm_kernel.asc), which also compiles for the
// CPU emulation. Plain uint32 words only (floats as their IEEE bits), so the
// layout is the same for the host compiler, bisheng's device pass and g++.
//
// Rows are cut into tiles of `tile_rows` rows (what one AscendC::RmsNorm or
// LayerNormGradBeta call sees). The float32 rstd of a tile travels in its
// own `rstd_stride`-float slot of global memory (tile_rows rounded up to 8
// floats = 32 bytes), so every copy is whole 32-byte blocks and no two
// cores write one block; the lowering lays rstd out as [num_tiles,
// rstd_stride] and slices the padding off.
#pragma once

#include <cstdint>

#include "tiling/grad_beta_kernel_tiling.h"

namespace jax_lngb_ascend {

struct RmsNormForwardKernelTiling {
  uint32_t rows;               // B*S: rows of the [rows, h_length] x and y
  uint32_t h_length;           // storage H (zero padded to 32 bytes)
  uint32_t original_h_length;  // the real H (the mean of squares is over it)
  uint32_t tile_rows;          // rows per RmsNorm call
  uint32_t num_tiles;          // ceil(rows / tile_rows)
  uint32_t last_tile_rows;     // rows of the last tile
  uint32_t rstd_stride;        // floats per tile in the rstd output (tile_rows rounded up to 8)
  uint32_t buffer_num;         // 2: double-buffered queues; 1 when H is too large for that
  uint32_t epsilon_bits;       // float epsilon
  uint32_t reciprocal_h_bits;  // float 1 / original_h_length (CANN's reciprocalOfHLength)
  uint32_t rms_tmp_bytes;      // sharedTmpBuffer of RmsNorm: one call in one chunk
  uint32_t sum_tmp_bytes;      // sharedTmpBuffer of Sum (GetSumMaxMinTmpSize for the storage H, float)
  uint32_t reserved[4];
  uint32_t api_tile[12];  // CANN RmsNormTiling for a full tile {1, tile_rows, H} / {1, tile_rows, H0}
  uint32_t api_last[12];  // ... and for the last tile
};

static_assert(sizeof(RmsNormForwardKernelTiling) == 40 * 4, "RmsNormForwardKernelTiling is 40 uint32 words");
inline constexpr uint32_t kRmsNormForwardTilingWords = 40;
inline constexpr uint32_t kRmsNormApiTilingWords = 12;

// The backward's first 56 words are a GradBetaKernelTiling: the grouping
// of tiles, LayerNormGradBeta's tilings and the combine split, so the
// combine kernel of grad_beta_kernel.asc adds the group partials of
// workspace [num_groups, 2, h_length] as it does for LayerNormGradBeta.
struct RmsNormBackwardKernelTiling {
  GradBetaKernelTiling gb;     // rows, h_length, tile_rows, ..., api_tile/api_last of LayerNormGradBeta
  uint32_t original_h_length;  // the real H (1/H and the sums are over it)
  uint32_t rstd_stride;        // floats per tile in the rstd operand (tile_rows rounded up to 8)
  uint32_t reciprocal_h_bits;  // float 1 / original_h_length
  uint32_t sum_tmp_bytes;      // sharedTmpBuffer of Sum
  uint32_t reserved[4];
};

static_assert(sizeof(RmsNormBackwardKernelTiling) == 64 * 4, "RmsNormBackwardKernelTiling is 64 uint32 words");
inline constexpr uint32_t kRmsNormBackwardTilingWords = 64;

// Rows per tile at most: RmsNorm's own tiling never gives one chunk more
// than 255 rows (one vector instruction's repeat count), and the kernels'
// per-row loops read scalars from UB once per row.
inline constexpr uint32_t kRmsNormMaxTileRows = 255;

}  // namespace jax_lngb_ascend
