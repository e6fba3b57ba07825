// Host tiling for AscendC's LayerNormGradBeta: the temporary-buffer size
// rule and the ND tiling, with CANN's semantics (SPEC section 2).
//
// The struct has CANN's fields, in CANN's order, as snake_case uint32
// members; its packed form (pack()) is byte for byte the
// `LayerNormGradBetaTiling` a kernel passes to AscendC::LayerNormGradBeta.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tiling/tiling_common.h"

namespace jax_lngb::tiling {

// X(name): every field, in CANN's order. One list drives the struct, the
// packing, the field names and the Python bindings.
#define JAX_LNGB_LAYER_NORM_GRAD_BETA_TILING_FIELDS(X) \
  X(stack_buffer_size)                                 \
  X(b_length)                                          \
  X(s_length)                                          \
  X(h_length)                                          \
  X(original_h_length)                                 \
  X(bsh_length)                                        \
  X(bs_length)                                         \
  X(one_cal_size)                                      \
  X(number_of_tmp_buf)                                 \
  X(loop_round)                                        \
  X(input_tail_size)                                   \
  X(input_tail_pos)                                    \
  X(bs_tail_size)                                      \
  X(bsh_cur_length)                                    \
  X(bs_cur_length)                                     \
  X(gamma_temp_tensor_pos)                             \
  X(beta_temp_tensor_pos)                              \
  X(input_dy_tmp_tensor_pos)                           \
  X(res_for_gamma_tmp_tensor_pos)                      \
  X(reserved)

struct LayerNormGradBetaTiling {
#define JAX_LNGB_X(name) uint32_t name = 0;
  JAX_LNGB_LAYER_NORM_GRAD_BETA_TILING_FIELDS(JAX_LNGB_X)
#undef JAX_LNGB_X

  static constexpr size_t kWords = 20;
  static const std::array<const char*, kWords>& field_names();

  std::array<uint32_t, kWords> words() const;
  static LayerNormGradBetaTiling from_words(const uint32_t* w);
  std::vector<uint8_t> pack() const;  // 80 little-endian bytes
  static LayerNormGradBetaTiling unpack(const std::vector<uint8_t>& bytes);
  bool operator==(const LayerNormGradBetaTiling& o) const { return words() == o.words(); }
};
static_assert(sizeof(LayerNormGradBetaTiling) == LayerNormGradBetaTiling::kWords * 4,
              "LayerNormGradBetaTiling must be 20 packed uint32 fields");

struct TmpSize {
  uint64_t max_bytes = 0;
  uint64_t min_bytes = 0;
};

// GetLayerNormGradBetaMaxMinTmpSize. With k = 4 for half and 2 for float:
// max = k * B*S*H * 4 bytes, min = k * H * 4 bytes. isReuseSource does not
// change the result. Computed exactly in 64 bits (CANN's uint32 would wrap
// above 4 GiB).
TmpSize layer_norm_grad_beta_max_min_tmp_size(const std::vector<int64_t>& shape, int64_t type_size,
                                              bool is_reuse_source = false);

// GetLayerNormGradBetaNDTilingInfo; `stack_buffer_size` is in bytes (what
// CANN's code does; its documentation says elements). Throws TilingError
// when the buffer is below the minimum of the rule above (CANN would log
// and return a tiling with one_cal_size == 0).
LayerNormGradBetaTiling layer_norm_grad_beta_nd_tiling_info(const std::vector<int64_t>& shape,
                                                            int64_t stack_buffer_size, int64_t type_size,
                                                            bool is_reuse_source = false);

}  // namespace jax_lngb::tiling
