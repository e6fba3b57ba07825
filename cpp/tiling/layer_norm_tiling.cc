#include "tiling/layer_norm_tiling.h"

#include <string>

namespace jax_lngb::tiling {
namespace {

constexpr const char* kMaxMin = "get_layer_norm_max_min_tmp_size";
constexpr const char* kNd = "get_layer_norm_nd_tiling_info";

constexpr uint64_t kBlockBytes = 32;
constexpr uint32_t kFloatsPerBlock = kBlockBytes / sizeof(float);

uint64_t ceil_to(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

// fp32 work buffers of one_tmp_size slots the kernel takes from the stack
// buffer (its tempTensorA/B/C); with isReuseSource a float input serves as
// the first one. Half always needs all three: its input is too narrow.
uint32_t buffers_needed(uint32_t type_size, bool reuse) { return reuse && type_size == 4 ? 2 : 3; }

}  // namespace

const std::array<const char*, LayerNormTiling::kWords>& LayerNormTiling::field_names() {
  static const std::array<const char*, kWords> names = {
#define JAX_LNGB_N(name) #name,
      JAX_LNGB_LAYER_NORM_TILING_FIELDS(JAX_LNGB_N, JAX_LNGB_N)
#undef JAX_LNGB_N
  };
  return names;
}

std::array<uint32_t, LayerNormTiling::kWords> LayerNormTiling::words() const {
  return {
#define JAX_LNGB_U(name) name,
#define JAX_LNGB_F(name) f32_bits(name),
      JAX_LNGB_LAYER_NORM_TILING_FIELDS(JAX_LNGB_U, JAX_LNGB_F)
#undef JAX_LNGB_U
#undef JAX_LNGB_F
  };
}

LayerNormTiling LayerNormTiling::from_words(const uint32_t* w) {
  LayerNormTiling t;
  size_t i = 0;
#define JAX_LNGB_U(name) t.name = w[i++];
#define JAX_LNGB_F(name) t.name = f32_from_bits(w[i++]);
  JAX_LNGB_LAYER_NORM_TILING_FIELDS(JAX_LNGB_U, JAX_LNGB_F)
#undef JAX_LNGB_U
#undef JAX_LNGB_F
  return t;
}

std::vector<uint8_t> LayerNormTiling::pack() const {
  const auto w = words();
  return pack_words(w.data(), w.size());
}

LayerNormTiling LayerNormTiling::unpack(const std::vector<uint8_t>& bytes) {
  uint32_t w[kWords];
  unpack_words(bytes, w, kWords, "LayerNormTiling");
  return from_words(w);
}

TmpSize layer_norm_max_min_tmp_size(const std::vector<int64_t>& shape, int64_t type_size, bool is_reuse_source) {
  const uint32_t ts = check_type_size(type_size, kMaxMin);
  const SrcShape s = make_src_shape(shape, kMaxMin);
  const uint64_t k = buffers_needed(ts, is_reuse_source);
  // The mean and variance are counted for every type, though only half
  // keeps fp32 copies of them in the buffer (CANN's rule).
  const uint64_t mean_var = 2 * ceil_to(s.bs() * sizeof(float), kBlockBytes);
  return TmpSize{k * ceil_to(s.bsh() * sizeof(float), kBlockBytes) + mean_var,
                 k * ceil_to(uint64_t(s.h) * sizeof(float), kBlockBytes) + mean_var};
}

LayerNormTiling layer_norm_nd_tiling_info(const std::vector<int64_t>& shape, int64_t stack_buffer_size,
                                          int64_t type_size, bool is_reuse_source) {
  const uint32_t ts = check_type_size(type_size, kNd);
  const SrcShape s = make_src_shape(shape, kNd);
  const uint32_t stack_bytes = check_u32_bytes(stack_buffer_size, "stack_buffer_size", kNd);
  const TmpSize need = layer_norm_max_min_tmp_size(shape, type_size, is_reuse_source);
  if (stack_bytes < need.min_bytes)
    throw TilingError(std::string(kNd) + ": stack_buffer_size " + std::to_string(stack_bytes) +
                      " bytes is below the minimum " + std::to_string(need.min_bytes) + " bytes for shape " +
                      shape_str(shape) + ", type_size " + std::to_string(ts) +
                      (is_reuse_source ? ", is_reuse_source" : ""));

  LayerNormTiling t;
  t.b_length = s.b;
  t.s_length = s.s;
  t.h_length = s.h;
  t.original_h_length = s.original_h;
  t.input_x_size = uint32_t(s.bsh());  // fits: make_src_shape bounds B*S*H
  t.mean_var_size = uint32_t(s.bs());
  t.number_of_tmp_buf = buffers_needed(ts, is_reuse_source);

  // Everything below counts fp32 slots of the stack buffer. Half computes
  // the mean and variance in fp32 at the front of the buffer (each padded
  // to a 32-byte block); float writes them straight to its outputs.
  t.mean_tmp_tensor_pos = 0;
  t.mean_tmp_tensor_size = uint32_t(ceil_to(t.mean_var_size, kFloatsPerBlock));
  t.variance_tmp_tensor_pos = t.mean_tmp_tensor_size;
  t.variance_tmp_tensor_size = t.mean_tmp_tensor_size;
  const uint32_t mean_var_total = ts == 4 ? 0 : t.mean_tmp_tensor_size + t.variance_tmp_tensor_size;
  t.tmp_buf_size = stack_bytes / uint32_t(sizeof(float));

  // The minimum leaves room for the mean and variance and one row per buffer.
  uint32_t one = (t.tmp_buf_size - mean_var_total) / t.number_of_tmp_buf;
  one = one / s.h * s.h;  // whole rows: a row is normalized in one piece
  if (one == 0) throw TilingError(std::string(kNd) + ": stack buffer holds no whole row");
  if (one > t.input_x_size) one = t.input_x_size;
  t.one_tmp_size = one;

  t.first_tmp_start_pos = mean_var_total;
  t.second_tmp_start_pos = t.first_tmp_start_pos + one;
  // Set even with two buffers (isReuseSource), as CANN does; unused then.
  t.third_tmp_start_pos = t.second_tmp_start_pos + one;

  t.loop_round = t.input_x_size / one;
  t.input_round_size = one;
  t.input_tail_size = t.input_x_size % one;
  t.input_tail_pos = t.input_x_size - t.input_tail_size;
  t.mean_var_round_size = one / s.h;
  t.mean_var_tail_size = t.input_tail_size / s.h;
  t.mean_var_tail_pos = t.mean_var_size - t.mean_var_tail_size;
  t.bsh_cur_length = one;
  t.bs_cur_length = t.mean_var_round_size;
  // Divided in float, as CANN does; the mean uses the real (unpadded) H.
  t.last_dim_value_back = 1.0f / static_cast<float>(s.original_h);
  return t;
}

}  // namespace jax_lngb::tiling
