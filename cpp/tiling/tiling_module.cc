// The `jax_lngb._tiling` extension: thin bindings of the tiling library.
// Results cross as packed bytes plus field-name lists; jax_lngb/tiling.py
// turns them into typed, immutable objects. TilingError arrives in Python
// as ValueError (it derives from std::invalid_argument).
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "tiling/tiling.h"

namespace nb = nanobind;
using namespace jax_lngb::tiling;

namespace jax_lngb::tiling {
// layer_norm_kernel_plan_module.cc: the plans of the Ascend LayerNorm kernels.
void bind_layer_norm_kernel_plans(nanobind::module_& m);
}  // namespace jax_lngb::tiling

namespace {

nb::bytes to_bytes(const std::vector<uint8_t>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

template <size_t N>
std::vector<std::string> names(const std::array<const char*, N>& a) {
  return std::vector<std::string>(a.begin(), a.end());
}

std::pair<uint64_t, uint64_t> as_pair(const TmpSize& t) { return {t.max_bytes, t.min_bytes}; }

}  // namespace

NB_MODULE(_tiling, m) {
  m.doc() = "CANN LayerNormGradBeta / LayerNormGrad / LayerNorm / RmsNorm host tiling (jax_lngb tiling library)";

  m.def("layer_norm_grad_beta_fields", [] { return names(LayerNormGradBetaTiling::field_names()); });
  m.def("layer_norm_grad_fields", [] { return names(LayerNormGradTiling::field_names()); });

  m.def("layer_norm_grad_beta_max_min_tmp_size", [](const std::vector<int64_t>& shape, int64_t type_size, bool reuse) {
    return as_pair(layer_norm_grad_beta_max_min_tmp_size(shape, type_size, reuse));
  });
  m.def("layer_norm_grad_beta_nd_tiling_info",
        [](const std::vector<int64_t>& shape, int64_t stack, int64_t type_size, bool reuse) {
          return to_bytes(layer_norm_grad_beta_nd_tiling_info(shape, stack, type_size, reuse).pack());
        });
  m.def("layer_norm_grad_max_min_tmp_size",
        [](const std::vector<int64_t>& shape, int64_t type_size, bool reuse, const std::string& arch) {
          return as_pair(layer_norm_grad_max_min_tmp_size(
              shape, type_size, reuse, parse_npu_arch(arch, "get_layer_norm_grad_max_min_tmp_size")));
        });
  m.def("layer_norm_grad_nd_tiling_info",
        [](const std::vector<int64_t>& shape, int64_t stack, int64_t type_size, bool reuse, const std::string& arch) {
          return to_bytes(layer_norm_grad_nd_tiling_info(shape, stack, type_size, reuse,
                                                         parse_npu_arch(arch, "get_layer_norm_grad_nd_tiling_info"))
                              .pack());
        });

  m.def("layer_norm_fields", [] { return names(LayerNormTiling::field_names()); });
  m.def("rms_norm_fields", [] { return names(RmsNormTiling::field_names()); });
  m.def("layer_norm_max_min_tmp_size", [](const std::vector<int64_t>& shape, int64_t type_size, bool reuse) {
    return as_pair(layer_norm_max_min_tmp_size(shape, type_size, reuse));
  });
  m.def("layer_norm_nd_tiling_info",
        [](const std::vector<int64_t>& shape, int64_t stack, int64_t type_size, bool reuse) {
          return to_bytes(layer_norm_nd_tiling_info(shape, stack, type_size, reuse).pack());
        });
  m.def("rms_norm_max_min_tmp_size", [](const std::vector<int64_t>& shape, int64_t type_size, bool basic_block) {
    return as_pair(rms_norm_max_min_tmp_size(shape, type_size, basic_block));
  });
  m.def("rms_norm_tiling_info", [](const std::vector<int64_t>& shape, const std::vector<int64_t>& original_shape,
                                   int64_t stack, int64_t type_size, bool basic_block) {
    return to_bytes(rms_norm_tiling_info(shape, original_shape, stack, type_size, basic_block).pack());
  });

  m.def(
      "plan_grad_beta_kernel",
      [](int64_t rows, int64_t h, int64_t original_h, int64_t in_ts, int64_t out_ts, int64_t ub_bytes,
         int64_t num_cores, const std::string& tmp_policy, int64_t tmp_bytes, bool reuse, const std::string& arch) {
        GradBetaPlanRequest q;
        q.rows = rows;
        q.h = h;
        q.original_h = original_h;
        q.in_type_size = in_ts;
        q.out_type_size = out_ts;
        q.ub_bytes = ub_bytes;
        q.num_cores = num_cores;
        if (tmp_policy == "bytes") {
          q.tmp_policy = TmpBufferPolicy::kBytes;
          q.tmp_bytes = tmp_bytes;
        } else {
          q.tmp_policy = parse_tmp_policy(tmp_policy);
        }
        q.is_reuse_source = reuse;
        q.npu_arch = parse_npu_arch(arch, "plan_layer_norm_grad_beta_kernel");
        const GradBetaKernelPlan p = plan_grad_beta_kernel(q);
        nb::dict d;
        d["tiling"] = to_bytes(p.pack());
        d["block_dim"] = p.block_dim;
        d["combine_block_dim"] = p.combine_block_dim;
        d["workspace_bytes"] = p.workspace_bytes;
        d["ub_bytes_used"] = p.ub_bytes_used;
        d["combine_ub_bytes_used"] = p.combine_ub_bytes_used;
        return d;
      },
      nb::arg("rows"), nb::arg("h"), nb::arg("original_h"), nb::arg("in_type_size"), nb::arg("out_type_size"),
      nb::arg("ub_bytes"), nb::arg("num_cores"), nb::arg("tmp_policy"), nb::arg("tmp_bytes"),
      nb::arg("is_reuse_source"), nb::arg("npu_arch"));

  m.def("npu_arch_defaults", [](const std::string& arch) {
    const NpuArchDefaults a = npu_arch_defaults(parse_npu_arch(arch, "npu_arch_defaults"));
    nb::dict d;
    d["ub_bytes"] = a.ub_bytes;
    d["num_cores"] = a.num_cores;
    d["block"] = std::string(a.block);
    d["grad_beta_3510"] = a.grad_beta_3510;
    return d;
  });
  m.attr("MAX_ROWS_PER_CALL_3510") = kMaxRowsPerCall3510;

  // The RMSNorm kernels' plans (rms_norm_kernel_plan.h).
  m.def(
      "plan_rms_norm_kernel",
      [](bool backward, int64_t rows, int64_t h, int64_t original_h, int64_t in_ts, int64_t out_ts, double epsilon,
         int64_t ub_bytes, int64_t num_cores, const std::string& arch) {
        RmsNormPlanRequest q;
        q.rows = rows;
        q.h = h;
        q.original_h = original_h;
        q.in_type_size = in_ts;
        q.out_type_size = out_ts;
        q.epsilon = epsilon;
        q.ub_bytes = ub_bytes;
        q.num_cores = num_cores;
        q.npu_arch = parse_npu_arch(arch, backward ? "plan_rms_norm_backward_kernel" : "plan_rms_norm_forward_kernel");
        nb::dict d;
        if (backward) {
          const RmsNormBackwardKernelPlan p = plan_rms_norm_backward_kernel(q);
          const auto& gb = p.tiling.gb;
          d["tiling"] = to_bytes(p.pack());
          d["combine_block_dim"] = p.combine_block_dim;
          d["combine_cols_per_core"] = gb.combine_cols_per_core;
          d["num_groups"] = gb.num_groups;
          d["workspace_bytes"] = p.workspace_bytes;
          d["combine_ub_bytes_used"] = p.combine_ub_bytes_used;
          d["tile_rows"] = gb.tile_rows;
          d["num_tiles"] = gb.num_tiles;
          d["buffer_num"] = gb.buffer_num;
          d["rstd_stride"] = p.tiling.rstd_stride;
          d["block_dim"] = p.block_dim;
          d["rstd_elems"] = p.rstd_elems;
          d["ub_bytes_used"] = p.ub_bytes_used;
        } else {
          const RmsNormForwardKernelPlan p = plan_rms_norm_forward_kernel(q);
          d["tiling"] = to_bytes(p.pack());
          d["tile_rows"] = p.tiling.tile_rows;
          d["num_tiles"] = p.tiling.num_tiles;
          d["buffer_num"] = p.tiling.buffer_num;
          d["rstd_stride"] = p.tiling.rstd_stride;
          d["block_dim"] = p.block_dim;
          d["rstd_elems"] = p.rstd_elems;
          d["ub_bytes_used"] = p.ub_bytes_used;
        }
        return d;
      },
      nb::arg("backward"), nb::arg("rows"), nb::arg("h"), nb::arg("original_h"), nb::arg("in_type_size"),
      nb::arg("out_type_size"), nb::arg("epsilon"), nb::arg("ub_bytes"), nb::arg("num_cores"), nb::arg("npu_arch"),
      "Plans the RMSNorm forward (backward=False) or backward kernel; returns the tiling bytes and launch geometry.");
  m.attr("RMS_NORM_MAX_TILE_ROWS") = jax_lngb_ascend::kRmsNormMaxTileRows;

  m.attr("KERNEL_TILING_WORDS") = jax_lngb_ascend::kGradBetaTilingWords;
  m.attr("MAX_GROUPS") = jax_lngb_ascend::kMaxGroups;

  bind_layer_norm_kernel_plans(m);
}
