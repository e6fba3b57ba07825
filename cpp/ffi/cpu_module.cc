// The `jax_lngb._cpu` extension: FFI handler capsules for jax.ffi, and what
// the kernel dispatcher decided about this CPU.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "ffi/registry.h"
#include "kernels/base/cpu_features.h"

namespace nb = nanobind;

NB_MODULE(_cpu, m) {
  m.doc() = "jax_lngb CPU kernels (XLA FFI handlers)";
  m.def(
      "registrations",
      [] {
        nb::dict d;
        for (const auto& e : jax_lngb::ffi_util::cpu_handlers())
          d[e.target_name] = nb::capsule(reinterpret_cast<void*>(e.handler));
        return d;
      },
      "FFI target name -> handler capsule, for jax.ffi.register_ffi_target.");
  m.def(
      "isa", [] { return std::string(jax_lngb::isa_name(jax_lngb::active_isa())); },
      "The kernel variant in use (generic, avx2, avx512).");
  m.def(
      "supported_isa", [] { return std::string(jax_lngb::isa_name(jax_lngb::supported_isa())); },
      "The best kernel variant this CPU and build support.");
  m.def(
      "cpu_vendor", [] { return std::string(jax_lngb::vendor_name(jax_lngb::cpu_vendor())); },
      "Who made the CPU (intel, amd, other): some loop choices depend on it.");
  m.def("cpu_features", [] { return jax_lngb::cpu_feature_summary(); }, "The CPU features the dispatcher looked at.");
  m.attr("ffi_api_version") = nb::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
}
