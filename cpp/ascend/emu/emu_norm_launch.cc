// Compiles the normalization API probes against the emulated AscendC and
// launches them (see emu_norm_launch.h).
#include "kernel_operator.h"  // the emulated AscendC (ascend/emu/kernel_operator.h)  (first: the kernels below need it)

#include "ascend/emu/emu_norm_launch.h"

#include <cstring>
#include <stdexcept>

#include "ascend/emu/norm_api_kernels.asc"

namespace jax_lngb::emu {
namespace {

using Kernel = void (*)(uint8_t*, uint8_t*);

struct ApiShape {
  uint32_t tiling_words;
  std::vector<uint64_t> in_elems, out_elems;
};

ApiShape shape_of(const NormApiArgs& a) {
  const uint64_t bs = uint64_t(a.b) * a.s, bsh = bs * a.h;
  if (a.api == "layer_norm") return {uint32_t(sizeof(LayerNormTiling) / 4), {bsh, a.h, a.h}, {bsh, bs, bs}};
  if (a.api == "layer_norm_grad")
    return {uint32_t(sizeof(LayerNormGradTiling) / 4), {bsh, bsh, bs, bs, a.h}, {bsh, bsh}};
  if (a.api == "rms_norm") return {uint32_t(sizeof(RmsNormTiling) / 4), {bsh, a.h}, {bsh}};
  throw std::invalid_argument("api must be 'layer_norm', 'layer_norm_grad' or 'rms_norm'; got '" + a.api + "'");
}

Kernel kernel_of(const NormApiArgs& a) {
  const bool f16 = a.type_size == 2;
  if (a.api == "layer_norm") {
    if (f16) return jax_lngb_norm_probe_layer_norm_f16;
    return a.flag ? jax_lngb_norm_probe_layer_norm_f32_reuse : jax_lngb_norm_probe_layer_norm_f32;
  }
  if (a.api == "layer_norm_grad") {
    if (f16) return jax_lngb_norm_probe_layer_norm_grad_f16;
    return a.flag ? jax_lngb_norm_probe_layer_norm_grad_f32_reuse : jax_lngb_norm_probe_layer_norm_grad_f32;
  }
  if (f16) return a.flag ? jax_lngb_norm_probe_rms_norm_f16_basic : jax_lngb_norm_probe_rms_norm_f16;
  return a.flag ? jax_lngb_norm_probe_rms_norm_f32_basic : jax_lngb_norm_probe_rms_norm_f32;
}

uint32_t mode_of(const std::string& m) {
  if (m == "normal") return uint32_t(jax_lngb_norm_probe::Mode::kNormal);
  if (m == "misaligned") return uint32_t(jax_lngb_norm_probe::Mode::kMisaligned);
  if (m == "wrong_position") return uint32_t(jax_lngb_norm_probe::Mode::kWrongPosition);
  if (m == "overlap") return uint32_t(jax_lngb_norm_probe::Mode::kOverlap);
  throw std::invalid_argument("mode must be 'normal', 'misaligned', 'wrong_position' or 'overlap'; got '" + m + "'");
}

uint64_t align32(uint64_t bytes) { return (bytes + 31) / 32 * 32; }

}  // namespace

NormApiResult run_norm_api(const NormApiArgs& a) {
  const ApiShape shape = shape_of(a);
  if (a.type_size != 2 && a.type_size != 4) throw std::invalid_argument("type_size must be 2 (half) or 4 (float)");
  if (a.flag && a.type_size == 2 && a.api != "rms_norm")
    throw std::invalid_argument("isReuseSource is not supported for half (AscendC rejects it)");
  if (a.b == 0 || a.s == 0 || a.h == 0) throw std::invalid_argument("b, s and h must be positive");
  if (a.inputs.size() != shape.in_elems.size())
    throw std::invalid_argument(a.api + " takes " + std::to_string(shape.in_elems.size()) + " inputs; got " +
                                std::to_string(a.inputs.size()));
  for (size_t i = 0; i < a.inputs.size(); ++i)
    if (a.inputs[i].size() != shape.in_elems[i] * a.type_size)
      throw std::invalid_argument(a.api + ": input " + std::to_string(i) + " has " +
                                  std::to_string(a.inputs[i].size()) + " bytes, expected " +
                                  std::to_string(shape.in_elems[i] * a.type_size));
  if (a.api_tiling.size() != shape.tiling_words)
    throw std::invalid_argument(a.api + ": api_tiling must be " + std::to_string(shape.tiling_words) + " words; got " +
                                std::to_string(a.api_tiling.size()));
  if (a.calls < 1) throw std::invalid_argument("calls must be >= 1");

  // io: inputs, outputs, then room for the tiling object, each 32-byte aligned.
  jax_lngb_norm_probe::Header hd{};
  hd.b = a.b;
  hd.s = a.s;
  hd.h = a.h;
  hd.tmp_bytes = a.tmp_bytes;
  hd.mode = mode_of(a.mode);
  std::memcpy(&hd.eps_bits, &a.epsilon, sizeof(float));
  hd.calls = a.calls;
  uint64_t off = 0;
  for (size_t i = 0; i < shape.in_elems.size(); ++i) {
    hd.in_off[i] = uint32_t(off);
    off += align32(shape.in_elems[i] * a.type_size);
  }
  for (size_t i = 0; i < shape.out_elems.size(); ++i) {
    hd.out_off[i] = uint32_t(off);
    off += align32(shape.out_elems[i] * a.type_size);
  }
  hd.tiling_out_off = uint32_t(off);
  off += align32(shape.tiling_words * 4);
  if (off > (uint64_t(1) << 31)) throw std::invalid_argument("problem too large for the probe");

  Device dev(a.ub_bytes, a.npu_arch);
  GmRegion& io = dev.alloc("io", size_t(off));  // 0xFF: outputs nobody writes read back as NaN
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    std::memset(io.data() + hd.in_off[i], 0, align32(a.inputs[i].size()));  // zero padding past the data
    std::memcpy(io.data() + hd.in_off[i], a.inputs[i].data(), a.inputs[i].size());
  }
  std::vector<uint8_t> tiling_bytes(sizeof hd + a.api_tiling.size() * 4);
  std::memcpy(tiling_bytes.data(), &hd, sizeof hd);
  std::memcpy(tiling_bytes.data() + sizeof hd, a.api_tiling.data(), a.api_tiling.size() * 4);
  GmRegion& tiling = dev.alloc("tiling", tiling_bytes.size());
  std::memcpy(tiling.data(), tiling_bytes.data(), tiling_bytes.size());

  const Kernel kernel = kernel_of(a);
  NormApiResult out;
  out.stats = dev.launch("jax_lngb_norm_probe_" + a.api, 1, [&] { kernel(io.data(), tiling.data()); });
  for (size_t i = 0; i < shape.out_elems.size(); ++i) {
    const uint8_t* p = io.data() + hd.out_off[i];
    out.outputs.emplace_back(p, p + shape.out_elems[i] * a.type_size);
  }
  out.tiling_after.resize(shape.tiling_words);
  std::memcpy(out.tiling_after.data(), io.data() + hd.tiling_out_off, shape.tiling_words * 4);
  return out;
}

}  // namespace jax_lngb::emu
