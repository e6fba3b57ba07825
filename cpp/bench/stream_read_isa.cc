// The probe's read loop, once per ISA; see simd.h for how this file is
// compiled several times and cpu_features.h for how a variant is chosen.
#include "bench/stream_read_table.h"
#include "kernels/base/simd.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

namespace {
#if defined(JAX_LNGB_ISA_AVX512) || defined(JAX_LNGB_ISA_AVX2)
#if defined(JAX_LNGB_ISA_AVX512)
using VecI = __m512i;
inline VecI zero_i() { return _mm512_setzero_si512(); }
inline VecI load_i(const unsigned char* p) { return _mm512_loadu_si512(p); }
inline VecI add_i(VecI a, VecI b) { return _mm512_add_epi64(a, b); }
#else
using VecI = __m256i;
inline VecI zero_i() { return _mm256_setzero_si256(); }
inline VecI load_i(const unsigned char* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline VecI add_i(VecI a, VecI b) { return _mm256_add_epi64(a, b); }
#endif
constexpr int64_t kVecBytes = sizeof(VecI);

// K buffers side by side, one vector of each in turn (one line at a time
// from each buffer measured 4% faster than two).
template <int K>
uint64_t sum_words_k(const unsigned char* const* p, int64_t n) {
  VecI a[K];
  for (int k = 0; k < K; ++k) a[k] = zero_i();
  int64_t i = 0;
  for (; i + kVecBytes <= n; i += kVecBytes) {
    for (int k = 0; k < K; ++k) a[k] = add_i(a[k], load_i(p[k] + i));
  }
  VecI s = zero_i();
  for (int k = 0; k < K; ++k) s = add_i(s, a[k]);
  // Through memory rather than a reduce intrinsic, whose GCC 12 header
  // trips -Wuninitialized.
  alignas(64) uint64_t lanes[kVecBytes / 8];
  std::memcpy(lanes, &s, sizeof(s));
  uint64_t r = 0;
  for (uint64_t v : lanes) r += v;
  for (int k = 0; k < K; ++k) r += sum_words_tail(p[k] + i, n - i);
  return r;
}

uint64_t sum_words(const unsigned char* const* p, int count, int64_t n) {
  switch (count) {
    case 1:
      return sum_words_k<1>(p, n);
    case 2:
      return sum_words_k<2>(p, n);
    case 3:
      return sum_words_k<3>(p, n);
    case 4:
      return sum_words_k<4>(p, n);
    default:
      return 0;  // no buffers (stream_read never asks for more than kMaxSideBySide)
  }
}
static_assert(kMaxSideBySide == 4, "sum_words dispatches on 1 .. 4 buffers");
#else
uint64_t sum_words(const unsigned char* const* p, int count, int64_t n) { return sum_words_portable(p, count, n); }
#endif
}  // namespace

SumWordsFn sum_words_fn() { return &sum_words; }

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
