// The launch of jax_lngb's Ascend LayerNorm kernels (layer_norm_kernels.asc):
// what the XLA FFI handlers hand over, and the functions that enqueue the
// kernels. Implemented twice: layer_norm_launch.asc for the NPU (<<<>>> on
// the stream, built with CANN's bisheng) and emu/emu_layer_norm_ffi.cc on
// the CPU emulation.
#pragma once

#include <cstdint>

#include "ascend/launch/grad_beta_launch.h"  // ElemType, elem_size

namespace jax_lngb::ascend {

struct LayerNormForwardLaunch {
  // Device memory.
  const void* x = nullptr;       // [rows, h_length], type
  const void* gamma = nullptr;   // float32 [h_length]
  const void* beta = nullptr;    // float32 [h_length]
  const void* tiling = nullptr;  // jax_lngb_ascend::LayerNormForwardKernelTiling words
  void* y = nullptr;             // [rows, h_length], type
  void* mean = nullptr;          // float32 [stat_elems]
  void* variance = nullptr;      // float32 [stat_elems]
  ElemType type = ElemType::kF32;
  uint64_t rows = 0;
  uint64_t h_length = 0;
  uint64_t stat_elems = 0;
  uint64_t tiling_words = 0;
  uint32_t block_dim = 1;
};

// LayerNormGrad alone (fused = false: pd_x and res_for_gamma out) or the
// fused backward (fused = true: dx, then the combine kernel turns the
// workspace's group partials into pd_gamma and pd_beta).
struct LayerNormBackwardLaunch {
  const void* dy = nullptr;        // [rows, h_length], in_type
  const void* x = nullptr;         // [rows, h_length], in_type
  const void* mean = nullptr;      // float32 [stat_elems]
  const void* variance = nullptr;  // float32 [stat_elems]
  const void* gamma = nullptr;     // float32 [h_length]
  const void* tiling = nullptr;    // jax_lngb_ascend::LayerNormBackwardKernelTiling words
  void* pd_x = nullptr;            // [rows, h_length], in_type
  void* res_for_gamma = nullptr;   // not fused: [rows, h_length], in_type
  void* workspace = nullptr;       // fused: float32 [num_groups, 2, h_length]
  void* pd_gamma = nullptr;        // fused: [h_length], out_type
  void* pd_beta = nullptr;         // fused: [h_length], out_type
  bool fused = false;
  ElemType in_type = ElemType::kF32;
  ElemType out_type = ElemType::kF32;
  uint64_t rows = 0;
  uint64_t h_length = 0;
  uint64_t stat_elems = 0;
  uint64_t tiling_words = 0;
  uint64_t workspace_bytes = 0;
  uint32_t block_dim = 1;
  uint32_t combine_block_dim = 1;
};

// Enqueue on `stream` (an aclrtStream); 0, or an error code with a message
// in `*message` (valid until the next call on this thread).
int launch_layer_norm_forward(const LayerNormForwardLaunch& launch, void* stream, const char** message);
int launch_layer_norm_backward(const LayerNormBackwardLaunch& launch, void* stream, const char** message);

}  // namespace jax_lngb::ascend
