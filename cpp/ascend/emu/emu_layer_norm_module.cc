// `jax_lngb._ascend_emu`'s LayerNorm kernels: the FFI handlers bound to the
// emulated launcher (for registration on the CPU platform) and direct runs
// of the kernels on byte buffers (jax_lngb/ascend/layer_norm_kernels.py
// wraps them for NumPy arrays).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ascend/emu/emu_layer_norm_launch.h"
#include "ascend/emu/emu_module_common.h"
#include "xla/ffi/api/c_api.h"

extern "C" XLA_FFI_Error* JaxLngbLayerNormForwardAscendEmu(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* JaxLngbLayerNormGradAscendEmu(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* JaxLngbLayerNormBackwardAscendEmu(XLA_FFI_CallFrame* call_frame);

namespace nb = nanobind;

namespace jax_lngb::emu {
namespace {

using ascend::ElemType;

ElemType elem(uint32_t type_size, const char* what) {
  if (type_size == 4) return ElemType::kF32;
  if (type_size == 2) return ElemType::kF16;
  throw std::invalid_argument(std::string(what) + " must be 2 or 4 bytes");
}

const void* data(const nb::bytes& b, size_t expect, const char* what) {
  if (b.size() != expect)
    throw std::invalid_argument(std::string(what) + " has " + std::to_string(b.size()) + " bytes; expected " +
                                std::to_string(expect));
  return b.c_str();
}

// The fields both LayerNorm launches take the same way.
template <class Launch>
void set_tiling_and_shape(Launch& l, const nb::bytes& tiling, uint64_t rows, uint64_t h, uint64_t stat_elems) {
  if (tiling.size() % 4 != 0) throw std::invalid_argument("tiling must be whole uint32 words");
  l.tiling = tiling.c_str();
  l.tiling_words = tiling.size() / 4;
  l.rows = rows;
  l.h_length = h;
  l.stat_elems = stat_elems;
}

// The launch counters the LayerNorm bindings report.
nb::dict stats(const LaunchStats& s) { return stats_dict(s, false); }

}  // namespace

void bind_layer_norm_kernels(nb::module_& m) {
  m.def(
      "layer_norm_registrations",
      [] {
        nb::dict d;
        d["jax_lngb_ascend_layer_norm_forward"] = ffi_capsule(&JaxLngbLayerNormForwardAscendEmu);
        d["jax_lngb_ascend_layer_norm_grad"] = ffi_capsule(&JaxLngbLayerNormGradAscendEmu);
        d["jax_lngb_ascend_layer_norm_backward"] = ffi_capsule(&JaxLngbLayerNormBackwardAscendEmu);
        return d;
      },
      "The Ascend LayerNorm FFI targets bound to the emulated launcher, for registration on the CPU platform.");

  m.def(
      "run_layer_norm_forward",
      [](const nb::bytes& x, const nb::bytes& gamma, const nb::bytes& beta, uint64_t rows, uint64_t h,
         uint32_t type_size, const nb::bytes& tiling, uint64_t stat_elems, uint32_t block_dim, uint64_t ub_bytes,
         uint32_t npu_arch, bool reverse) {
        ascend::LayerNormForwardLaunch l;
        l.type = elem(type_size, "type_size");
        const size_t n = size_t(rows * h);
        l.x = data(x, n * type_size, "x");
        l.gamma = data(gamma, h * 4, "gamma");
        l.beta = data(beta, h * 4, "beta");
        set_tiling_and_shape(l, tiling, rows, h, stat_elems);
        l.block_dim = block_dim;
        std::vector<uint8_t> y(n * type_size), mean(stat_elems * 4), var(stat_elems * 4);
        l.y = y.data();
        l.mean = mean.data();
        l.variance = var.data();
        const LayerNormEmuStats s =
            without_gil(run_layer_norm_forward, l, LayerNormEmuConfig{ub_bytes, npu_arch, reverse});
        return nb::make_tuple(to_bytes(y), to_bytes(mean), to_bytes(var), stats(s.main));
      },
      nb::arg("x"), nb::arg("gamma"), nb::arg("beta"), nb::arg("rows"), nb::arg("h"), nb::arg("type_size"),
      nb::arg("tiling"), nb::arg("stat_elems"), nb::arg("block_dim"), nb::arg("ub_bytes"), nb::arg("npu_arch"),
      nb::arg("reverse_core_order") = false,
      "Runs jax_lngb_layer_norm_forward on the emulation: (y, mean, variance, counters) as bytes.");

  m.def(
      "run_layer_norm_backward",
      [](const nb::bytes& dy, const nb::bytes& x, const nb::bytes& mean, const nb::bytes& var, const nb::bytes& gamma,
         uint64_t rows, uint64_t h, uint32_t type_size, uint32_t out_type_size, bool fused, const nb::bytes& tiling,
         uint64_t stat_elems, uint64_t workspace_bytes, uint32_t block_dim, uint32_t combine_block_dim,
         uint64_t ub_bytes, uint32_t npu_arch, bool reverse) {
        ascend::LayerNormBackwardLaunch l;
        l.fused = fused;
        l.in_type = elem(type_size, "type_size");
        l.out_type = fused ? elem(out_type_size, "out_type_size") : l.in_type;
        const size_t n = size_t(rows * h);
        l.dy = data(dy, n * type_size, "dy");
        l.x = data(x, n * type_size, "x");
        l.mean = data(mean, stat_elems * 4, "mean");
        l.variance = data(var, stat_elems * 4, "variance");
        l.gamma = data(gamma, h * 4, "gamma");
        set_tiling_and_shape(l, tiling, rows, h, stat_elems);
        l.workspace_bytes = workspace_bytes;
        l.block_dim = block_dim;
        l.combine_block_dim = combine_block_dim;
        std::vector<uint8_t> pdx(n * type_size), res, pd_gamma, pd_beta;
        l.pd_x = pdx.data();
        if (fused) {
          pd_gamma.resize(h * out_type_size);
          pd_beta.resize(h * out_type_size);
          l.pd_gamma = pd_gamma.data();
          l.pd_beta = pd_beta.data();
        } else {
          res.resize(n * type_size);
          l.res_for_gamma = res.data();
        }
        const LayerNormEmuStats s =
            without_gil(run_layer_norm_backward, l, LayerNormEmuConfig{ub_bytes, npu_arch, reverse});
        if (fused)
          return nb::make_tuple(to_bytes(pdx), to_bytes(pd_gamma), to_bytes(pd_beta), stats(s.main), stats(s.combine));
        return nb::make_tuple(to_bytes(pdx), to_bytes(res), stats(s.main));
      },
      nb::arg("dy"), nb::arg("x"), nb::arg("mean"), nb::arg("variance"), nb::arg("gamma"), nb::arg("rows"),
      nb::arg("h"), nb::arg("type_size"), nb::arg("out_type_size"), nb::arg("fused"), nb::arg("tiling"),
      nb::arg("stat_elems"), nb::arg("workspace_bytes"), nb::arg("block_dim"), nb::arg("combine_block_dim"),
      nb::arg("ub_bytes"), nb::arg("npu_arch"), nb::arg("reverse_core_order") = false,
      "Runs jax_lngb_layer_norm_grad (fused=False: pd_x, res_for_gamma, counters) or the fused backward and its "
      "combine (fused=True: dx, pd_gamma, pd_beta, counters, combine counters) on the emulation.");
}

}  // namespace jax_lngb::emu
