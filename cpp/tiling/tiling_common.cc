#include "tiling/tiling_common.h"

#include <limits>

namespace jax_lngb::tiling {

std::string shape_str(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

SrcShape make_src_shape(const std::vector<int64_t>& dims, const char* api) {
  const std::string where = std::string(api) + ": ";
  if (dims.size() != 3 && dims.size() != 4)
    throw TilingError(where + "shape must be (B, S, H) or (B, S, H, original_H); got " + shape_str(dims) + " of rank " +
                      std::to_string(dims.size()));
  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 1 || dims[i] > kMax)
      throw TilingError(where + "every dimension of shape must be in [1, 2^32 - 1]; got " + shape_str(dims));
  }
  SrcShape s;
  s.b = uint32_t(dims[0]);
  s.s = uint32_t(dims[1]);
  s.h = uint32_t(dims[2]);
  s.original_h = uint32_t(dims.size() == 4 ? dims[3] : dims[2]);
  if (s.original_h > s.h)
    throw TilingError(where + "original_H must not exceed the storage H; got shape " + shape_str(dims));
  // B*S*H in 128 bits: each factor is below 2^32.
  const unsigned __int128 bsh = (unsigned __int128)s.b * s.s * s.h;
  if (bsh > (unsigned __int128)kMax)
    throw TilingError(where + "B*S*H must fit in uint32 (the tiling fields are uint32); got shape " + shape_str(dims));
  return s;
}

uint32_t check_type_size(int64_t type_size, const char* api) {
  if (type_size != 2 && type_size != 4)
    throw TilingError(std::string(api) + ": type_size must be 2 (half) or 4 (float); got " + std::to_string(type_size));
  return uint32_t(type_size);
}

uint32_t check_u32_bytes(int64_t v, const char* what, const char* api) {
  if (v < 0 || v > int64_t(std::numeric_limits<uint32_t>::max()))
    throw TilingError(std::string(api) + ": " + what + " must be in [0, 2^32 - 1] bytes; got " + std::to_string(v));
  return uint32_t(v);
}

std::vector<uint8_t> pack_words(const uint32_t* words, size_t n) {
  std::vector<uint8_t> out(n * 4);
  for (size_t i = 0; i < n; ++i)
    for (int b = 0; b < 4; ++b) out[4 * i + b] = uint8_t(words[i] >> (8 * b));
  return out;
}

void unpack_words(const std::vector<uint8_t>& bytes, uint32_t* words, size_t n, const char* what) {
  if (bytes.size() != n * 4)
    throw TilingError(std::string(what) + ": packed tiling must be " + std::to_string(n * 4) + " bytes; got " +
                      std::to_string(bytes.size()));
  for (size_t i = 0; i < n; ++i) {
    uint32_t w = 0;
    for (int b = 0; b < 4; ++b) w |= uint32_t(bytes[4 * i + b]) << (8 * b);
    words[i] = w;
  }
}

}  // namespace jax_lngb::tiling
