// The launches of jax_lngb's Ascend RMSNorm kernels (ascend/rms_norm_kernel.asc):
// what the XLA FFI handlers hand over, and the functions that enqueue the
// kernels.
//
// Implemented twice: rms_norm_launch.asc for the NPU (<<<>>> on the stream,
// built with CANN's bisheng), and emu/emu_rms_norm_launch.cc on the CPU
// emulation (so the FFI handlers and the JAX lowerings are testable without
// an NPU).
#pragma once

#include <cstdint>

#include "ascend/launch/grad_beta_launch.h"  // ElemType

namespace jax_lngb::ascend {

struct RmsNormForwardLaunch {
  // Device memory (global memory of the NPU).
  const void* x = nullptr;       // [rows, h_length], type
  const void* gamma = nullptr;   // [h_length], float32
  const void* tiling = nullptr;  // jax_lngb_ascend::RmsNormForwardKernelTiling words
  void* y = nullptr;             // [rows, h_length], type
  void* rstd = nullptr;          // float32 [num_tiles, rstd_stride]
  ElemType type = ElemType::kF32;
  uint64_t rows = 0;
  uint64_t h_length = 0;
  uint64_t tiling_words = 0;
  uint64_t rstd_elems = 0;
  uint32_t block_dim = 1;
};

struct RmsNormBackwardLaunch {
  const void* dy = nullptr;      // [rows, h_length], type
  const void* x = nullptr;       // [rows, h_length], type
  const void* rstd = nullptr;    // float32 [num_tiles, rstd_stride]
  const void* gamma = nullptr;   // [h_length], float32
  const void* tiling = nullptr;  // jax_lngb_ascend::RmsNormBackwardKernelTiling words
  void* dx = nullptr;            // [rows, h_length], type
  void* pd_gamma = nullptr;      // [h_length], out_type
  void* pd_beta = nullptr;       // [h_length], out_type: the sum of dy, which the combine kernel also writes
  void* workspace = nullptr;     // float32 [num_groups, 2, h_length]
  ElemType type = ElemType::kF32;
  ElemType out_type = ElemType::kF32;
  uint64_t rows = 0;
  uint64_t h_length = 0;
  uint64_t tiling_words = 0;
  uint64_t rstd_elems = 0;
  uint64_t workspace_bytes = 0;
  uint32_t block_dim = 1;          // cores of the partials kernel
  uint32_t combine_block_dim = 1;  // cores of the combine kernel
};

// Enqueue the kernels on `stream` (an aclrtStream). Return 0, or an error
// code with a message in `*message` (static or thread-local storage).
int launch_rms_norm_forward(const RmsNormForwardLaunch& launch, void* stream, const char** message);
// The partials kernel, then grad_beta_kernel.asc's combine kernel (the
// stream order is the cross-core barrier between them).
int launch_rms_norm_backward(const RmsNormBackwardLaunch& launch, void* stream, const char** message);

}  // namespace jax_lngb::ascend
