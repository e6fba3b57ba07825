// The Ascend RMSNorm FFI handlers bound on the CPU with the emulated
// launchers: a test lowers the RMSNorm primitives with the Ascend rules on
// the CPU platform and runs lowering -> custom call -> handler -> kernels
// through XLA without an NPU. Not a product path: emulation speed.
#include <cstdlib>
#include <cstring>
#include <string>

#include "ascend/emu/emu_rms_norm_launch.h"
#include "ascend/ffi/rms_norm_ascend_ffi.h"
#include "tiling/grad_beta_kernel_plan.h"

namespace jax_lngb::ascend {
namespace {

namespace ffi = xla::ffi;

// The architecture and UB size the lowering planned with, read as
// jax_lngb/ascend/lowering.py reads them (see emu_ffi.cc).
tiling::NpuArch rms_planned_arch() {
  const char* s = std::getenv("JAX_LNGB_ASCEND_ARCH");
  return (s && *s) ? tiling::parse_npu_arch(s, "$JAX_LNGB_ASCEND_ARCH") : tiling::NpuArch::kDav2201;
}

uint64_t rms_planned_ub_bytes(tiling::NpuArch arch) {
  const char* s = std::getenv("JAX_LNGB_ASCEND_UB_BYTES");
  const long long v = s ? std::strtoll(s, nullptr, 10) : 0;
  return v > 0 ? uint64_t(v) : uint64_t(tiling::npu_arch_defaults(arch).ub_bytes);
}

int fail_with(const std::exception& e, const char** message) {
  thread_local std::string error;
  error = e.what();
  *message = error.c_str();
  return 1;
}

int emu_forward(const RmsNormForwardLaunch& l, const char** message) {
  emu::RmsNormForwardEmuArgs a;
  a.x = static_cast<const uint8_t*>(l.x);
  a.gamma = static_cast<const float*>(l.gamma);
  a.rows = l.rows;
  a.h = l.h_length;
  a.type_size = elem_size(l.type);
  const auto* t = static_cast<const uint8_t*>(l.tiling);
  a.tiling.assign(t, t + l.tiling_words * 4);
  a.rstd_elems = l.rstd_elems;
  a.block_dim = l.block_dim;
  try {
    const tiling::NpuArch arch = rms_planned_arch();
    a.npu_arch = uint32_t(arch);
    a.ub_bytes = rms_planned_ub_bytes(arch);
    const emu::RmsNormForwardEmuResult r = emu::run_rms_norm_forward(a);
    std::memcpy(l.y, r.y.data(), r.y.size());
    std::memcpy(l.rstd, r.rstd.data(), r.rstd.size() * 4);
    return 0;
  } catch (const std::exception& e) {
    return fail_with(e, message);
  }
}

int emu_backward(const RmsNormBackwardLaunch& l, const char** message) {
  emu::RmsNormBackwardEmuArgs a;
  a.dy = static_cast<const uint8_t*>(l.dy);
  a.x = static_cast<const uint8_t*>(l.x);
  a.rstd = static_cast<const float*>(l.rstd);
  a.gamma = static_cast<const float*>(l.gamma);
  a.rows = l.rows;
  a.h = l.h_length;
  a.type_size = elem_size(l.type);
  a.out_type_size = elem_size(l.out_type);
  const auto* t = static_cast<const uint8_t*>(l.tiling);
  a.tiling.assign(t, t + l.tiling_words * 4);
  a.rstd_elems = l.rstd_elems;
  a.workspace_bytes = l.workspace_bytes;
  a.block_dim = l.block_dim;
  a.combine_block_dim = l.combine_block_dim;
  try {
    const tiling::NpuArch arch = rms_planned_arch();
    a.npu_arch = uint32_t(arch);
    a.ub_bytes = rms_planned_ub_bytes(arch);
    const emu::RmsNormBackwardEmuResult r = emu::run_rms_norm_backward(a);
    std::memcpy(l.dx, r.dx.data(), r.dx.size());
    std::memcpy(l.pd_gamma, r.pd_gamma.data(), r.pd_gamma.size());
    std::memcpy(l.pd_beta, r.pd_beta.data(), r.pd_beta.size());
    return 0;
  } catch (const std::exception& e) {
    return fail_with(e, message);
  }
}

ffi::Error RmsNormForwardAscendEmu(ffi::AnyBuffer x, ffi::Buffer<ffi::F32> gamma, ffi::Buffer<ffi::U32> tiling,
                                   ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Buffer<ffi::F32>> rstd,
                                   uint32_t block_dim, uint32_t rows, uint32_t h_length, uint32_t original_h_length,
                                   uint32_t tile_rows, uint32_t num_tiles) {
  const RmsNormForwardAttrs a{block_dim, rows, h_length, original_h_length, tile_rows, num_tiles};
  return rms_norm_forward_ascend(emu_forward, x, gamma, tiling, y, rstd, a);
}

ffi::Error RmsNormBackwardAscendEmu(ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::Buffer<ffi::F32> rstd,
                                    ffi::Buffer<ffi::F32> gamma, ffi::Buffer<ffi::U32> tiling,
                                    ffi::Result<ffi::AnyBuffer> dx, ffi::Result<ffi::AnyBuffer> pd_gamma,
                                    ffi::Result<ffi::AnyBuffer> pd_beta, ffi::Result<ffi::Buffer<ffi::F32>> workspace,
                                    uint32_t block_dim, uint32_t combine_block_dim, uint32_t combine_cols_per_core,
                                    uint32_t rows, uint32_t h_length, uint32_t original_h_length, uint32_t tile_rows,
                                    uint32_t num_tiles, uint32_t num_groups) {
  const RmsNormBackwardAttrs a{block_dim, combine_block_dim, combine_cols_per_core,
                               rows,      h_length,          original_h_length,
                               tile_rows, num_tiles,         num_groups};
  return rms_norm_backward_ascend(emu_backward, dy, x, rstd, gamma, tiling, dx, pd_gamma, pd_beta, workspace, a);
}

}  // namespace
}  // namespace jax_lngb::ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbRmsNormForwardAscendEmu, jax_lngb::ascend::RmsNormForwardAscendEmu,
                              JAX_LNGB_ASCEND_RMS_NORM_FORWARD_BINDING(xla::ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbRmsNormBackwardAscendEmu, jax_lngb::ascend::RmsNormBackwardAscendEmu,
                              JAX_LNGB_ASCEND_RMS_NORM_BACKWARD_BINDING(xla::ffi::Ffi::Bind()));
