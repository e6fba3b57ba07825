// The `jax_lngb._ascend_emu` extension: runs the AscendC kernel sources on
// the CPU emulation. jax_lngb/ascend_emu.py wraps it for NumPy arrays.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "ascend/emu/emu_launch.h"
#include "ascend/emu/emu_module_common.h"
#include "xla/ffi/api/c_api.h"

// emu/emu_ffi.cc: the Ascend FFI handler bound on the CPU with the emulation.
extern "C" XLA_FFI_Error* JaxLngbGradBetaAscendEmu(XLA_FFI_CallFrame* call_frame);
// emu/emu_rms_norm_ffi.cc: the RMSNorm handlers bound with the emulation.
extern "C" XLA_FFI_Error* JaxLngbRmsNormForwardAscendEmu(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* JaxLngbRmsNormBackwardAscendEmu(XLA_FFI_CallFrame* call_frame);

namespace jax_lngb::emu {
// emu/emu_norm_module.cc: run_norm_api, the LayerNorm / LayerNormGrad / RmsNorm probes.
void bind_norm_apis(nanobind::module_& m);
// emu/emu_layer_norm_module.cc: the LayerNorm kernels and their FFI handlers.
void bind_layer_norm_kernels(nanobind::module_& m);
}  // namespace jax_lngb::emu

namespace nb = nanobind;
using namespace jax_lngb::emu;

namespace {

nb::tuple result(const GradBetaEmuResult& r) {
  return nb::make_tuple(to_bytes(r.pd_gamma), to_bytes(r.pd_beta), stats_dict(r.partials, true),
                        stats_dict(r.combine, true));
}

}  // namespace

NB_MODULE(_ascend_emu, m) {
  m.doc() = "CPU emulation of the AscendC subset jax_lngb's Ascend kernels use";
  nb::exception<KernelFault>(m, "KernelFault", PyExc_RuntimeError);

  m.def(
      "registrations",
      [] {
        nb::dict d;
        d["jax_lngb_ascend_layer_norm_grad_beta"] = ffi_capsule(&JaxLngbGradBetaAscendEmu);
        d["jax_lngb_ascend_rms_norm_forward"] = ffi_capsule(&JaxLngbRmsNormForwardAscendEmu);
        d["jax_lngb_ascend_rms_norm_backward"] = ffi_capsule(&JaxLngbRmsNormBackwardAscendEmu);
        return d;
      },
      "The Ascend FFI targets bound to the emulated launchers, for registration on the CPU platform.");

  m.def(
      "run_grad_beta",
      [](const nb::bytes& res, const nb::bytes& dy, uint64_t rows, uint64_t h, uint32_t in_ts, uint32_t out_ts,
         const nb::bytes& tiling, uint64_t workspace_bytes, uint32_t block_dim, uint32_t combine_block_dim,
         uint64_t ub_bytes, bool reverse, uint32_t npu_arch) {
        if (res.size() != rows * h * in_ts || dy.size() != res.size())
          throw std::invalid_argument("run_grad_beta: input byte sizes do not match rows * h * in_type_size");
        GradBetaEmuArgs a;
        a.res = data_of(res);
        a.dy = data_of(dy);
        a.rows = rows;
        a.h = h;
        a.in_type_size = in_ts;
        a.out_type_size = out_ts;
        a.tiling.assign(data_of(tiling), data_of(tiling) + tiling.size());
        a.workspace_bytes = workspace_bytes;
        a.block_dim = block_dim;
        a.combine_block_dim = combine_block_dim;
        a.ub_bytes = ub_bytes;
        a.reverse_core_order = reverse;
        a.npu_arch = npu_arch;
        return result(without_gil(run_grad_beta, a));
      },
      nb::arg("res"), nb::arg("dy"), nb::arg("rows"), nb::arg("h"), nb::arg("in_type_size"), nb::arg("out_type_size"),
      nb::arg("tiling"), nb::arg("workspace_bytes"), nb::arg("block_dim"), nb::arg("combine_block_dim"),
      nb::arg("ub_bytes"), nb::arg("reverse_core_order"), nb::arg("npu_arch"));

  bind_norm_apis(m);
  bind_layer_norm_kernels(m);

  m.def(
      "run_selftest",
      [](uint32_t which, uint32_t block_dim, uint64_t ub_bytes) {
        return to_bytes(run_selftest(which, block_dim, ub_bytes));
      },
      nb::arg("which"), nb::arg("block_dim"), nb::arg("ub_bytes"),
      "Runs one of the deliberately wrong kernels of emu/selftest_kernels.asc.");

  m.def(
      "run_probe",
      [](const nb::bytes& res, const nb::bytes& dy, uint64_t elems, uint64_t h, uint32_t ts, bool reuse,
         uint32_t stack_bytes, const std::vector<uint32_t>& api, uint64_t ub_bytes, uint32_t npu_arch) {
        if (res.size() != elems * ts || dy.size() != res.size())
          throw std::invalid_argument("run_probe: input byte sizes do not match elems * type_size");
        ProbeEmuArgs a;
        a.res = data_of(res);
        a.dy = data_of(dy);
        a.elems = elems;
        a.h = h;
        a.type_size = ts;
        a.is_reuse_source = reuse;
        a.stack_bytes = stack_bytes;
        a.api_tiling = api;
        a.ub_bytes = ub_bytes;
        a.npu_arch = npu_arch;
        return result(without_gil(run_probe, a));
      },
      nb::arg("res"), nb::arg("dy"), nb::arg("elems"), nb::arg("h"), nb::arg("type_size"), nb::arg("is_reuse_source"),
      nb::arg("stack_bytes"), nb::arg("api_tiling"), nb::arg("ub_bytes"), nb::arg("npu_arch"));
  m.attr("ffi_api_version") = nb::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
}
