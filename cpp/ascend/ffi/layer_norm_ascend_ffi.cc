// The NPU handlers of the LayerNorm targets: the stream comes from XLA's FFI
// context (the Ascend plugin's aclrtStream), the launchers are the CANN ones.
// Compiled in every build (only the XLA FFI headers are needed); linked into
// `jax_lngb._ascend` only with CANN.
#include "ascend/ffi/layer_norm_ascend_ffi.h"

namespace {

namespace ffi = xla::ffi;

struct NpuForward {
  void* stream;
  int operator()(const jax_lngb::ascend::LayerNormForwardLaunch& l, const char** message) const {
    return jax_lngb::ascend::launch_layer_norm_forward(l, stream, message);
  }
};

struct NpuBackward {
  void* stream;
  int operator()(const jax_lngb::ascend::LayerNormBackwardLaunch& l, const char** message) const {
    return jax_lngb::ascend::launch_layer_norm_backward(l, stream, message);
  }
};

JAX_LNGB_ASCEND_LN_HANDLERS(LayerNormNpu, NpuForward{stream}, NpuBackward{stream},
                            JAX_LNGB_ASCEND_CHECK(jax_lngb::ascend::check_stream(stream));
                            , void* stream, )

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbLayerNormForwardAscend, LayerNormNpuForward,
    JAX_LNGB_ASCEND_LN_FORWARD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbLayerNormGradAscend, LayerNormNpuGrad,
    JAX_LNGB_ASCEND_LN_GRAD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbLayerNormBackwardAscend, LayerNormNpuBackward,
    JAX_LNGB_ASCEND_LN_BACKWARD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
