// The tilings our Ascend LayerNorm kernels (ascend/layer_norm_kernels.asc)
// read from global memory: plain uint32 words, shared by the host planner
// (layer_norm_kernel_plan.cc), the kernel source and its CPU emulation.
//
// Rows are cut into tiles of `tile_rows` rows, one AscendC API call each
// (the last tile has `last_tile_rows`); tiles go to cores round robin.
// Per-row statistics travel in global memory as float32 blocks of
// `stat_stride` = ceil8(tile_rows) values per tile (one 32-byte aligned
// DataCopy per tile, whatever the tile's row count); the lowering converts
// between that layout and [rows].
//
// Every API call runs on float32 data in the unified buffer (half inputs
// are cast to float32 copies first), so the statistics are float32 and the
// API tilings are those of type size 4.
#pragma once

#include <cstdint>

#include "tiling/grad_beta_kernel_tiling.h"

namespace jax_lngb_ascend {

// Forward: y = LayerNorm(x) with its mean and variance.
struct LayerNormForwardKernelTiling {
  uint32_t rows;               // B*S rows of [rows, h_length]
  uint32_t h_length;           // storage H (zero padded to 32 bytes of x's type)
  uint32_t original_h_length;  // the real H; < h_length means padded columns to neutralize
  uint32_t tile_rows;          // rows per LayerNorm call
  uint32_t num_tiles;          // ceil(rows / tile_rows)
  uint32_t last_tile_rows;     // rows of the last tile
  uint32_t stat_stride;        // float32 statistics per tile in GM: ceil8(tile_rows)
  uint32_t buffer_num;         // 2: double-buffered queues; 1 when the UB is too small for that
  uint32_t tmp_bytes;          // sharedTmpBuffer handed to LayerNorm
  uint32_t epsilon_bits;       // float32 epsilon, as its IEEE bits
  uint32_t reserved[6];
  uint32_t api_tile[26];  // CANN LayerNormTiling for {1, tile_rows, H, original H}
  uint32_t api_last[26];  // ... for {1, last_tile_rows, H, original H}
};
static_assert(sizeof(LayerNormForwardKernelTiling) == 68 * 4, "LayerNormForwardKernelTiling is 68 words");
inline constexpr uint32_t kLayerNormForwardTilingWords = 68;
inline constexpr uint32_t kLayerNormApiTilingWords = 26;

// Backward: LayerNormGrad per tile, alone (layer_norm_grad: pd_x and
// res_for_gamma) or feeding LayerNormGradBeta on the same tile (the fused
// backward: dx, and per-group float32 partials of pd_gamma / pd_beta that
// grad_beta_kernel.asc's combine kernel adds in group order).
//
// `gb` comes first so that the combine kernel, which reads a
// GradBetaKernelTiling, can be handed this very tiling: its rows, h_length,
// tile and group split, combine columns and LayerNormGradBeta tilings
// ({1, tile_rows, H, H}, float32, isReuseSource) are those of the backward.
struct LayerNormBackwardKernelTiling {
  GradBetaKernelTiling gb;
  uint32_t original_h_length;  // the real H
  uint32_t stat_stride;        // as in the forward
  uint32_t tmp_bytes;          // sharedTmpBuffer, shared by LayerNormGrad and LayerNormGradBeta
  uint32_t epsilon_bits;       // float32 epsilon, as its IEEE bits
  uint32_t fused;              // 1: the fused backward's plan, 0: LayerNormGrad alone
  uint32_t reserved[3];
  uint32_t lng_tile[30];  // CANN LayerNormGradTiling for {1, tile_rows, H, original H}
  uint32_t lng_last[30];  // ... for {1, last_tile_rows, H, original H}
};
static_assert(sizeof(LayerNormBackwardKernelTiling) == 124 * 4, "LayerNormBackwardKernelTiling is 124 words");
inline constexpr uint32_t kLayerNormBackwardTilingWords = 124;
inline constexpr uint32_t kLayerNormGradApiTilingWords = 30;

}  // namespace jax_lngb_ascend
