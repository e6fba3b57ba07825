// The NPU handler: the stream comes from XLA's FFI context (the Ascend
// plugin's aclrtStream), the launcher is the CANN one. Built only with CANN.
#include "ascend/ffi/grad_beta_ascend_ffi.h"

namespace {

struct NpuLaunch {
  void* stream;
  int operator()(const jax_lngb::ascend::GradBetaLaunch& l, const char** message) const {
    return jax_lngb::ascend::launch_grad_beta(l, stream, message);
  }
};

JAX_LNGB_ASCEND_GRAD_BETA_HANDLER(GradBetaAscendNpu, NpuLaunch{stream},
                                  JAX_LNGB_ASCEND_CHECK(jax_lngb::ascend::check_stream(stream));
                                  , void* stream, )

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbGradBetaAscend, GradBetaAscendNpu,
    JAX_LNGB_ASCEND_GRAD_BETA_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
