// The Ascend LayerNorm FFI handlers bound on the CPU with the emulated
// launcher, so a test can lower the LayerNorm primitives with the Ascend
// rules on the CPU platform and run lowering -> custom call -> handler ->
// kernels through XLA without an NPU. Not a product path: emulation speed.
#include "ascend/emu/emu_ffi_common.h"
#include "ascend/emu/emu_layer_norm_launch.h"
#include "ascend/ffi/layer_norm_ascend_ffi.h"

namespace jax_lngb::ascend {
namespace {

namespace ffi = xla::ffi;

// The architecture and UB size the lowering planned with.
emu::LayerNormEmuConfig planned_config() {
  const tiling::NpuArch arch = planned_arch();
  emu::LayerNormEmuConfig c;
  c.npu_arch = uint32_t(arch);
  c.ub_bytes = planned_ub_bytes(arch);
  return c;
}

struct EmuForward {
  int operator()(const LayerNormForwardLaunch& l, const char** message) const {
    return run_emulated(message, [&] { emu::run_layer_norm_forward(l, planned_config()); });
  }
};

struct EmuBackward {
  int operator()(const LayerNormBackwardLaunch& l, const char** message) const {
    return run_emulated(message, [&] { emu::run_layer_norm_backward(l, planned_config()); });
  }
};

JAX_LNGB_ASCEND_LN_HANDLERS(LayerNormEmu, EmuForward{}, EmuBackward{}, , )

}  // namespace
}  // namespace jax_lngb::ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormForwardAscendEmu, jax_lngb::ascend::LayerNormEmuForward,
                              JAX_LNGB_ASCEND_LN_FORWARD_BINDING(xla::ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormGradAscendEmu, jax_lngb::ascend::LayerNormEmuGrad,
                              JAX_LNGB_ASCEND_LN_GRAD_BINDING(xla::ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormBackwardAscendEmu, jax_lngb::ascend::LayerNormEmuBackward,
                              JAX_LNGB_ASCEND_LN_BACKWARD_BINDING(xla::ffi::Ffi::Bind()));
