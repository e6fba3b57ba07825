// The Ascend FFI handler bound on the CPU with the emulated launcher. It
// lets a test lower layer_norm_grad_beta with the Ascend rule on the CPU
// platform and run the whole path (lowering -> custom call -> handler ->
// kernels) through XLA without an NPU. Not a product path: the result is the
// emulated kernel's, at emulation speed.
#include <cstring>
#include <string>

#include "ascend/emu/emu_ffi_common.h"
#include "ascend/emu/emu_launch.h"
#include "ascend/ffi/grad_beta_ascend_ffi.h"

namespace jax_lngb::ascend {
namespace {

int emu_launch_grad_beta(const GradBetaLaunch& l, const char** message) {
  emu::GradBetaEmuArgs a;
  a.res = static_cast<const uint8_t*>(l.res_for_gamma);
  a.dy = static_cast<const uint8_t*>(l.dy);
  a.rows = l.rows;
  a.h = l.h_length;
  a.in_type_size = elem_size(l.in_type);
  a.out_type_size = elem_size(l.out_type);
  a.tiling = tiling_bytes(l.tiling, l.tiling_words);
  a.workspace_bytes = l.workspace_bytes;
  a.block_dim = l.block_dim;
  a.combine_block_dim = l.combine_block_dim;
  return run_emulated(message, [&] {
    const tiling::NpuArch arch = planned_arch();
    a.npu_arch = uint32_t(arch);
    a.ub_bytes = planned_ub_bytes(arch);
    const emu::GradBetaEmuResult r = emu::run_grad_beta(a);
    std::memcpy(l.pd_gamma, r.pd_gamma.data(), r.pd_gamma.size());
    std::memcpy(l.pd_beta, r.pd_beta.data(), r.pd_beta.size());
  });
}

JAX_LNGB_ASCEND_GRAD_BETA_HANDLER(GradBetaAscendEmu, emu_launch_grad_beta, , )

}  // namespace
}  // namespace jax_lngb::ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbGradBetaAscendEmu, jax_lngb::ascend::GradBetaAscendEmu,
                              JAX_LNGB_ASCEND_GRAD_BETA_BINDING(xla::ffi::Ffi::Bind()));
