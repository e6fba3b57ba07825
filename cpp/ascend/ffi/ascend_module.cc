// The `jax_lngb._ascend` extension (CANN builds only): the NPU FFI handler
// capsule, registered by jax_lngb/ascend.py for the Ascend platform.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "xla/ffi/api/c_api.h"

extern "C" XLA_FFI_Error* JaxLngbGradBetaAscend(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* JaxLngbLayerNormForwardAscend(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* JaxLngbLayerNormGradAscend(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* JaxLngbLayerNormBackwardAscend(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* JaxLngbRmsNormForwardAscend(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* JaxLngbRmsNormBackwardAscend(XLA_FFI_CallFrame* call_frame);

namespace nb = nanobind;

NB_MODULE(_ascend, m) {
  m.doc() = "jax_lngb Ascend NPU kernels (XLA FFI handler, CANN launcher)";
  // The NPU architecture the kernels were compiled for (CMAKE_ASC_ARCHITECTURES).
  m.def("npu_arch", [] { return JAX_LNGB_NPU_ARCH; }, "The NPU architecture the kernels were compiled for.");
  m.def(
      "registrations",
      [] {
        nb::dict d;
        d["jax_lngb_ascend_layer_norm_grad_beta"] = nb::capsule(reinterpret_cast<void*>(&JaxLngbGradBetaAscend));
        d["jax_lngb_ascend_layer_norm_forward"] = nb::capsule(reinterpret_cast<void*>(&JaxLngbLayerNormForwardAscend));
        d["jax_lngb_ascend_layer_norm_grad"] = nb::capsule(reinterpret_cast<void*>(&JaxLngbLayerNormGradAscend));
        d["jax_lngb_ascend_layer_norm_backward"] =
            nb::capsule(reinterpret_cast<void*>(&JaxLngbLayerNormBackwardAscend));
        d["jax_lngb_ascend_rms_norm_forward"] = nb::capsule(reinterpret_cast<void*>(&JaxLngbRmsNormForwardAscend));
        d["jax_lngb_ascend_rms_norm_backward"] = nb::capsule(reinterpret_cast<void*>(&JaxLngbRmsNormBackwardAscend));
        return d;
      },
      "FFI target name -> handler capsule, for jax.ffi.register_ffi_target on the Ascend platform.");
  m.attr("ffi_api_version") = nb::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
}
