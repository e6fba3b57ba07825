// The launch of jax_lngb's Ascend LayerNormGradBeta kernels: what the XLA
// FFI handler hands over, and the function that enqueues both kernels.
//
// Implemented twice: grad_beta_launch.asc for the NPU (aclrt + <<<>>>,
// built with CANN's bisheng), and emu/emu_ffi.cc on the CPU emulation (so
// the FFI handler and the JAX lowering are testable without an NPU).
#pragma once

#include <cstdint>

namespace jax_lngb::ascend {

enum class ElemType : uint32_t { kF32 = 0, kF16 = 1 };

inline uint32_t elem_size(ElemType t) { return t == ElemType::kF16 ? 2 : 4; }

struct GradBetaLaunch {
  // Device memory (global memory of the NPU).
  const void* res_for_gamma = nullptr;  // [rows, h_length], in_type
  const void* dy = nullptr;             // [rows, h_length], in_type
  const void* tiling = nullptr;         // jax_lngb_ascend::GradBetaKernelTiling words
  void* workspace = nullptr;            // float32 [num_groups, 2, h_length]
  void* pd_gamma = nullptr;             // [h_length], out_type
  void* pd_beta = nullptr;              // [h_length], out_type
  ElemType in_type = ElemType::kF32;
  ElemType out_type = ElemType::kF32;
  uint64_t rows = 0;
  uint64_t h_length = 0;
  uint64_t tiling_words = 0;
  uint64_t workspace_bytes = 0;
  uint32_t block_dim = 1;          // vector cores of the partials kernel
  uint32_t combine_block_dim = 1;  // vector cores of the combine kernel
};

// Enqueues the partials kernel and then the combine kernel on `stream` (an
// aclrtStream; the stream order is the cross-core barrier between them).
// Returns 0, or an error code with a message in `*message` (static or
// thread-local storage; valid until the next call on this thread).
int launch_grad_beta(const GradBetaLaunch& launch, void* stream, const char** message);

}  // namespace jax_lngb::ascend
