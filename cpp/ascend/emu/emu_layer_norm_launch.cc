// Compiles the LayerNorm kernel source against the emulated AscendC and
// launches it. The kernels are the very file bisheng compiles for the NPU.
#include "kernel_operator.h"  // the emulated AscendC (ascend/emu/kernel_operator.h)  (first: the kernels below need it)

#include "ascend/emu/emu_layer_norm_launch.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "ascend/layer_norm_kernels.asc"

namespace jax_lngb::emu {
namespace {

using ascend::elem_size;
using ascend::ElemType;

GmRegion& upload(Device& dev, const char* name, const void* src, size_t bytes) {
  if (src == nullptr && bytes) throw std::invalid_argument(std::string("no data for ") + name);
  GmRegion& r = dev.alloc(name, bytes);
  if (bytes) std::memcpy(r.data(), src, bytes);
  return r;
}

void download(void* dst, const GmRegion& r) {
  if (dst == nullptr) throw std::invalid_argument("no buffer for " + r.name);
  std::memcpy(dst, r.bytes.data(), r.bytes.size());
}

}  // namespace

LayerNormEmuStats run_layer_norm_forward(const ascend::LayerNormForwardLaunch& l, const LayerNormEmuConfig& c) {
  Device dev(c.ub_bytes, c.npu_arch);
  const size_t elems = size_t(l.rows * l.h_length), ts = elem_size(l.type);
  GmRegion& x = upload(dev, "x", l.x, elems * ts);
  GmRegion& gamma = upload(dev, "gamma", l.gamma, size_t(l.h_length) * 4);
  GmRegion& beta = upload(dev, "beta", l.beta, size_t(l.h_length) * 4);
  GmRegion& tiling = upload(dev, "tiling", l.tiling, size_t(l.tiling_words) * 4);
  GmRegion& y = dev.alloc("y", elems * ts);
  GmRegion& mean = dev.alloc("mean", size_t(l.stat_elems) * 4);
  GmRegion& var = dev.alloc("variance", size_t(l.stat_elems) * 4);
  const bool half = l.type == ElemType::kF16;
  LayerNormEmuStats s;
  s.main = dev.launch(
      half ? "jax_lngb_layer_norm_forward_f16" : "jax_lngb_layer_norm_forward_f32", l.block_dim,
      [&] {
        (half ? jax_lngb_layer_norm_forward_f16 : jax_lngb_layer_norm_forward_f32)(
            x.data(), gamma.data(), beta.data(), y.data(), mean.data(), var.data(), tiling.data());
      },
      c.reverse_core_order);
  download(l.y, y);
  download(l.mean, mean);
  download(l.variance, var);
  return s;
}

LayerNormEmuStats run_layer_norm_backward(const ascend::LayerNormBackwardLaunch& l, const LayerNormEmuConfig& c) {
  Device dev(c.ub_bytes, c.npu_arch);
  const size_t elems = size_t(l.rows * l.h_length), ts = elem_size(l.in_type);
  GmRegion& dy = upload(dev, "dy", l.dy, elems * ts);
  GmRegion& x = upload(dev, "x", l.x, elems * ts);
  GmRegion& mean = upload(dev, "mean", l.mean, size_t(l.stat_elems) * 4);
  GmRegion& var = upload(dev, "variance", l.variance, size_t(l.stat_elems) * 4);
  GmRegion& gamma = upload(dev, "gamma", l.gamma, size_t(l.h_length) * 4);
  GmRegion& tiling = upload(dev, "tiling", l.tiling, size_t(l.tiling_words) * 4);
  GmRegion& pdx = dev.alloc("pd_x", elems * ts);
  const bool half = l.in_type == ElemType::kF16;
  LayerNormEmuStats s;
  if (!l.fused) {
    GmRegion& res = dev.alloc("res_for_gamma", elems * ts);
    s.main = dev.launch(
        half ? "jax_lngb_layer_norm_grad_f16" : "jax_lngb_layer_norm_grad_f32", l.block_dim,
        [&] {
          (half ? jax_lngb_layer_norm_grad_f16 : jax_lngb_layer_norm_grad_f32)(
              dy.data(), x.data(), mean.data(), var.data(), gamma.data(), pdx.data(), res.data(), tiling.data());
        },
        c.reverse_core_order);
    download(l.pd_x, pdx);
    download(l.res_for_gamma, res);
    return s;
  }
  GmRegion& ws = dev.alloc("workspace", size_t(l.workspace_bytes));
  const size_t out_bytes = size_t(l.h_length) * elem_size(l.out_type);
  GmRegion& pd_gamma = dev.alloc("pd_gamma", out_bytes);
  GmRegion& pd_beta = dev.alloc("pd_beta", out_bytes);
  // Launch 1 then launch 2, as on one NPU stream.
  s.main = dev.launch(
      half ? "jax_lngb_layer_norm_backward_f16" : "jax_lngb_layer_norm_backward_f32", l.block_dim,
      [&] {
        (half ? jax_lngb_layer_norm_backward_f16 : jax_lngb_layer_norm_backward_f32)(
            dy.data(), x.data(), mean.data(), var.data(), gamma.data(), pdx.data(), ws.data(), tiling.data());
      },
      c.reverse_core_order);
  const bool half_out = l.out_type == ElemType::kF16;
  s.combine = dev.launch(
      half_out ? "jax_lngb_layer_norm_backward_combine_f16" : "jax_lngb_layer_norm_backward_combine_f32",
      l.combine_block_dim,
      [&] {
        (half_out ? jax_lngb_layer_norm_backward_combine_f16 : jax_lngb_layer_norm_backward_combine_f32)(
            ws.data(), pd_gamma.data(), pd_beta.data(), tiling.data());
      },
      c.reverse_core_order);
  download(l.pd_x, pdx);
  download(l.pd_gamma, pd_gamma);
  download(l.pd_beta, pd_beta);
  return s;
}

}  // namespace jax_lngb::emu
