// The Ascend FFI handler bound on the CPU with the emulated launcher. It
// lets a test lower layer_norm_grad_beta with the Ascend rule on the CPU
// platform and run the whole path (lowering -> custom call -> handler ->
// kernels) through XLA without an NPU. Not a product path: the result is the
// emulated kernel's, at emulation speed.
#include <cstdlib>
#include <cstring>
#include <string>

#include "ascend/emu/emu_launch.h"
#include "ascend/ffi/grad_beta_ascend_ffi.h"
#include "tiling/grad_beta_kernel_plan.h"

namespace jax_lngb::ascend {
namespace {

namespace ffi = xla::ffi;

// The architecture and UB size the lowering planned with, read as
// jax_lngb/ascend.py reads them: $JAX_LNGB_ASCEND_ARCH (default dav-2201:
// no NPU handler is built here to say otherwise) and
// $JAX_LNGB_ASCEND_UB_BYTES (default: the architecture's).
tiling::NpuArch planned_arch() {
  const char* s = std::getenv("JAX_LNGB_ASCEND_ARCH");
  return (s && *s) ? tiling::parse_npu_arch(s, "$JAX_LNGB_ASCEND_ARCH") : tiling::NpuArch::kDav2201;
}

uint64_t planned_ub_bytes(tiling::NpuArch arch) {
  const char* s = std::getenv("JAX_LNGB_ASCEND_UB_BYTES");
  const long long v = s ? std::strtoll(s, nullptr, 10) : 0;
  return v > 0 ? uint64_t(v) : uint64_t(tiling::npu_arch_defaults(arch).ub_bytes);
}

int emu_launch_grad_beta(const GradBetaLaunch& l, const char** message) {
  thread_local std::string error;
  emu::GradBetaEmuArgs a;
  a.res = static_cast<const uint8_t*>(l.res_for_gamma);
  a.dy = static_cast<const uint8_t*>(l.dy);
  a.rows = l.rows;
  a.h = l.h_length;
  a.in_type_size = elem_size(l.in_type);
  a.out_type_size = elem_size(l.out_type);
  const auto* t = static_cast<const uint8_t*>(l.tiling);
  a.tiling.assign(t, t + l.tiling_words * 4);
  a.workspace_bytes = l.workspace_bytes;
  a.block_dim = l.block_dim;
  a.combine_block_dim = l.combine_block_dim;
  try {
    const tiling::NpuArch arch = planned_arch();
    a.npu_arch = uint32_t(arch);
    a.ub_bytes = planned_ub_bytes(arch);
    const emu::GradBetaEmuResult r = emu::run_grad_beta(a);
    std::memcpy(l.pd_gamma, r.pd_gamma.data(), r.pd_gamma.size());
    std::memcpy(l.pd_beta, r.pd_beta.data(), r.pd_beta.size());
    return 0;
  } catch (const std::exception& e) {
    error = e.what();
    *message = error.c_str();
    return 1;
  }
}

ffi::Error GradBetaAscendEmu(ffi::AnyBuffer res, ffi::AnyBuffer dy, ffi::Buffer<ffi::U32> tiling,
                             ffi::Result<ffi::AnyBuffer> pd_gamma, ffi::Result<ffi::AnyBuffer> pd_beta,
                             ffi::Result<ffi::Buffer<ffi::F32>> workspace, uint32_t block_dim,
                             uint32_t combine_block_dim, uint32_t combine_cols_per_core, uint32_t rows,
                             uint32_t h_length, uint32_t original_h_length, uint32_t tile_rows, uint32_t num_groups,
                             uint32_t stack_buffer_bytes, uint32_t one_cal_size) {
  const GradBetaAttrs a{block_dim, combine_block_dim, combine_cols_per_core, rows,        h_length, original_h_length,
                        tile_rows, num_groups,        stack_buffer_bytes,    one_cal_size};
  return grad_beta_ascend(emu_launch_grad_beta, res, dy, tiling, pd_gamma, pd_beta, workspace, a);
}

}  // namespace
}  // namespace jax_lngb::ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbGradBetaAscendEmu, jax_lngb::ascend::GradBetaAscendEmu,
                              JAX_LNGB_ASCEND_GRAD_BETA_BINDING(xla::ffi::Ffi::Bind()));
