// `jax_lngb._ascend_emu.run_norm_api`: the normalization API probes of
// norm_api_kernels.asc, for tests of the emulated LayerNorm, LayerNormGrad
// and RmsNorm against CANN's semantics.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "ascend/emu/emu_module_common.h"
#include "ascend/emu/emu_norm_launch.h"

namespace nb = nanobind;

namespace jax_lngb::emu {

void bind_norm_apis(nb::module_& m) {
  m.def(
      "run_norm_api",
      [](const std::string& api, uint32_t type_size, bool flag, uint32_t b, uint32_t s, uint32_t h,
         const std::vector<nb::bytes>& inputs, const std::vector<uint32_t>& api_tiling, uint32_t tmp_bytes,
         float epsilon, const std::string& mode, uint32_t calls, uint64_t ub_bytes, uint32_t npu_arch) {
        NormApiArgs a;
        a.api = api;
        a.type_size = type_size;
        a.flag = flag;
        a.b = b;
        a.s = s;
        a.h = h;
        for (const nb::bytes& in : inputs) {
          const auto* p = reinterpret_cast<const uint8_t*>(in.c_str());
          a.inputs.emplace_back(p, p + in.size());
        }
        a.api_tiling = api_tiling;
        a.tmp_bytes = tmp_bytes;
        a.epsilon = epsilon;
        a.mode = mode;
        a.calls = calls;
        a.ub_bytes = ub_bytes;
        a.npu_arch = npu_arch;
        const NormApiResult r = without_gil(run_norm_api, a);
        nb::list outs;
        for (const auto& o : r.outputs) outs.append(to_bytes(o));
        nb::dict stats;
        stats["ub_peak_bytes"] = r.stats.ub_peak_bytes;
        stats["api_calls"] = r.stats.api_calls;
        return nb::make_tuple(outs, r.tiling_after, stats);
      },
      nb::arg("api"), nb::arg("type_size"), nb::arg("flag"), nb::arg("b"), nb::arg("s"), nb::arg("h"),
      nb::arg("inputs"), nb::arg("api_tiling"), nb::arg("tmp_bytes"), nb::arg("epsilon"), nb::arg("mode") = "normal",
      nb::arg("calls") = 1, nb::arg("ub_bytes") = 196608, nb::arg("npu_arch") = 2201,
      "Runs one of the probe kernels of emu/norm_api_kernels.asc: LayerNorm ('layer_norm'), LayerNormGrad "
      "('layer_norm_grad') or RmsNorm ('rms_norm') on a whole [b, s, h] problem on one emulated core. `flag` is "
      "isReuseSource (isBasicBlock for RmsNorm); tmp_bytes = 0 calls the overload without sharedTmpBuffer. "
      "Returns (outputs, the tiling words after the calls, counters).");
}

}  // namespace jax_lngb::emu
