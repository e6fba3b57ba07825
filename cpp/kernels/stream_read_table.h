// The per-ISA loops behind stream_read (internal; see stream_read_isa.cc).
#pragma once

#include <cstdint>
#include <cstring>

namespace jax_lngb {

// Wrapping sum of the 64-bit little-endian words of p[0, n), the last one
// zero-padded.
using SumWordsFn = uint64_t (*)(const unsigned char* p, int64_t n);

// The portable loop, also the remainder of the vector loops. Four
// independent accumulators: the loop is bound by loads, not by one chain of
// additions.
inline uint64_t sum_words_portable(const unsigned char* p, int64_t n) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, sizeof(w));
    a0 += w[0];
    a1 += w[1];
    a2 += w[2];
    a3 += w[3];
  }
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    a0 += w;
  }
  if (i < n) {
    uint64_t w = 0;  // little-endian: the tail bytes are the low bytes
    for (int64_t k = 0; k < n - i; ++k) w |= uint64_t(p[i + k]) << (8 * k);
    a0 += w;
  }
  return a0 + a1 + a2 + a3;
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
