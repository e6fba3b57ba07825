#include "tiling/rms_norm_tiling.h"

#include <limits>
#include <string>

namespace jax_lngb::tiling {
namespace {

constexpr const char* kMaxMin = "get_rms_norm_max_min_tmp_size";
constexpr const char* kNd = "get_rms_norm_tiling_info";

constexpr uint32_t kBlockBytes = 32;
constexpr uint32_t kFloatsPerBlock = kBlockBytes / sizeof(float);
// One vector instruction repeats at most 255 times; without the basic
// block the kernel reduces each chunk's rows in one instruction.
constexpr uint32_t kMaxRepeat = 255;
constexpr uint32_t kBasicBlockH = 64;
constexpr uint32_t kBasicBlockRows = 8;
constexpr uint32_t kBasicBlockMaxH = 2048;

uint64_t ceil_to(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

// fp32 slots per element of a chunk: half needs the up-cast input besides
// the work buffer.
uint32_t row_factor(uint32_t type_size) { return type_size == 4 ? 1 : 2; }

// CANN's srcShape for RmsNorm is {B, S, H}, nothing else.
SrcShape rms_shape(const std::vector<int64_t>& dims, const char* api, const char* what) {
  if (dims.size() != 3)
    throw TilingError(std::string(api) + ": " + what + " must be (B, S, H); got " + shape_str(dims) + " of rank " +
                      std::to_string(dims.size()));
  for (int64_t d : dims)
    if (d < 1 || d > int64_t(std::numeric_limits<uint32_t>::max()))
      throw TilingError(std::string(api) + ": every dimension of " + what + " must be in [1, 2^32 - 1]; got " +
                        shape_str(dims));
  return make_src_shape(dims, api);  // and B*S*H within uint32
}

uint64_t min_bytes(const SrcShape& s, uint32_t ts) {
  return (uint64_t(row_factor(ts)) * s.h + kFloatsPerBlock) * sizeof(float);
}

}  // namespace

const std::array<const char*, RmsNormTiling::kWords>& RmsNormTiling::field_names() {
  static const std::array<const char*, kWords> names = {
#define JAX_LNGB_N(name) #name,
      JAX_LNGB_RMS_NORM_TILING_FIELDS(JAX_LNGB_N, JAX_LNGB_N)
#undef JAX_LNGB_N
  };
  return names;
}

std::array<uint32_t, RmsNormTiling::kWords> RmsNormTiling::words() const {
  return {
#define JAX_LNGB_U(name) name,
#define JAX_LNGB_F(name) f32_bits(name),
      JAX_LNGB_RMS_NORM_TILING_FIELDS(JAX_LNGB_U, JAX_LNGB_F)
#undef JAX_LNGB_U
#undef JAX_LNGB_F
  };
}

RmsNormTiling RmsNormTiling::from_words(const uint32_t* w) {
  RmsNormTiling t;
  size_t i = 0;
#define JAX_LNGB_U(name) t.name = w[i++];
#define JAX_LNGB_F(name) t.name = f32_from_bits(w[i++]);
  JAX_LNGB_RMS_NORM_TILING_FIELDS(JAX_LNGB_U, JAX_LNGB_F)
#undef JAX_LNGB_U
#undef JAX_LNGB_F
  return t;
}

std::vector<uint8_t> RmsNormTiling::pack() const {
  const auto w = words();
  return pack_words(w.data(), w.size());
}

RmsNormTiling RmsNormTiling::unpack(const std::vector<uint8_t>& bytes) {
  uint32_t w[kWords];
  unpack_words(bytes, w, kWords, "RmsNormTiling");
  return from_words(w);
}

void check_rms_norm_basic_block(uint32_t b, uint32_t s, uint32_t h, const char* api) {
  const std::string where = std::string(api) + ": is_basic_block needs ";
  if (h % kBasicBlockH != 0 || h >= kBasicBlockMaxH)
    throw TilingError(where + "H to be a multiple of 64 below 2048; got H = " + std::to_string(h));
  const uint64_t bs = uint64_t(b) * s;
  if (bs % kBasicBlockRows != 0)
    throw TilingError(where + "B*S to be a multiple of 8; got B*S = " + std::to_string(bs));
}

TmpSize rms_norm_max_min_tmp_size(const std::vector<int64_t>& shape, int64_t type_size, bool is_basic_block) {
  const uint32_t ts = check_type_size(type_size, kMaxMin);
  const SrcShape s = rms_shape(shape, kMaxMin, "shape");
  if (is_basic_block) check_rms_norm_basic_block(s.b, s.s, s.h, kMaxMin);
  // The per-row sums are aligned to a block of the *input* type here, but
  // to 8 floats in the minimum and in the tiling: CANN's rule, kept.
  const uint64_t sums = ceil_to(s.bs(), kBlockBytes / ts);
  return TmpSize{(uint64_t(row_factor(ts)) * s.bsh() + sums) * sizeof(float), min_bytes(s, ts)};
}

RmsNormTiling rms_norm_tiling_info(const std::vector<int64_t>& shape, const std::vector<int64_t>& original_shape,
                                   int64_t stack_buffer_size, int64_t type_size, bool is_basic_block) {
  const uint32_t ts = check_type_size(type_size, kNd);
  const SrcShape s = rms_shape(shape, kNd, "shape");
  const SrcShape o = rms_shape(original_shape, kNd, "original_shape");
  const uint32_t stack_bytes = check_u32_bytes(stack_buffer_size, "stack_buffer_size", kNd);
  if (o.b != s.b || o.s != s.s || o.h > s.h)
    throw TilingError(std::string(kNd) +
                      ": original_shape must have the B and S of shape and an H "
                      "no larger than its H; got shape " +
                      shape_str(shape) + ", original_shape " + shape_str(original_shape));
  if (uint64_t(s.h) * ts % kBlockBytes != 0)
    throw TilingError(std::string(kNd) +
                      ": a row of shape must fill whole 32-byte blocks (H * "
                      "type_size a multiple of 32; pad H); got H = " +
                      std::to_string(s.h) + ", type_size " + std::to_string(ts));
  if (is_basic_block) check_rms_norm_basic_block(s.b, s.s, s.h, kNd);
  const uint64_t need = min_bytes(s, ts);
  if (stack_bytes < need)
    throw TilingError(std::string(kNd) + ": stack_buffer_size " + std::to_string(stack_bytes) +
                      " bytes is below the minimum " + std::to_string(need) + " bytes for shape " + shape_str(shape) +
                      ", type_size " + std::to_string(ts));

  RmsNormTiling t;
  t.b_length = s.b;
  t.s_length = s.s;
  t.h_length = s.h;
  t.original_h_length = o.h;
  // Divided in double and rounded to float, as CANN does.
  t.reciprocal_of_h_length = static_cast<float>(1.0 / static_cast<double>(static_cast<float>(o.h)));

  // Rows per chunk: the most r whose c*r*H work slots and 8-aligned r sums
  // fit the buffer. fits(r) grows with r and fits(1) holds (the minimum), so
  // the largest r lies just below total / (c*H + 1); step down to it.
  const uint64_t total = stack_bytes / sizeof(float);
  const uint64_t row = uint64_t(row_factor(ts)) * s.h;
  auto fits = [&](uint64_t r) { return r * row + ceil_to(r, kFloatsPerBlock) <= total; };
  uint64_t rows = total / (row + 1);
  if (rows < 1) rows = 1;
  while (rows > 1 && !fits(rows)) --rows;
  if (rows > s.bs()) rows = s.bs();
  uint32_t r = uint32_t(rows);
  if (is_basic_block) {
    if (r >= kBasicBlockRows) r = r / kBasicBlockRows * kBasicBlockRows;
  } else if (r > kMaxRepeat) {
    r = kMaxRepeat;
  }

  const uint32_t n = uint32_t(s.bsh());
  const uint32_t one = r * s.h;  // <= B*S*H
  t.main_bsh_length = one;
  t.main_bs_length = r;
  t.main_bs_length_align = uint32_t(ceil_to(r, kFloatsPerBlock));
  t.loop_round = n / one;
  t.tail_bsh_length = n % one;
  t.input_tail_pos = n - t.tail_bsh_length;
  t.tail_bs_length = t.tail_bsh_length / s.h;
  return t;
}

}  // namespace jax_lngb::tiling
