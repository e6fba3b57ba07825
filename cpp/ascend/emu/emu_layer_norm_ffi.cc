// The Ascend LayerNorm FFI handlers bound on the CPU with the emulated
// launcher, so a test can lower the LayerNorm primitives with the Ascend
// rules on the CPU platform and run lowering -> custom call -> handler ->
// kernels through XLA without an NPU. Not a product path: emulation speed.
#include <cstdlib>
#include <exception>
#include <string>

#include "ascend/emu/emu_layer_norm_launch.h"
#include "ascend/ffi/layer_norm_ascend_ffi.h"
#include "tiling/grad_beta_kernel_plan.h"

namespace jax_lngb::ascend {
namespace {

namespace ffi = xla::ffi;

// The architecture and UB size the lowering planned with, read as
// jax_lngb/ascend/lowering.py reads them.
emu::LayerNormEmuConfig planned_config() {
  const char* s = std::getenv("JAX_LNGB_ASCEND_ARCH");
  const tiling::NpuArch arch =
      (s && *s) ? tiling::parse_npu_arch(s, "$JAX_LNGB_ASCEND_ARCH") : tiling::NpuArch::kDav2201;
  const char* u = std::getenv("JAX_LNGB_ASCEND_UB_BYTES");
  const long long v = u ? std::strtoll(u, nullptr, 10) : 0;
  emu::LayerNormEmuConfig c;
  c.npu_arch = uint32_t(arch);
  c.ub_bytes = v > 0 ? uint64_t(v) : uint64_t(tiling::npu_arch_defaults(arch).ub_bytes);
  return c;
}

template <class Launch, class Run>
int run_emulated(const Launch& l, const char** message, Run run) {
  thread_local std::string error;
  try {
    run(l, planned_config());
    return 0;
  } catch (const std::exception& e) {
    error = e.what();
    *message = error.c_str();
    return 1;
  }
}

struct EmuForward {
  int operator()(const LayerNormForwardLaunch& l, const char** message) const {
    return run_emulated(l, message, emu::run_layer_norm_forward);
  }
};

struct EmuBackward {
  int operator()(const LayerNormBackwardLaunch& l, const char** message) const {
    return run_emulated(l, message, emu::run_layer_norm_backward);
  }
};

JAX_LNGB_ASCEND_LN_HANDLERS(LayerNormEmu, EmuForward{}, EmuBackward{}, )

}  // namespace
}  // namespace jax_lngb::ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormForwardAscendEmu, jax_lngb::ascend::LayerNormEmuForward,
                              JAX_LNGB_ASCEND_LN_FORWARD_BINDING(xla::ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormGradAscendEmu, jax_lngb::ascend::LayerNormEmuGrad,
                              JAX_LNGB_ASCEND_LN_GRAD_BINDING(xla::ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormBackwardAscendEmu, jax_lngb::ascend::LayerNormEmuBackward,
                              JAX_LNGB_ASCEND_LN_BACKWARD_BINDING(xla::ffi::Ffi::Bind()));
