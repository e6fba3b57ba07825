// The Ascend RMSNorm FFI handlers bound on the CPU with the emulated
// launchers: a test lowers the RMSNorm primitives with the Ascend rules on
// the CPU platform and runs lowering -> custom call -> handler -> kernels
// through XLA without an NPU. Not a product path: emulation speed.
#include <cstring>
#include <string>

#include "ascend/emu/emu_ffi_common.h"
#include "ascend/emu/emu_rms_norm_launch.h"
#include "ascend/ffi/rms_norm_ascend_ffi.h"

namespace jax_lngb::ascend {
namespace {

int emu_forward(const RmsNormForwardLaunch& l, const char** message) {
  emu::RmsNormForwardEmuArgs a;
  a.x = static_cast<const uint8_t*>(l.x);
  a.gamma = static_cast<const float*>(l.gamma);
  a.rows = l.rows;
  a.h = l.h_length;
  a.type_size = elem_size(l.type);
  a.tiling = tiling_bytes(l.tiling, l.tiling_words);
  a.rstd_elems = l.rstd_elems;
  a.block_dim = l.block_dim;
  return run_emulated(message, [&] {
    const tiling::NpuArch arch = planned_arch();
    a.npu_arch = uint32_t(arch);
    a.ub_bytes = planned_ub_bytes(arch);
    const emu::RmsNormForwardEmuResult r = emu::run_rms_norm_forward(a);
    std::memcpy(l.y, r.y.data(), r.y.size());
    std::memcpy(l.rstd, r.rstd.data(), r.rstd.size() * 4);
  });
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
  a.tiling = tiling_bytes(l.tiling, l.tiling_words);
  a.rstd_elems = l.rstd_elems;
  a.workspace_bytes = l.workspace_bytes;
  a.block_dim = l.block_dim;
  a.combine_block_dim = l.combine_block_dim;
  return run_emulated(message, [&] {
    const tiling::NpuArch arch = planned_arch();
    a.npu_arch = uint32_t(arch);
    a.ub_bytes = planned_ub_bytes(arch);
    const emu::RmsNormBackwardEmuResult r = emu::run_rms_norm_backward(a);
    std::memcpy(l.dx, r.dx.data(), r.dx.size());
    std::memcpy(l.pd_gamma, r.pd_gamma.data(), r.pd_gamma.size());
    std::memcpy(l.pd_beta, r.pd_beta.data(), r.pd_beta.size());
  });
}

// Both launches, chosen by overload.
struct EmuLaunch {
  int operator()(const RmsNormForwardLaunch& l, const char** message) const { return emu_forward(l, message); }
  int operator()(const RmsNormBackwardLaunch& l, const char** message) const { return emu_backward(l, message); }
};

JAX_LNGB_ASCEND_RMS_NORM_HANDLERS(RmsNormAscendEmu, EmuLaunch{}, , )

}  // namespace
}  // namespace jax_lngb::ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbRmsNormForwardAscendEmu, jax_lngb::ascend::RmsNormAscendEmuForward,
                              JAX_LNGB_ASCEND_RMS_NORM_FORWARD_BINDING(xla::ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbRmsNormBackwardAscendEmu, jax_lngb::ascend::RmsNormAscendEmuBackward,
                              JAX_LNGB_ASCEND_RMS_NORM_BACKWARD_BINDING(xla::ffi::Ffi::Bind()));
