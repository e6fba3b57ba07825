// The per-ISA loops behind stream_read (internal; see stream_read_isa.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace jax_lngb {

// Buffers one loop reads side by side at most (the most operands a kernel
// streams at once).
inline constexpr int kMaxSideBySide = 4;

// Wrapping sum of the 64-bit little-endian words of the `count` buffers
// p[0 .. count) of n bytes each (1 <= count <= kMaxSideBySide), the last
// word of each zero-padded. The buffers are read side by side, a load from
// each in turn, the way a kernel reads its operands: on the Xeon we measured,
// two buffers read so streamed 11-14% faster than the same bytes read one
// buffer after the other, and a probe that reads slower than the kernels
// can is no ceiling.
using SumWordsFn = uint64_t (*)(const unsigned char* const* p, int count, int64_t n);

// n bytes of one buffer (the vector loops' remainder): whole words, then
// the zero-padded last one.
inline uint64_t sum_words_tail(const unsigned char* p, int64_t n) {
  uint64_t acc = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    acc += w;
  }
  if (i < n) {
    uint64_t w = 0;  // little-endian: the tail bytes are the low bytes
    for (int64_t k = 0; k < n - i; ++k) w |= uint64_t(p[i + k]) << (8 * k);
    acc += w;
  }
  return acc;
}

// The portable loop: one word of each buffer in turn, an accumulator per
// buffer (the loop is bound by loads, not by one chain of additions).
inline uint64_t sum_words_portable(const unsigned char* const* p, int count, int64_t n) {
  count = std::clamp(count, 0, kMaxSideBySide);
  uint64_t acc[kMaxSideBySide] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < count; ++k) {
      uint64_t w;
      std::memcpy(&w, p[k] + i, 8);
      acc[k] += w;
    }
  }
  uint64_t s = 0;
  for (int k = 0; k < count; ++k) s += acc[k] + sum_words_tail(p[k] + i, n - i);
  return s;
}

namespace generic {
SumWordsFn sum_words_fn();
}
namespace avx2 {
SumWordsFn sum_words_fn();
}
namespace avx512 {
SumWordsFn sum_words_fn();
}

}  // namespace jax_lngb
