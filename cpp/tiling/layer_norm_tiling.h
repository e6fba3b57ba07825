// Host tiling for AscendC's LayerNorm in its [B, S, H] form (the one that
// outputs the mean and the variance), with the semantics of CANN's
// GetLayerNormMaxMinTmpSize / GetLayerNormNDTilingInfo.
//
// The struct has the fields of CANN's `LayerNormTiling`, in CANN's order, as
// snake_case members; its packed form (pack()) is byte for byte the struct a
// kernel passes to AscendC::LayerNorm. Unlike the gradient tilings, one field
// is a float (lastDimValueBack = 1 / original H); it packs as its IEEE bits.
//
// CANN's [A, R] form (LayerNormSeparateTiling, the one that outputs rstd) is
// a different struct and is not implemented here.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tiling/layer_norm_grad_beta_tiling.h"  // TmpSize
#include "tiling/tiling_common.h"

namespace jax_lngb::tiling {

// U(name): a uint32 field, F(name): a float field; CANN's order.
#define JAX_LNGB_LAYER_NORM_TILING_FIELDS(U, F) \
  U(b_length)                                   \
  U(s_length)                                   \
  U(h_length)                                   \
  U(original_h_length)                          \
  U(input_x_size)                               \
  U(mean_var_size)                              \
  U(number_of_tmp_buf)                          \
  U(mean_tmp_tensor_pos)                        \
  U(mean_tmp_tensor_size)                       \
  U(variance_tmp_tensor_pos)                    \
  U(variance_tmp_tensor_size)                   \
  U(tmp_buf_size)                               \
  U(one_tmp_size)                               \
  U(first_tmp_start_pos)                        \
  U(second_tmp_start_pos)                       \
  U(third_tmp_start_pos)                        \
  U(loop_round)                                 \
  U(input_round_size)                           \
  U(input_tail_size)                            \
  U(input_tail_pos)                             \
  U(mean_var_round_size)                        \
  U(mean_var_tail_size)                         \
  U(mean_var_tail_pos)                          \
  U(bsh_cur_length)                             \
  U(bs_cur_length)                              \
  F(last_dim_value_back)

struct LayerNormTiling {
#define JAX_LNGB_U(name) uint32_t name = 0;
#define JAX_LNGB_F(name) float name = 0.0f;
  JAX_LNGB_LAYER_NORM_TILING_FIELDS(JAX_LNGB_U, JAX_LNGB_F)
#undef JAX_LNGB_U
#undef JAX_LNGB_F

  static constexpr size_t kWords = 26;
  static const std::array<const char*, kWords>& field_names();

  std::array<uint32_t, kWords> words() const;  // floats as their bits
  static LayerNormTiling from_words(const uint32_t* w);
  std::vector<uint8_t> pack() const;  // 104 little-endian bytes
  static LayerNormTiling unpack(const std::vector<uint8_t>& bytes);
  bool operator==(const LayerNormTiling& o) const { return words() == o.words(); }
};
static_assert(sizeof(LayerNormTiling) == LayerNormTiling::kWords * 4,
              "LayerNormTiling must be 26 packed 4-byte fields");

// GetLayerNormMaxMinTmpSize (the [B, S, H] overload). With k = 2 for float
// with isReuseSource and 3 otherwise, and ceil32() rounding bytes up to a
// 32-byte block:
//   max = k * ceil32(B*S*H*4) + 2 * ceil32(B*S*4)
//   min = k * ceil32(H*4)     + 2 * ceil32(B*S*4)
// Exact in 64 bits (CANN's uint32 wraps above 4 GiB).
TmpSize layer_norm_max_min_tmp_size(const std::vector<int64_t>& shape, int64_t type_size, bool is_reuse_source = false);

// GetLayerNormNDTilingInfo (the [B, S, H] overload); `stack_buffer_size` in
// bytes. The buffer holds, in fp32 slots: for half, the mean and variance
// in fp32 (ceil8(B*S) slots each), then k buffers of one_tmp_size slots,
// one_tmp_size being whole rows, at most B*S*H. Throws TilingError when the
// buffer is below the minimum of the rule above, the bound CANN documents
// as required. (CANN's own function tiles any buffer that holds k rows after
// the fp32 mean and variance, leaves the tiling unset when it holds fewer,
// and for half, when the buffer cannot even hold the mean and variance,
// subtracts past zero in uint32 and returns buffers outside the stack
// buffer.)
LayerNormTiling layer_norm_nd_tiling_info(const std::vector<int64_t>& shape, int64_t stack_buffer_size,
                                          int64_t type_size, bool is_reuse_source = false);

}  // namespace jax_lngb::tiling
