// `jax_lngb._tiling`'s plans of the Ascend LayerNorm kernels
// (layer_norm_kernel_plan.h); jax_lngb/ascend/layer_norm_kernels.py wraps them.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "tiling/layer_norm_kernel_plan.h"

namespace nb = nanobind;

namespace jax_lngb::tiling {
namespace {

nb::bytes to_bytes(const std::vector<uint8_t>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

LayerNormKernelRequest request(int64_t rows, int64_t h, int64_t original_h, int64_t ts, int64_t out_ts,
                               int64_t ub_bytes, int64_t num_cores, double epsilon, const std::string& arch,
                               const char* api) {
  LayerNormKernelRequest q;
  q.rows = rows;
  q.h = h;
  q.original_h = original_h;
  q.type_size = ts;
  q.out_type_size = out_ts;
  q.ub_bytes = ub_bytes;
  q.num_cores = num_cores;
  q.epsilon = epsilon;
  q.npu_arch = parse_npu_arch(arch, api);
  return q;
}

}  // namespace

void bind_layer_norm_kernel_plans(nb::module_& m) {
  m.def(
      "plan_layer_norm_forward_kernel",
      [](int64_t rows, int64_t h, int64_t original_h, int64_t ts, int64_t ub_bytes, int64_t num_cores, double epsilon,
         const std::string& arch) {
        const auto p = plan_layer_norm_forward_kernel(
            request(rows, h, original_h, ts, ts, ub_bytes, num_cores, epsilon, arch, "plan_layer_norm_forward_kernel"));
        nb::dict d;
        d["tiling"] = to_bytes(p.pack());
        d["api_tile"] = to_bytes(p.api_tile.pack());
        d["api_last"] = to_bytes(p.api_last.pack());
        d["block_dim"] = p.block_dim;
        d["ub_bytes_used"] = p.ub_bytes_used;
        d["stat_elems"] = p.stat_elems();
        return d;
      },
      nb::arg("rows"), nb::arg("h"), nb::arg("original_h"), nb::arg("type_size"), nb::arg("ub_bytes"),
      nb::arg("num_cores"), nb::arg("epsilon"), nb::arg("npu_arch"));
  m.def(
      "plan_layer_norm_backward_kernel",
      [](int64_t rows, int64_t h, int64_t original_h, int64_t ts, int64_t out_ts, int64_t ub_bytes, int64_t num_cores,
         double epsilon, const std::string& arch, bool fused) {
        const auto p = plan_layer_norm_backward_kernel(
            request(rows, h, original_h, ts, out_ts, ub_bytes, num_cores, epsilon, arch,
                    fused ? "plan_layer_norm_backward_kernel" : "plan_layer_norm_grad_kernel"),
            fused);
        nb::dict d;
        d["tiling"] = to_bytes(p.pack());
        d["lng_tile"] = to_bytes(p.lng_tile.pack());
        d["lng_last"] = to_bytes(p.lng_last.pack());
        d["gb_tile"] = to_bytes(p.gb_tile.pack());
        d["gb_last"] = to_bytes(p.gb_last.pack());
        d["block_dim"] = p.block_dim;
        d["combine_block_dim"] = p.combine_block_dim;
        d["workspace_bytes"] = p.workspace_bytes;
        d["ub_bytes_used"] = p.ub_bytes_used;
        d["combine_ub_bytes_used"] = p.combine_ub_bytes_used;
        d["stat_elems"] = p.stat_elems();
        return d;
      },
      nb::arg("rows"), nb::arg("h"), nb::arg("original_h"), nb::arg("type_size"), nb::arg("out_type_size"),
      nb::arg("ub_bytes"), nb::arg("num_cores"), nb::arg("epsilon"), nb::arg("npu_arch"), nb::arg("fused"));
  m.attr("LAYER_NORM_FORWARD_TILING_WORDS") = jax_lngb_ascend::kLayerNormForwardTilingWords;
  m.attr("LAYER_NORM_BACKWARD_TILING_WORDS") = jax_lngb_ascend::kLayerNormBackwardTilingWords;
}

}  // namespace jax_lngb::tiling
