// A minimal float32 vector type per instruction set.
//
// Each kernel translation unit is compiled once per ISA with one of
//   JAX_LNGB_ISA_AVX512  (-mavx512f -mavx512bw -mavx512vl ...)
//   JAX_LNGB_ISA_AVX2    (-mavx2 -mf16c; FMA is deliberately not used)
//   JAX_LNGB_ISA_GENERIC (baseline flags; auto-vectorised portable code)
// defined, and the runtime dispatcher (cpu_features.cc) picks one table. The
// vector type offers exactly what the kernels need: widening loads from the
// three storage types, add, mul, store. Products and sums are separate
// roundings everywhere (the build passes -ffp-contract=off), so every ISA
// produces the same bits.
#pragma once

#include <cstdint>

#include "dtypes.h"

#if defined(JAX_LNGB_ISA_AVX512) || defined(JAX_LNGB_ISA_AVX2)
#include <immintrin.h>
#endif

namespace jax_lngb {

// Each VecF lives in its variant's namespace (JAX_LNGB_ISA_NS): the three
// definitions differ, and under one name the linker would keep one
// out-of-line copy (at -O0, say) and run it in every variant.
#if defined(JAX_LNGB_ISA_AVX512)
#define JAX_LNGB_ISA_NS avx512
namespace JAX_LNGB_ISA_NS {
struct VecF {
  static constexpr int kWidth = 16;
  __m512 v;
  static VecF zero() { return {_mm512_setzero_ps()}; }
  static VecF load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static VecF load(const bf16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
  }
  static VecF load(const f16_t* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  friend VecF operator+(VecF a, VecF b) { return {_mm512_add_ps(a.v, b.v)}; }
  friend VecF operator-(VecF a, VecF b) { return {_mm512_sub_ps(a.v, b.v)}; }
  friend VecF operator*(VecF a, VecF b) { return {_mm512_mul_ps(a.v, b.v)}; }
};

#elif defined(JAX_LNGB_ISA_AVX2)
#define JAX_LNGB_ISA_NS avx2
namespace JAX_LNGB_ISA_NS {
struct VecF {
  static constexpr int kWidth = 8;
  __m256 v;
  static VecF zero() { return {_mm256_setzero_ps()}; }
  static VecF load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static VecF load(const bf16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))};
  }
  static VecF load(const f16_t* p) { return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  friend VecF operator+(VecF a, VecF b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend VecF operator-(VecF a, VecF b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend VecF operator*(VecF a, VecF b) { return {_mm256_mul_ps(a.v, b.v)}; }
};

#elif defined(JAX_LNGB_ISA_GENERIC)
#define JAX_LNGB_ISA_NS generic
namespace JAX_LNGB_ISA_NS {
// Eight lanes held in an array: the compiler maps these loops onto the
// baseline vector unit (SSE2 on x86-64, NEON on aarch64).
struct VecF {
  static constexpr int kWidth = 8;
  float v[kWidth];
  static VecF zero() {
    VecF r;
    for (int i = 0; i < kWidth; ++i) r.v[i] = 0.0f;
    return r;
  }
  template <typename T>
  static VecF load(const T* p) {
    VecF r;
    for (int i = 0; i < kWidth; ++i) r.v[i] = to_float(p[i]);
    return r;
  }
  void store(float* p) const {
    for (int i = 0; i < kWidth; ++i) p[i] = v[i];
  }
  friend VecF operator+(VecF a, VecF b) {
    for (int i = 0; i < kWidth; ++i) a.v[i] += b.v[i];
    return a;
  }
  friend VecF operator-(VecF a, VecF b) {
    for (int i = 0; i < kWidth; ++i) a.v[i] -= b.v[i];
    return a;
  }
  friend VecF operator*(VecF a, VecF b) {
    for (int i = 0; i < kWidth; ++i) a.v[i] *= b.v[i];
    return a;
  }
};
#else
#error "define one of JAX_LNGB_ISA_AVX512, JAX_LNGB_ISA_AVX2, JAX_LNGB_ISA_GENERIC"
#endif
}  // namespace JAX_LNGB_ISA_NS

}  // namespace jax_lngb
