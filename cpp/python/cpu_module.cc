// The `jax_lngb._cpu` extension: FFI handler capsules for jax.ffi, and what
// the kernel dispatcher decided about this CPU.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "kernels/cpu_features.h"
#include "xla/ffi/api/c_api.h"

extern "C" XLA_FFI_Error* JaxLngbGradBetaCpu(XLA_FFI_CallFrame*);

namespace nb = nanobind;

namespace {
template <typename Fn>
nb::capsule handler_capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}
}  // namespace

NB_MODULE(_cpu, m) {
  m.doc() = "jax_lngb CPU kernels (XLA FFI handlers)";
  m.def("registrations", [] {
    nb::dict d;
    d["jax_lngb_layer_norm_grad_beta"] = handler_capsule(JaxLngbGradBetaCpu);
    return d;
  });
  m.def("isa", [] { return std::string(jax_lngb::isa_name(jax_lngb::active_isa())); },
        "The kernel variant in use (generic, avx2, avx512).");
  m.def("supported_isa",
        [] { return std::string(jax_lngb::isa_name(jax_lngb::supported_isa())); },
        "The best kernel variant this CPU and build support.");
  m.def("cpu_features", [] { return jax_lngb::cpu_feature_summary(); });
  m.attr("ffi_api_version") = nb::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
}
