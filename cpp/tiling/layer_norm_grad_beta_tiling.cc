#include "tiling/layer_norm_grad_beta_tiling.h"

#include <algorithm>
#include <string>

namespace jax_lngb::tiling {
namespace {

constexpr const char* kMaxMin = "get_layer_norm_grad_beta_max_min_tmp_size";
constexpr const char* kNd = "get_layer_norm_grad_beta_nd_tiling_info";

// Temporary fp32 buffers per element: half keeps fp32 copies of both inputs
// plus a product buffer (and two H-sized accumulators), float only the
// product buffer; the maximum doubles both for headroom, as CANN does.
uint64_t tmp_factor(uint32_t type_size) { return type_size == 2 ? 4 : 2; }

}  // namespace

const std::array<const char*, LayerNormGradBetaTiling::kWords>& LayerNormGradBetaTiling::field_names() {
  static const std::array<const char*, kWords> names = {
#define JAX_LNGB_X(name) #name,
      JAX_LNGB_LAYER_NORM_GRAD_BETA_TILING_FIELDS(JAX_LNGB_X)
#undef JAX_LNGB_X
  };
  return names;
}

std::array<uint32_t, LayerNormGradBetaTiling::kWords> LayerNormGradBetaTiling::words() const {
  return {
#define JAX_LNGB_X(name) name,
      JAX_LNGB_LAYER_NORM_GRAD_BETA_TILING_FIELDS(JAX_LNGB_X)
#undef JAX_LNGB_X
  };
}

LayerNormGradBetaTiling LayerNormGradBetaTiling::from_words(const uint32_t* w) {
  LayerNormGradBetaTiling t;
  size_t i = 0;
#define JAX_LNGB_X(name) t.name = w[i++];
  JAX_LNGB_LAYER_NORM_GRAD_BETA_TILING_FIELDS(JAX_LNGB_X)
#undef JAX_LNGB_X
  return t;
}

std::vector<uint8_t> LayerNormGradBetaTiling::pack() const {
  const auto w = words();
  return pack_words(w.data(), w.size());
}

LayerNormGradBetaTiling LayerNormGradBetaTiling::unpack(const std::vector<uint8_t>& bytes) {
  uint32_t w[kWords];
  unpack_words(bytes, w, kWords, "LayerNormGradBetaTiling");
  return from_words(w);
}

TmpSize layer_norm_grad_beta_max_min_tmp_size(const std::vector<int64_t>& shape, int64_t type_size,
                                              bool is_reuse_source) {
  (void)is_reuse_source;  // reserved in CANN: the rule is the same either way
  const uint32_t ts = check_type_size(type_size, kMaxMin);
  const SrcShape s = make_src_shape(shape, kMaxMin);
  const uint64_t k = tmp_factor(ts);
  return TmpSize{k * s.bsh() * sizeof(float), k * uint64_t(s.h) * sizeof(float)};
}

LayerNormGradBetaTiling layer_norm_grad_beta_nd_tiling_info(const std::vector<int64_t>& shape,
                                                            int64_t stack_buffer_size, int64_t type_size,
                                                            bool is_reuse_source) {
  (void)is_reuse_source;  // reserved in CANN: the tiling is the same either way
  const uint32_t ts = check_type_size(type_size, kNd);
  const SrcShape s = make_src_shape(shape, kNd);
  const uint32_t stack_bytes = check_u32_bytes(stack_buffer_size, "stack_buffer_size", kNd);
  const uint64_t min_bytes = tmp_factor(ts) * uint64_t(s.h) * sizeof(float);
  if (stack_bytes < min_bytes)
    throw TilingError(std::string(kNd) + ": stack_buffer_size " + std::to_string(stack_bytes) +
                      " bytes is below the minimum " + std::to_string(min_bytes) + " bytes (" +
                      std::to_string(tmp_factor(ts)) + " * H * 4 with H = " + std::to_string(s.h) + ", type_size " +
                      std::to_string(ts) + ")");

  LayerNormGradBetaTiling t;
  t.b_length = s.b;
  t.s_length = s.s;
  t.h_length = s.h;
  t.original_h_length = s.original_h;
  t.bsh_length = uint32_t(s.bsh());
  t.bs_length = uint32_t(s.bs());
  // Everything below counts fp32 slots of the shared buffer.
  t.stack_buffer_size = stack_bytes / uint32_t(sizeof(float));

  uint32_t one_cal = t.stack_buffer_size;
  t.number_of_tmp_buf = 1;
  if (ts == 2) {
    // Two H-sized fp32 accumulators first; the rest holds the fp32 copies
    // of dy and res_for_gamma, half each.
    t.number_of_tmp_buf = 2;
    one_cal = (one_cal - 2 * s.h) / t.number_of_tmp_buf;
  }
  one_cal = one_cal / s.h * s.h;  // whole rows only: H is never split
  // Unreachable after the minimum check; kept as the invariant it is.
  if (one_cal == 0) throw TilingError(std::string(kNd) + ": stack buffer holds no whole row");
  one_cal = std::min(one_cal, t.bsh_length);
  t.one_cal_size = one_cal;

  t.loop_round = t.bsh_length / one_cal;
  t.input_tail_size = t.bsh_length % one_cal;
  t.input_tail_pos = t.bsh_length - t.input_tail_size;
  t.bs_tail_size = t.input_tail_size / s.h;
  t.bsh_cur_length = one_cal;
  t.bs_cur_length = one_cal / s.h;

  if (ts == 2) {
    t.gamma_temp_tensor_pos = 0;
    t.beta_temp_tensor_pos = t.gamma_temp_tensor_pos + s.h;
    t.input_dy_tmp_tensor_pos = t.beta_temp_tensor_pos + s.h;
    t.res_for_gamma_tmp_tensor_pos = t.input_dy_tmp_tensor_pos + one_cal;
  }
  t.reserved = 0;
  return t;
}

}  // namespace jax_lngb::tiling
