// Compiles the RMSNorm kernel source against the emulated AscendC and
// launches it. The kernels are the very file bisheng compiles for the NPU.
#include "kernel_operator.h"  // the emulated AscendC (ascend/emu/kernel_operator.h)  (first: the kernels below need it)

#include "ascend/emu/emu_rms_norm_launch.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "ascend/emu/emu_rms_norm_apis.h"
#include "ascend/rms_norm_kernel.asc"

// grad_beta_kernel.asc's combine kernels, compiled in emu_launch.cc.
extern "C" void jax_lngb_grad_beta_combine_f32(GM_ADDR workspace, GM_ADDR pd_gamma, GM_ADDR pd_beta, GM_ADDR tiling);
extern "C" void jax_lngb_grad_beta_combine_f16(GM_ADDR workspace, GM_ADDR pd_gamma, GM_ADDR pd_beta, GM_ADDR tiling);

namespace jax_lngb::emu {
namespace {

void check_ts(uint32_t ts, const char* what) {
  if (ts != 2 && ts != 4) throw std::invalid_argument(std::string(what) + " must be 2 or 4 bytes");
}

GmRegion& upload(Device& dev, const char* name, const void* src, size_t bytes) {
  GmRegion& r = dev.alloc(name, bytes);
  if (bytes) std::memcpy(r.data(), src, bytes);
  return r;
}

}  // namespace

RmsNormForwardEmuResult run_rms_norm_forward(const RmsNormForwardEmuArgs& a) {
  check_ts(a.type_size, "type_size");
  if (a.tiling.size() != jax_lngb_ascend::kRmsNormForwardTilingWords * 4)
    throw std::invalid_argument("the forward tiling must be 160 bytes");
  Device dev(a.ub_bytes, a.npu_arch);
  const size_t bytes = size_t(a.rows * a.h * a.type_size);
  GmRegion& x = upload(dev, "x", a.x, bytes);
  GmRegion& gamma = upload(dev, "gamma", a.gamma, size_t(a.h * 4));
  GmRegion& tiling = upload(dev, "tiling", a.tiling.data(), a.tiling.size());
  GmRegion& y = dev.alloc("y", bytes);
  GmRegion& rstd = dev.alloc("rstd", size_t(a.rstd_elems * 4));
  const bool f16 = a.type_size == 2;
  RmsNormForwardEmuResult out;
  out.stats = dev.launch(
      f16 ? "jax_lngb_rms_norm_forward_f16" : "jax_lngb_rms_norm_forward_f32", a.block_dim,
      [&] {
        (f16 ? jax_lngb_rms_norm_forward_f16 : jax_lngb_rms_norm_forward_f32)(x.data(), gamma.data(), y.data(),
                                                                              rstd.data(), tiling.data());
      },
      a.reverse_core_order);
  out.y = y.bytes;
  out.rstd.resize(size_t(a.rstd_elems));
  std::memcpy(out.rstd.data(), rstd.data(), out.rstd.size() * 4);
  return out;
}

RmsNormBackwardEmuResult run_rms_norm_backward(const RmsNormBackwardEmuArgs& a) {
  check_ts(a.type_size, "type_size");
  check_ts(a.out_type_size, "out_type_size");
  if (a.tiling.size() != jax_lngb_ascend::kRmsNormBackwardTilingWords * 4)
    throw std::invalid_argument("the backward tiling must be 256 bytes");
  Device dev(a.ub_bytes, a.npu_arch);
  const size_t bytes = size_t(a.rows * a.h * a.type_size);
  GmRegion& dy = upload(dev, "dy", a.dy, bytes);
  GmRegion& x = upload(dev, "x", a.x, bytes);
  GmRegion& rstd = upload(dev, "rstd", a.rstd, size_t(a.rstd_elems * 4));
  GmRegion& gamma = upload(dev, "gamma", a.gamma, size_t(a.h * 4));
  GmRegion& tiling = upload(dev, "tiling", a.tiling.data(), a.tiling.size());
  GmRegion& dx = dev.alloc("dx", bytes);
  GmRegion& ws = dev.alloc("workspace", size_t(a.workspace_bytes));
  GmRegion& pd_gamma = dev.alloc("pd_gamma", size_t(a.h * a.out_type_size));
  GmRegion& pd_beta = dev.alloc("pd_beta", size_t(a.h * a.out_type_size));

  RmsNormBackwardEmuResult out;
  // Launch 1 then launch 2, as on one NPU stream.
  const bool f16 = a.type_size == 2;
  out.partials = dev.launch(
      f16 ? "jax_lngb_rms_norm_backward_partials_f16" : "jax_lngb_rms_norm_backward_partials_f32", a.block_dim,
      [&] {
        (f16 ? jax_lngb_rms_norm_backward_partials_f16 : jax_lngb_rms_norm_backward_partials_f32)(
            dy.data(), x.data(), rstd.data(), gamma.data(), dx.data(), ws.data(), tiling.data());
      },
      a.reverse_core_order);
  const bool f16_out = a.out_type_size == 2;
  out.combine = dev.launch(
      f16_out ? "jax_lngb_grad_beta_combine_f16" : "jax_lngb_grad_beta_combine_f32", a.combine_block_dim,
      [&] {
        (f16_out ? jax_lngb_grad_beta_combine_f16 : jax_lngb_grad_beta_combine_f32)(ws.data(), pd_gamma.data(),
                                                                                    pd_beta.data(), tiling.data());
      },
      a.reverse_core_order);
  out.dx = dx.bytes;
  out.pd_gamma = pd_gamma.bytes;
  out.pd_beta = pd_beta.bytes;
  return out;
}

}  // namespace jax_lngb::emu
