// Shared pieces of the host tiling code: the error type, CANN's srcShape
// {B, S, H, originalH} with its checks, and the packing of tiling structs
// into the little-endian uint32 words a kernel reads.
//
// Every function of the tiling library validates its inputs and throws
// TilingError (a std::invalid_argument) with the offending numbers. CANN's
// host functions only log and leave the tiling half-filled; a tiling that
// the kernel cannot use is refused here instead.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace jax_lngb::tiling {

class TilingError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// CANN's srcShape: {B, S, storage H, original H}. `h` is the (32-byte
// aligned, zero padded) row length in memory; `original_h` the real one.
struct SrcShape {
  uint32_t b = 0;
  uint32_t s = 0;
  uint32_t h = 0;
  uint32_t original_h = 0;

  uint64_t bs() const { return uint64_t(b) * s; }
  uint64_t bsh() const { return bs() * h; }
};

// Accepts {B, S, H} (original H = H) or {B, S, H, original H}. Every
// dimension must be >= 1, original H <= H, and B*S*H must fit the uint32
// fields of the tiling structs. `api` names the caller in messages.
SrcShape make_src_shape(const std::vector<int64_t>& dims, const char* api);

// The element size of the data type, in bytes: 2 (half) or 4 (float).
uint32_t check_type_size(int64_t type_size, const char* api);

// A byte count passed by the caller (stack buffer sizes): 0 <= v < 2^32,
// CANN's uint32 parameter range.
uint32_t check_u32_bytes(int64_t v, const char* what, const char* api);

std::string shape_str(const std::vector<int64_t>& dims);

// Packs `n` uint32 words into little-endian bytes (the layout a kernel
// reads its tiling in) and back.
std::vector<uint8_t> pack_words(const uint32_t* words, size_t n);
void unpack_words(const std::vector<uint8_t>& bytes, uint32_t* words, size_t n, const char* what);

// A float tiling field travels as its IEEE-754 bits in one 32-bit word.
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace jax_lngb::tiling
