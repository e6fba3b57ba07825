// The tiling our Ascend LayerNormGradBeta kernels read from global memory.
//
// Shared by the host planner (grad_beta_kernel_plan.cc) and the AscendC
// kernel source (ascend/grad_beta_kernel.asc), which also compiles for the
// CPU emulation. Plain uint32 words only, so the layout is the same for the
// host compiler, bisheng's device pass and g++.
//
// The work split is fixed by the problem and the unified-buffer size, never
// by the core count: rows are cut into tiles of `tile_rows` rows (what one
// LayerNormGradBeta call sees), consecutive tiles into `num_groups` groups;
// each group's fp32 partial goes to the workspace, and the combine kernel
// adds the group partials in group order. The number of cores only decides
// which core computes which group, so results are bitwise identical for any
// core count.
#pragma once

#include <cstdint>

namespace jax_lngb_ascend {

struct GradBetaKernelTiling {
  uint32_t rows;                   // B*S: rows of the [rows, h_length] inputs
  uint32_t h_length;               // storage H (zero padded to 32 bytes)
  uint32_t tile_rows;              // rows per LayerNormGradBeta call
  uint32_t num_tiles;              // ceil(rows / tile_rows)
  uint32_t last_tile_rows;         // rows of the last tile
  uint32_t tiles_per_group;        // consecutive tiles per group (last group may have fewer)
  uint32_t num_groups;             // fp32 partials in the workspace: [num_groups, 2, h_length]
  uint32_t buffer_num;             // 2: double-buffered queues; 1 when H is too large for that
  uint32_t is_reuse_source;        // float inputs: LayerNormGradBeta<float, true> on the input tile
  uint32_t stack_buffer_bytes;     // sharedTmpBuffer handed to LayerNormGradBeta
  uint32_t combine_cols_per_core;  // columns of H per core in the combine kernel
  uint32_t combine_chunk_cols;     // columns per unified-buffer chunk there
  uint32_t reserved[4];
  uint32_t api_tile[20];  // CANN LayerNormGradBetaTiling for a full tile {1, tile_rows, H, H}
  uint32_t api_last[20];  // ... and for the last tile {1, last_tile_rows, H, H}
};

static_assert(sizeof(GradBetaKernelTiling) == 56 * 4, "GradBetaKernelTiling is 56 uint32 words");

inline constexpr uint32_t kGradBetaTilingWords = 56;
inline constexpr uint32_t kApiTilingWords = 20;
// Upper bound on num_groups. Part of the numerical contract (it fixes how
// partials are associated); 240 divides evenly among 8, 16, 20, 24, 40 and
// 48 cores, the vector-core counts of the supported products.
inline constexpr uint32_t kMaxGroups = 240;

}  // namespace jax_lngb_ascend
