#include "tiling/layer_norm_grad_tiling.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace jax_lngb::tiling {
namespace {

constexpr const char* kMaxMin = "get_layer_norm_grad_max_min_tmp_size";
constexpr const char* kNd = "get_layer_norm_grad_nd_tiling_info";

// fp32 buffers of one_cal_size elements the dav-2002/2201 kernel carves out
// of the stack buffer.
uint32_t buffers_needed(uint32_t type_size, bool reuse) {
  if (type_size == 2) return 9;
  return reuse ? 4 : 6;
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

uint32_t to_u32(uint64_t v, const char* what) {
  if (v > std::numeric_limits<uint32_t>::max())
    throw TilingError(std::string(kNd) + ": " + what + " = " + std::to_string(v) +
                      " does not fit the uint32 tiling field");
  return uint32_t(v);
}

}  // namespace

NpuArch parse_npu_arch(const std::string& name, const char* api) {
  if (name == "dav-2002") return NpuArch::kDav2002;
  if (name == "dav-2201") return NpuArch::kDav2201;
  if (name == "dav-3510") return NpuArch::kDav3510;
  throw TilingError(std::string(api) +
                    ": npu_arch must be 'dav-2002', 'dav-2201' or 'dav-3510' "
                    "(the architectures the normalization APIs support); got '" +
                    name + "'");
}

const std::array<const char*, LayerNormGradTiling::kWords>& LayerNormGradTiling::field_names() {
  static const std::array<const char*, kWords> names = {
#define JAX_LNGB_X(name) #name,
      JAX_LNGB_LAYER_NORM_GRAD_TILING_FIELDS(JAX_LNGB_X)
#undef JAX_LNGB_X
  };
  return names;
}

std::array<uint32_t, LayerNormGradTiling::kWords> LayerNormGradTiling::words() const {
  return {
#define JAX_LNGB_X(name) name,
      JAX_LNGB_LAYER_NORM_GRAD_TILING_FIELDS(JAX_LNGB_X)
#undef JAX_LNGB_X
  };
}

LayerNormGradTiling LayerNormGradTiling::from_words(const uint32_t* w) {
  LayerNormGradTiling t;
  size_t i = 0;
#define JAX_LNGB_X(name) t.name = w[i++];
  JAX_LNGB_LAYER_NORM_GRAD_TILING_FIELDS(JAX_LNGB_X)
#undef JAX_LNGB_X
  return t;
}

std::vector<uint8_t> LayerNormGradTiling::pack() const {
  const auto w = words();
  return pack_words(w.data(), w.size());
}

LayerNormGradTiling LayerNormGradTiling::unpack(const std::vector<uint8_t>& bytes) {
  uint32_t w[kWords];
  unpack_words(bytes, w, kWords, "LayerNormGradTiling");
  return from_words(w);
}

TmpSize layer_norm_grad_max_min_tmp_size(const std::vector<int64_t>& shape, int64_t type_size, bool is_reuse_source,
                                         NpuArch arch) {
  const uint32_t ts = check_type_size(type_size, kMaxMin);
  const SrcShape s = make_src_shape(shape, kMaxMin);
  if (arch == NpuArch::kDav3510) {
    if (is_reuse_source && ts == 4) return TmpSize{0, 0};
    const uint64_t v = 2 * ((uint64_t(s.h) + 7) / 8 * 8) * sizeof(float);
    return TmpSize{v, v};
  }
  const uint64_t n = s.bsh();
  const uint64_t hh = uint64_t(s.h) * s.h;
  const uint64_t k = buffers_needed(ts, is_reuse_source);
  // The element size here is type_size, not sizeof(float): CANN's rule.
  return TmpSize{k * std::max(n, hh) * ts, k * std::min(n, hh) * ts};
}

LayerNormGradTiling layer_norm_grad_nd_tiling_info(const std::vector<int64_t>& shape, int64_t stack_buffer_size,
                                                   int64_t type_size, bool is_reuse_source, NpuArch arch) {
  const uint32_t ts = check_type_size(type_size, kNd);
  const SrcShape s = make_src_shape(shape, kNd);
  const uint32_t stack_bytes = check_u32_bytes(stack_buffer_size, "stack_buffer_size", kNd);
  const TmpSize need = layer_norm_grad_max_min_tmp_size(shape, type_size, is_reuse_source, arch);
  if (stack_bytes < need.min_bytes)
    throw TilingError(std::string(kNd) + ": stack_buffer_size " + std::to_string(stack_bytes) +
                      " bytes is below the minimum " + std::to_string(need.min_bytes) + " bytes for shape " +
                      shape_str(shape) + ", type_size " + std::to_string(ts));

  const uint32_t k = buffers_needed(ts, is_reuse_source);
  uint32_t one_cal = 0;
  uint32_t noh_cal = 0;
  if (arch == NpuArch::kDav3510) {
    one_cal = 1;  // the register-based kernel does not chunk
    noh_cal = 1;
  } else {
    uint64_t oc = uint64_t(stack_bytes) / sizeof(float) / k;
    oc = oc / s.h * s.h;
    if (oc == 0)
      throw TilingError(std::string(kNd) + ": stack_buffer_size " + std::to_string(stack_bytes) +
                        " bytes holds no whole row: needs at least " +
                        std::to_string(uint64_t(k) * s.h * sizeof(float)) + " bytes (" + std::to_string(k) +
                        " fp32 buffers of H = " + std::to_string(s.h) + ")");
    const uint64_t per_block = ts == 4 ? 8 : 16;  // rows per 32-byte block of the [B*S] vectors
    uint64_t noh = oc / s.h;
    noh = (noh + per_block - 1) / per_block * per_block;
    noh_cal = to_u32(noh, "noh_cal_size");
    one_cal = to_u32(noh * s.h, "one_cal_size");
  }

  LayerNormGradTiling t;
  // Scratch layout, in fp32 slots of one_cal_size each.
  t.tmp_tensor_bsh_pos = 0;
  t.pd_var_tensor_pos = to_u32(uint64_t(one_cal), "pd_var_tensor_pos");
  t.pd_mean_tensor_pos = to_u32(2ull * one_cal, "pd_mean_tensor_pos");
  if (is_reuse_source && ts == 4) {
    // x1 and x2 overwrite the inputs.
    t.x1_tensor_pos = 0;
    t.x2_tensor_pos = 0;
    t.x3_tensor_pos = to_u32(3ull * one_cal, "x3_tensor_pos");
  } else {
    t.x1_tensor_pos = to_u32(3ull * one_cal, "x1_tensor_pos");
    t.x2_tensor_pos = to_u32(4ull * one_cal, "x2_tensor_pos");
    t.x3_tensor_pos = to_u32(5ull * one_cal, "x3_tensor_pos");
  }
  if (ts == 2) {
    t.tmp_tensor_pos = to_u32(uint64_t(t.x3_tensor_pos) + one_cal, "tmp_tensor_pos");
    t.tmp_tensor1_pos = to_u32(uint64_t(t.tmp_tensor_pos) + one_cal, "tmp_tensor1_pos");
    t.tmp_tensor2_pos = to_u32(uint64_t(t.tmp_tensor1_pos) + one_cal, "tmp_tensor2_pos");
  }
  t.tmp_tensor_bsh_size = t.pd_var_tensor_size = t.pd_mean_tensor_size = one_cal;
  t.x1_tensor_size = t.x2_tensor_size = t.x3_tensor_size = one_cal;
  t.tmp_tensor_size = t.tmp_tensor1_size = t.tmp_tensor2_size = one_cal;

  t.stack_buffer_size = stack_bytes;  // bytes, unlike LayerNormGradBeta's fp32 slots
  t.b_length = s.b;
  t.s_length = s.s;
  t.h_length = s.h;
  t.original_h_length = s.original_h;
  t.one_cal_size = one_cal;
  t.noh_cal_size = noh_cal;
  const uint32_t n = uint32_t(s.bsh());
  t.loop_num = n / one_cal;
  t.tail_size = n % one_cal;
  t.noh_tail_size = t.tail_size / s.h;
  t.last_dim_value_back = float_bits(1.0f / static_cast<float>(s.original_h));
  t.last_dim_value_back_mul_two = float_bits(2.0f / static_cast<float>(s.original_h));
  return t;
}

}  // namespace jax_lngb::tiling
