// The NPU handlers of the RMSNorm kernels: the stream comes from XLA's FFI
// context (the Ascend plugin's aclrtStream), the launchers are the CANN
// ones. Compiled in every build with XLA's FFI headers; linked only with CANN.
#include "ascend/ffi/rms_norm_ascend_ffi.h"

namespace {

// Both launches on the stream of the FFI context.
struct NpuLaunch {
  void* stream;
  int operator()(const jax_lngb::ascend::RmsNormForwardLaunch& l, const char** message) const {
    return jax_lngb::ascend::launch_rms_norm_forward(l, stream, message);
  }
  int operator()(const jax_lngb::ascend::RmsNormBackwardLaunch& l, const char** message) const {
    return jax_lngb::ascend::launch_rms_norm_backward(l, stream, message);
  }
};

JAX_LNGB_ASCEND_RMS_NORM_HANDLERS(RmsNormAscendNpu, NpuLaunch{stream},
                                  JAX_LNGB_ASCEND_CHECK(jax_lngb::ascend::check_stream(stream));
                                  , void* stream, )

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbRmsNormForwardAscend, RmsNormAscendNpuForward,
    JAX_LNGB_ASCEND_RMS_NORM_FORWARD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbRmsNormBackwardAscend, RmsNormAscendNpuBackward,
    JAX_LNGB_ASCEND_RMS_NORM_BACKWARD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
