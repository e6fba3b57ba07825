// A fixed-width block of 16 float32 lanes built from VecF, for the row-wise
// LayerNorm kernels.
//
// Row statistics (mean, variance, the sums of LayerNormGrad) are reductions
// over H. Their bits depend on how the terms are associated, and the natural
// association "one accumulator per SIMD lane" would differ between AVX-512
// (16 lanes), AVX2 and the generic build (8). Writing every row kernel in
// terms of Lanes, always 16 wide whatever VecF is, fixes the association:
// column c always lands in lane c % 16, so every ISA variant computes the
// same sums in the same order and gives the same bits.
//
// Besides VecF's widening loads this adds what the row kernels need and VecF
// does not offer: broadcasts and narrowing stores to the 16-bit formats,
// rounded to nearest even with the exact semantics of from_float (dtypes.h),
// plus non-temporal variants of the stores for outputs far larger than the
// caches. Compiled once per ISA, like simd.h.
#pragma once

#include <cstdint>
#include <cstring>

#include "simd.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

inline constexpr int kLanes = 16;

struct Lanes {
  static constexpr int kVecs = kLanes / VecF::kWidth;
  static_assert(kVecs * VecF::kWidth == kLanes, "VecF width must divide 16");
  VecF v[kVecs];

  static Lanes zero() {
    Lanes r;
    for (int i = 0; i < kVecs; ++i) r.v[i] = VecF::zero();
    return r;
  }
  static Lanes splat(float s);
  template <typename T>
  static Lanes load(const T* p) {
    Lanes r;
    for (int i = 0; i < kVecs; ++i) r.v[i] = VecF::load(p + i * VecF::kWidth);
    return r;
  }
  void store(float* p) const {
    for (int i = 0; i < kVecs; ++i) v[i].store(p + i * VecF::kWidth);
  }
  void store(bf16_t* p) const;
  void store(f16_t* p) const;
  // Non-temporal stores: p must be aligned to 16 elements' worth of bytes
  // (64 for float32, 32 for the 16-bit formats). The values stored are the
  // same as store()'s; only the cache behaviour differs.
  void stream(float* p) const;
  void stream(bf16_t* p) const;
  void stream(f16_t* p) const;

  friend Lanes operator+(Lanes a, const Lanes& b) {
    for (int i = 0; i < kVecs; ++i) a.v[i] = a.v[i] + b.v[i];
    return a;
  }
  friend Lanes operator-(Lanes a, const Lanes& b) {
    for (int i = 0; i < kVecs; ++i) a.v[i] = a.v[i] - b.v[i];
    return a;
  }
  friend Lanes operator*(Lanes a, const Lanes& b) {
    for (int i = 0; i < kVecs; ++i) a.v[i] = a.v[i] * b.v[i];
    return a;
  }
};

// canonical_nan(l), defined per ISA below, replaces every NaN lane (any sign
// or payload) by the one quiet NaN kCanonicalNanBits (dtypes.h).
// stream_fence(), defined per ISA below, makes non-temporal stores visible
// to other threads; a kernel calls it before it reports a block done.

#if defined(JAX_LNGB_ISA_AVX512)

inline Lanes Lanes::splat(float s) { return {{VecF{_mm512_set1_ps(s)}}}; }

inline Lanes canonical_nan(const Lanes& l) {
  const __m512 qnan = _mm512_castsi512_ps(_mm512_set1_epi32(int(kCanonicalNanBits)));
  return {{VecF{_mm512_mask_mov_ps(l.v[0].v, _mm512_cmp_ps_mask(l.v[0].v, l.v[0].v, _CMP_UNORD_Q), qnan)}}};
}

namespace lanes_detail {
// float32 bits -> bfloat16 bits (RNE; NaN -> quiet NaN, sign kept), in the
// low half of each 32-bit lane.
inline __m512i to_bf16_bits(__m512 f) {
  const __m512i u = _mm512_castps_si512(f);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, hi, _mm512_set1_epi32(0x0040));
}
inline __m256i to_bf16(__m512 f) { return _mm512_cvtepi32_epi16(to_bf16_bits(f)); }
inline __m256i to_f16(__m512 f) { return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
}  // namespace lanes_detail

inline void Lanes::store(bf16_t* p) const {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), lanes_detail::to_bf16(v[0].v));
}
inline void Lanes::store(f16_t* p) const {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), lanes_detail::to_f16(v[0].v));
}
inline void Lanes::stream(float* p) const { _mm512_stream_ps(p, v[0].v); }
inline void Lanes::stream(bf16_t* p) const {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), lanes_detail::to_bf16(v[0].v));
}
inline void Lanes::stream(f16_t* p) const {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), lanes_detail::to_f16(v[0].v));
}
inline void stream_fence() { _mm_sfence(); }

#elif defined(JAX_LNGB_ISA_AVX2)

inline Lanes Lanes::splat(float s) {
  const VecF b{_mm256_set1_ps(s)};
  return {{b, b}};
}

inline Lanes canonical_nan(const Lanes& l) {
  const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(int(kCanonicalNanBits)));
  Lanes r;
  for (int i = 0; i < Lanes::kVecs; ++i)
    r.v[i] = VecF{_mm256_blendv_ps(l.v[i].v, qnan, _mm256_cmp_ps(l.v[i].v, l.v[i].v, _CMP_UNORD_Q))};
  return r;
}

namespace lanes_detail {
inline __m256i to_bf16_bits(__m256 f) {
  const __m256i u = _mm256_castps_si256(f);
  const __m256i hi = _mm256_srli_epi32(u, 16);
  const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  const __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x0040));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}
// Eight 32-bit lanes holding values < 2^16 -> eight uint16.
inline __m128i pack_low_halves(__m256i w) {
  return _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}
inline __m256i to_bf16(const VecF (&v)[2]) {
  return _mm256_set_m128i(pack_low_halves(to_bf16_bits(v[1].v)), pack_low_halves(to_bf16_bits(v[0].v)));
}
inline __m256i to_f16(const VecF (&v)[2]) {
  constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return _mm256_set_m128i(_mm256_cvtps_ph(v[1].v, kRne), _mm256_cvtps_ph(v[0].v, kRne));
}
}  // namespace lanes_detail

inline void Lanes::store(bf16_t* p) const {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), lanes_detail::to_bf16(v));
}
inline void Lanes::store(f16_t* p) const {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), lanes_detail::to_f16(v));
}
inline void Lanes::stream(float* p) const {
  _mm256_stream_ps(p, v[0].v);
  _mm256_stream_ps(p + 8, v[1].v);
}
inline void Lanes::stream(bf16_t* p) const {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), lanes_detail::to_bf16(v));
}
inline void Lanes::stream(f16_t* p) const {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), lanes_detail::to_f16(v));
}
inline void stream_fence() { _mm_sfence(); }

#else  // generic

inline Lanes Lanes::splat(float s) {
  float b[kLanes];
  for (int i = 0; i < kLanes; ++i) b[i] = s;
  return load(b);
}

inline Lanes canonical_nan(const Lanes& l) {
  float b[kLanes];
  l.store(b);
  for (float& v : b) v = jax_lngb::canonical_nan(v);
  return Lanes::load(b);
}

namespace lanes_detail {
template <typename T>
inline void narrow(const Lanes& l, T* p) {
  float b[kLanes];
  l.store(b);
  for (int i = 0; i < kLanes; ++i) p[i] = from_float<T>(b[i]);
}
}  // namespace lanes_detail

inline void Lanes::store(bf16_t* p) const { lanes_detail::narrow(*this, p); }
inline void Lanes::store(f16_t* p) const { lanes_detail::narrow(*this, p); }
// The portable build has no non-temporal stores: plain stores, same values.
inline void Lanes::stream(float* p) const { store(p); }
inline void Lanes::stream(bf16_t* p) const { store(p); }
inline void Lanes::stream(f16_t* p) const { store(p); }
inline void stream_fence() {}

#endif

// Two consecutive blocks (32 elements) at p: the same values as two
// store()/stream() calls; AVX-512 packs 16-bit results of both in one step.
template <bool kStream, typename T>
inline void store2(T* p, const Lanes& a, const Lanes& b) {
  if (kStream) {
    a.stream(p);
    b.stream(p + kLanes);
  } else {
    a.store(p);
    b.store(p + kLanes);
  }
}
#if defined(JAX_LNGB_ISA_AVX512)
namespace lanes_detail {
// bfloat16 bits of f in the high half of each 32-bit lane (low half junk):
// the sum before from_float's final shift, or the quiet NaN.
inline __m512i bf16_in_high_half(__m512 f) {
  const __m512i u = _mm512_castps_si512(f);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x00400000));
}
// The odd 16-bit words of a (positions 0..15) then of b (16..31).
inline __m512i high_halves(__m512i a, __m512i b) {
  const __m512i idx = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25,
                                       23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(a, idx, b);
}
}  // namespace lanes_detail
template <>
inline void store2<false, bf16_t>(bf16_t* p, const Lanes& a, const Lanes& b) {
  _mm512_storeu_si512(p, lanes_detail::high_halves(lanes_detail::bf16_in_high_half(a.v[0].v),
                                                   lanes_detail::bf16_in_high_half(b.v[0].v)));
}
template <>
inline void store2<true, bf16_t>(bf16_t* p, const Lanes& a, const Lanes& b) {
  // 64 bytes: needs 64-byte alignment, i.e. an even block of an aligned row.
  if ((reinterpret_cast<uintptr_t>(p) & 63) != 0) {
    a.stream(p);
    b.stream(p + kLanes);
    return;
  }
  _mm512_stream_si512(
      reinterpret_cast<__m512i*>(p),
      lanes_detail::high_halves(lanes_detail::bf16_in_high_half(a.v[0].v), lanes_detail::bf16_in_high_half(b.v[0].v)));
}
#endif

// Partial blocks (the last one of a row whose length is not a multiple of
// 16). AVX-512 masks the loads and stores (masked-off elements are neither
// read nor written, and never fault); the other builds go through a buffer.
// Same values either way: loads give +0 beyond n.
#if defined(JAX_LNGB_ISA_AVX512)
namespace lanes_detail {
inline __mmask16 first_n(int64_t n) { return __mmask16((1u << n) - 1u); }
inline Lanes masked_load(const float* p, __mmask16 m) { return {{VecF{_mm512_maskz_loadu_ps(m, p)}}}; }
inline Lanes masked_load(const bf16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return {{VecF{_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))}}};
}
inline Lanes masked_load(const f16_t* p, __mmask16 m) {
  return {{VecF{_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p))}}};
}
inline void masked_store(float* p, const Lanes& v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v.v[0].v); }
inline void masked_store(bf16_t* p, const Lanes& v, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, to_bf16(v.v[0].v)); }
inline void masked_store(f16_t* p, const Lanes& v, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, to_f16(v.v[0].v)); }
}  // namespace lanes_detail
#endif

// The first n (<= 16) elements at p, zero beyond.
template <typename T>
inline Lanes load_n(const T* p, int64_t n) {
  if (n == kLanes) return Lanes::load(p);
#if defined(JAX_LNGB_ISA_AVX512)
  return lanes_detail::masked_load(p, lanes_detail::first_n(n));
#else
  T buf[kLanes] = {};
  std::memcpy(buf, p, size_t(n) * sizeof(T));
  return Lanes::load(buf);
#endif
}

// Stores the first n (<= 16) lanes at p.
template <typename T>
inline void store_n(T* p, const Lanes& v, int64_t n) {
  if (n == kLanes) return v.store(p);
#if defined(JAX_LNGB_ISA_AVX512)
  lanes_detail::masked_store(p, v, lanes_detail::first_n(n));
#else
  T buf[kLanes];
  v.store(buf);
  std::memcpy(p, buf, size_t(n) * sizeof(T));
#endif
}

// v with lanes n.. set to +0.
inline Lanes keep_first(const Lanes& v, int64_t n) {
  if (n == kLanes) return v;
#if defined(JAX_LNGB_ISA_AVX512)
  return {{VecF{_mm512_maskz_mov_ps(lanes_detail::first_n(n), v.v[0].v)}}};
#else
  float buf[kLanes];
  v.store(buf);
  for (int64_t i = n; i < kLanes; ++i) buf[i] = 0.0f;
  return Lanes::load(buf);
#endif
}

// The 16 lanes added in a fixed tree: lane i + lane i+8 (i < 8), then
// i + i+4, i + i+2, i + i+1. The ISA variants below form exactly these
// sums with shuffles (addition is commutative, so operand order is free);
// every variant returns the same bits.
#if defined(JAX_LNGB_ISA_AVX512) || defined(JAX_LNGB_ISA_AVX2)
inline float sum_lanes_8(__m256 t) {
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 w = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return _mm_cvtss_f32(_mm_add_ss(w, _mm_movehdup_ps(w)));
}
#endif
#if defined(JAX_LNGB_ISA_AVX512)
inline float sum_lanes(const Lanes& v) {
  const __m256 lo = _mm512_castps512_ps256(v.v[0].v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v.v[0].v), 1));
  return sum_lanes_8(_mm256_add_ps(lo, hi));
}
#elif defined(JAX_LNGB_ISA_AVX2)
inline float sum_lanes(const Lanes& v) { return sum_lanes_8(_mm256_add_ps(v.v[0].v, v.v[1].v)); }
#else
inline float sum_lanes(const Lanes& v) {
  float b[kLanes];
  v.store(b);
  for (int h = kLanes / 2; h >= 1; h /= 2)
    for (int i = 0; i < h; ++i) b[i] = b[i] + b[i + h];
  return b[0];
}
#endif

// Row sums of kSums per-column terms over n columns, with an association
// fixed by the shape alone: column c is added into lane c % 16 of
// accumulator (c / 16) % kAcc, in column order; the kAcc accumulators are
// then combined pairwise (i with i + kAcc/2, ...) and the lanes by
// sum_lanes. kAcc independent chains hide the adder latency.
//
// term(c, w, t) fills t[0..kSums) with the terms of columns c .. c+w-1
// (w == 16 except for the last block of a row, whose lanes >= w are
// discarded here, so a term may be anything there).
//
// row_partials stops before the lanes are added: part[s] holds sum s's 16
// lane totals, for sum_lanes (row_sums) or sum_lanes16 (many short rows).
// Its loops over sums and accumulators are unrolled by pragma: only with
// constant indices does GCC keep acc in registers wherever a kernel inlines
// this; left rolled, it kept them on the stack (a store and a reload per
// add; the forward of 64-column rows took 1.5x as long).
template <int kAcc, int kSums, class Term>
inline void row_partials(int64_t n, Term&& term, Lanes* part) {
  static_assert(kAcc >= 1 && (kAcc & (kAcc - 1)) == 0, "kAcc must be a power of two");
  Lanes acc[kSums][kAcc];
#pragma GCC unroll 16
  for (int s = 0; s < kSums; ++s)
#pragma GCC unroll 16
    for (int j = 0; j < kAcc; ++j) acc[s][j] = Lanes::zero();
  int64_t c = 0;
  for (; c + kAcc * kLanes <= n; c += kAcc * kLanes) {
#pragma GCC unroll 16
    for (int j = 0; j < kAcc; ++j) {
      Lanes t[kSums];  // scoped here so it lives in registers
      term(c + j * kLanes, int64_t(kLanes), t);
#pragma GCC unroll 16
      for (int s = 0; s < kSums; ++s) acc[s][j] = acc[s][j] + t[s];
    }
  }
  // Fewer than kAcc blocks remain: one each into accumulators 0, 1, ...
  // (a constant trip count, so the accumulators stay in registers).
#pragma GCC unroll 16
  for (int j = 0; j < kAcc; ++j) {
    if (c >= n) break;
    const int64_t w = n - c < kLanes ? n - c : int64_t(kLanes);
    Lanes t[kSums];
    term(c, w, t);
#pragma GCC unroll 16
    for (int s = 0; s < kSums; ++s) acc[s][j] = acc[s][j] + keep_first(t[s], w);
    c += kLanes;
  }
#pragma GCC unroll 16
  for (int s = 0; s < kSums; ++s) {
#pragma GCC unroll 16
    for (int h = kAcc / 2; h >= 1; h /= 2)
#pragma GCC unroll 16
      for (int j = 0; j < h; ++j) acc[s][j] = acc[s][j] + acc[s][j + h];
    part[s] = acc[s][0];
  }
}

template <int kAcc, int kSums, class Term>
inline void row_sums(int64_t n, Term&& term, float* out) {
  Lanes part[kSums];
  row_partials<kAcc, kSums>(n, term, part);
  for (int s = 0; s < kSums; ++s) out[s] = sum_lanes(part[s]);
}

// sum_lanes of 16 vectors at once: out[r] = sum_lanes(v[r]), the same
// additions in the same order. AVX-512 does them as a transposition (8 + 4 +
// 2 + 1 vector adds for all 16 where sum_lanes takes 4 dependent steps per
// vector): the kernels for short rows form their rows' sums 16 rows at a
// time through it.
#if defined(JAX_LNGB_ISA_AVX512)
namespace lanes_detail {
// The intrinsics below, through their masked forms with every lane kept:
// the same instructions, without the undefined pass-through operand that
// GCC 12 reports as maybe-uninitialized once they are inlined.
template <int kImm>
inline __m512 shuffle_f32x4(__m512 a, __m512 b) {
  return _mm512_mask_shuffle_f32x4(a, __mmask16(0xFFFF), a, b, kImm);
}
template <int kImm>
inline __m512 shuffle_ps(__m512 a, __m512 b) {
  return _mm512_mask_shuffle_ps(a, __mmask16(0xFFFF), a, b, kImm);
}
inline __m512 permute(__m512i idx, __m512 a) { return _mm512_mask_permutexvar_ps(a, __mmask16(0xFFFF), idx, a); }
}  // namespace lanes_detail

inline void sum_lanes16(const Lanes* v, float* out) {
  using lanes_detail::permute;
  using lanes_detail::shuffle_f32x4;
  using lanes_detail::shuffle_ps;
  // Each level adds, for every row, its lanes i and i + h (h = 8, 4, 2, 1)
  // with lane i as the first operand, as sum_lanes does, packing twice as
  // many rows per vector as the level before.
  __m512 a[8], b[4], c[2];
  for (int p = 0; p < 8; ++p) {  // rows 2p, 2p+1: 8 lane sums each
    const __m512 x = v[2 * p].v[0].v, y = v[2 * p + 1].v[0].v;
    a[p] = _mm512_add_ps(shuffle_f32x4<0x44>(x, y), shuffle_f32x4<0xEE>(x, y));
  }
  for (int q = 0; q < 4; ++q) {  // rows 4q .. 4q+3, one per 128-bit lane: 4 sums each
    b[q] = _mm512_add_ps(shuffle_f32x4<0x88>(a[2 * q], a[2 * q + 1]), shuffle_f32x4<0xDD>(a[2 * q], a[2 * q + 1]));
  }
  for (int q = 0; q < 2; ++q) {  // 128-bit lane k: rows 8q + k, 8q + 4 + k, 2 sums each
    c[q] = _mm512_add_ps(shuffle_ps<0x44>(b[2 * q], b[2 * q + 1]), shuffle_ps<0xEE>(b[2 * q], b[2 * q + 1]));
  }
  // 128-bit lane k: rows k, 4 + k, 8 + k, 12 + k; element 4k + j is row 4j + k.
  const __m512 d = _mm512_add_ps(shuffle_ps<0x88>(c[0], c[1]), shuffle_ps<0xDD>(c[0], c[1]));
  const __m512i rows = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  _mm512_storeu_ps(out, permute(rows, d));
}
#else
inline void sum_lanes16(const Lanes* v, float* out) {
  for (int r = 0; r < 16; ++r) out[r] = sum_lanes(v[r]);
}
#endif

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
