// The probe's read loop, once per ISA; see simd.h for how this file is
// compiled several times and cpu_features.h for how a variant is chosen.
#include "simd.h"
#include "stream_read_table.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

namespace {
#if defined(JAX_LNGB_ISA_AVX512)
uint64_t sum_words(const unsigned char* p, int64_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 256 <= n; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 192));
  }
  for (; i + 64 <= n; i += 64) a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
  const __m512i s = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
  // Through memory rather than _mm512_reduce_add_epi64, whose GCC 12 header
  // trips -Wuninitialized.
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, s);
  uint64_t r = 0;
  for (uint64_t v : lanes) r += v;
  return r + sum_words_portable(p + i, n - i);
}
#elif defined(JAX_LNGB_ISA_AVX2)
uint64_t sum_words(const unsigned char* p, int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + sum_words_portable(p + i, n - i);
}
#else
uint64_t sum_words(const unsigned char* p, int64_t n) { return sum_words_portable(p, n); }
#endif
}  // namespace

SumWordsFn sum_words_fn() { return &sum_words; }

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
