// Compiles the kernel sources against the emulated AscendC and launches
// them. The kernels are the very files bisheng compiles for the NPU.
#include "kernel_operator.h"  // the emulated AscendC (ascend/emu/kernel_operator.h)  (first: the kernels below need it)

#include "ascend/emu/emu_launch.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "ascend/emu/probe_kernels.asc"
#include "ascend/emu/selftest_kernels.asc"
#include "ascend/grad_beta_kernel.asc"

namespace jax_lngb::emu {
namespace {

void check_type_size(uint32_t ts, const char* what) {
  if (ts != 2 && ts != 4) throw std::invalid_argument(std::string(what) + " must be 2 or 4 bytes");
}

GmRegion& upload(Device& dev, const char* name, const uint8_t* src, size_t bytes) {
  GmRegion& r = dev.alloc(name, bytes);
  if (bytes) std::memcpy(r.data(), src, bytes);
  return r;
}

}  // namespace

GradBetaEmuResult run_grad_beta(const GradBetaEmuArgs& a) {
  check_type_size(a.in_type_size, "in_type_size");
  check_type_size(a.out_type_size, "out_type_size");
  Device dev(a.ub_bytes, a.npu_arch);
  const size_t in_bytes = size_t(a.rows * a.h * a.in_type_size);
  GmRegion& res = upload(dev, "res_for_gamma", a.res, in_bytes);
  GmRegion& dy = upload(dev, "dy", a.dy, in_bytes);
  GmRegion& tiling = upload(dev, "tiling", a.tiling.data(), a.tiling.size());
  GmRegion& ws = dev.alloc("workspace", size_t(a.workspace_bytes));
  GmRegion& gamma = dev.alloc("pd_gamma", size_t(a.h * a.out_type_size));
  GmRegion& beta = dev.alloc("pd_beta", size_t(a.h * a.out_type_size));

  GradBetaEmuResult out;
  // Launch 1 then launch 2, as on one NPU stream.
  const bool half_in = a.in_type_size == 2;
  out.partials = dev.launch(
      half_in ? "jax_lngb_grad_beta_partials_f16" : "jax_lngb_grad_beta_partials_f32", a.block_dim,
      [&] {
        (half_in ? jax_lngb_grad_beta_partials_f16 : jax_lngb_grad_beta_partials_f32)(res.data(), dy.data(), ws.data(),
                                                                                      tiling.data());
      },
      a.reverse_core_order);
  const bool half_out = a.out_type_size == 2;
  out.combine = dev.launch(
      half_out ? "jax_lngb_grad_beta_combine_f16" : "jax_lngb_grad_beta_combine_f32", a.combine_block_dim,
      [&] {
        (half_out ? jax_lngb_grad_beta_combine_f16 : jax_lngb_grad_beta_combine_f32)(ws.data(), gamma.data(),
                                                                                     beta.data(), tiling.data());
      },
      a.reverse_core_order);
  out.pd_gamma = gamma.bytes;
  out.pd_beta = beta.bytes;
  return out;
}

GradBetaEmuResult run_probe(const ProbeEmuArgs& a) {
  check_type_size(a.type_size, "type_size");
  if (a.api_tiling.size() != 20) throw std::invalid_argument("api_tiling must be 20 words");
  if (a.is_reuse_source && a.type_size == 2)
    throw std::invalid_argument("isReuseSource is not supported for half (AscendC rejects it)");
  Device dev(a.ub_bytes, a.npu_arch);
  const size_t in_bytes = size_t(a.elems * a.type_size);
  GmRegion& res = upload(dev, "res_for_gamma", a.res, in_bytes);
  GmRegion& dy = upload(dev, "dy", a.dy, in_bytes);
  jax_lngb_ascend_probe::ProbeTiling t{};
  t.elems = uint32_t(a.elems);
  t.h = uint32_t(a.h);
  t.stack_bytes = a.stack_bytes;
  std::memcpy(t.api, a.api_tiling.data(), sizeof t.api);
  GmRegion& tiling = upload(dev, "tiling", reinterpret_cast<const uint8_t*>(&t), sizeof t);
  GmRegion& gamma = dev.alloc("pd_gamma", size_t(a.h * a.type_size));
  GmRegion& beta = dev.alloc("pd_beta", size_t(a.h * a.type_size));

  auto* kernel = a.type_size == 2    ? jax_lngb_probe_grad_beta_f16
                 : a.is_reuse_source ? jax_lngb_probe_grad_beta_f32_reuse
                                     : jax_lngb_probe_grad_beta_f32;
  GradBetaEmuResult out;
  out.partials = dev.launch("jax_lngb_probe_grad_beta", 1,
                            [&] { kernel(res.data(), dy.data(), gamma.data(), beta.data(), tiling.data()); });
  out.pd_gamma = gamma.bytes;
  out.pd_beta = beta.bytes;
  return out;
}

std::vector<uint8_t> run_selftest(uint32_t which, uint32_t block_dim, uint64_t ub_bytes) {
  Device dev(ub_bytes);
  GmRegion& data = dev.alloc("data", jax_lngb_ascend_selftest::kElems * sizeof(float), 0);
  GmRegion& out = dev.alloc("out", jax_lngb_ascend_selftest::kElems * sizeof(float));
  dev.launch("jax_lngb_emu_selftest", block_dim, [&] { jax_lngb_emu_selftest(which, data.data(), out.data()); });
  return out.bytes;
}

}  // namespace jax_lngb::emu
