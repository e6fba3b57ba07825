// Host tiling for AscendC's RmsNorm, with the semantics of CANN's
// GetRmsNormMaxMinTmpSize / GetRmsNormTilingInfo.
//
// The struct has the fields of CANN's `RmsNormTiling`, in CANN's order, as
// snake_case members; its packed form (pack()) is byte for byte the struct a
// kernel passes to AscendC::RmsNorm (reciprocal_of_h_length, a float, packs
// as its IEEE bits).
//
// Shapes are CANN's: srcShape {B, S, H} with H the 32-byte aligned storage
// width, and originSrcShape {B, S, original H}.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tiling/layer_norm_grad_beta_tiling.h"  // TmpSize
#include "tiling/tiling_common.h"

namespace jax_lngb::tiling {

// U(name): a uint32 field, F(name): a float field; CANN's order.
#define JAX_LNGB_RMS_NORM_TILING_FIELDS(U, F) \
  U(b_length)                                 \
  U(s_length)                                 \
  U(h_length)                                 \
  U(original_h_length)                        \
  F(reciprocal_of_h_length)                   \
  U(main_bsh_length)                          \
  U(main_bs_length)                           \
  U(main_bs_length_align)                     \
  U(loop_round)                               \
  U(input_tail_pos)                           \
  U(tail_bsh_length)                          \
  U(tail_bs_length)

struct RmsNormTiling {
#define JAX_LNGB_U(name) uint32_t name = 0;
#define JAX_LNGB_F(name) float name = 0.0f;
  JAX_LNGB_RMS_NORM_TILING_FIELDS(JAX_LNGB_U, JAX_LNGB_F)
#undef JAX_LNGB_U
#undef JAX_LNGB_F

  static constexpr size_t kWords = 12;
  static const std::array<const char*, kWords>& field_names();

  std::array<uint32_t, kWords> words() const;  // floats as their bits
  static RmsNormTiling from_words(const uint32_t* w);
  std::vector<uint8_t> pack() const;  // 48 little-endian bytes
  static RmsNormTiling unpack(const std::vector<uint8_t>& bytes);
  bool operator==(const RmsNormTiling& o) const { return words() == o.words(); }
};
static_assert(sizeof(RmsNormTiling) == RmsNormTiling::kWords * 4, "RmsNormTiling must be 12 packed 4-byte fields");

// The basic-block kernel's shape rule: H a multiple of 64 below 2048 and
// B*S a multiple of 8. Throws TilingError naming the broken condition
// (CANN's functions return false).
void check_rms_norm_basic_block(uint32_t b, uint32_t s, uint32_t h, const char* api);

// GetRmsNormMaxMinTmpSize; `shape` is {B, S, H}. With c = 2 fp32 buffers
// per element for half (the up-cast input and the work buffer) and 1 for
// float, and ceil_n() rounding up to a 32-byte block of the input type:
//   max = (c * B*S*H + ceil_n(B*S)) * 4,   min = (c * H + 8) * 4
// (one row and an 8-float block for the per-row sums). isBasicBlock only
// adds the shape rule above. Exact in 64 bits (CANN's uint32 wraps).
TmpSize rms_norm_max_min_tmp_size(const std::vector<int64_t>& shape, int64_t type_size, bool is_basic_block = false);

// GetRmsNormTilingInfo; `stack_buffer_size` in bytes. Takes the most rows
// r >= 1 whose c*r*H fp32 slots plus the 8-aligned r sums fit the buffer, at
// most B*S, then caps r at 255 (the repeat limit of one vector instruction)
// or, for the basic block, rounds r >= 8 down to a multiple of 8. Throws
// TilingError where CANN returns false: a shape that is not 3-D, an
// original shape with another B or S or with H outside [1, H], a storage
// row that is not a multiple of 32 bytes, the basic-block rule, or a buffer
// below the minimum.
RmsNormTiling rms_norm_tiling_info(const std::vector<int64_t>& shape, const std::vector<int64_t>& original_shape,
                                   int64_t stack_buffer_size, int64_t type_size, bool is_basic_block = false);

}  // namespace jax_lngb::tiling
