// What the Ascend FFI handlers bound to the emulated launchers share: the
// architecture and UB size the lowering planned with, and the turning of an
// emulation fault into the launcher's (code, message) contract.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "tiling/grad_beta_kernel_plan.h"

namespace jax_lngb::ascend {

// Read as jax_lngb/ascend/lowering.py reads them: $JAX_LNGB_ASCEND_ARCH
// (default dav-2201: no NPU handler is built here to say otherwise) and
// $JAX_LNGB_ASCEND_UB_BYTES (default: the architecture's).
inline tiling::NpuArch planned_arch() {
  const char* s = std::getenv("JAX_LNGB_ASCEND_ARCH");
  return (s && *s) ? tiling::parse_npu_arch(s, "$JAX_LNGB_ASCEND_ARCH") : tiling::NpuArch::kDav2201;
}

inline uint64_t planned_ub_bytes(tiling::NpuArch arch) {
  const char* s = std::getenv("JAX_LNGB_ASCEND_UB_BYTES");
  const long long v = s ? std::strtoll(s, nullptr, 10) : 0;
  return v > 0 ? uint64_t(v) : uint64_t(tiling::npu_arch_defaults(arch).ub_bytes);
}

// The launch's tiling words as the bytes the emulated kernels read.
inline std::vector<uint8_t> tiling_bytes(const void* tiling, uint64_t words) {
  const auto* t = static_cast<const uint8_t*>(tiling);
  return std::vector<uint8_t>(t, t + words * 4);
}

// Runs `body`: 0, or 1 with the exception's text in `*message` (thread-local
// storage, valid until the next failure on this thread), as a launcher returns.
template <class Body>
int run_emulated(const char** message, Body&& body) {
  thread_local std::string error;
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    error = e.what();
    *message = error.c_str();
    return 1;
  }
}

}  // namespace jax_lngb::ascend
