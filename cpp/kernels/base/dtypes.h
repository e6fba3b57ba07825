// Element types the kernels understand, and exact scalar conversions.
//
// The kernels never do arithmetic in 16 bits: every element is widened to
// float32 on load and results are narrowed once, at the end, with
// round-to-nearest-even. The conversions here are bit-exact and portable (no
// compiler extension types), so every ISA variant narrows identically.
#pragma once

#include <cstdint>
#include <cstring>

namespace jax_lngb {

// Storage-only tags for the 16-bit formats. They carry the raw bits; the
// SIMD layers decide how to widen them.
struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};

enum class DType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };
inline constexpr int kNumDTypes = 3;

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "float32";
    case DType::kF16:
      return "float16";
    case DType::kBF16:
      return "bfloat16";
  }
  return "?";
}

// The DType of a storage type.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<f16_t>() {
  return DType::kF16;
}
template <>
constexpr DType dtype_of<bf16_t>() {
  return DType::kBF16;
}

inline int dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }

// Whether t names one of the kDTypes above (a DType cast from foreign bits
// may not).
inline bool is_valid_dtype(DType t) { return static_cast<unsigned>(t) < unsigned(kNumDTypes); }

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The one quiet NaN the gamma/beta sums store for any NaN (which NaN an
// operation returns when both operands are NaN depends on operand order,
// which each ISA variant's compiler picks differently).
inline constexpr uint32_t kCanonicalNanBits = 0x7FC00000u;
inline float canonical_nan(float v) { return v != v ? bits_to_float(kCanonicalNanBits) : v; }

inline float to_float(float x) { return x; }
inline float to_float(bf16_t x) { return bits_to_float(uint32_t(x.bits) << 16); }
inline float to_float(f16_t x) {
  const uint32_t h = x.bits;
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_to_float(sign | 0x7F800000u | (mant << 13));  // Inf/NaN
  if (exp != 0) return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_to_float(sign);  // signed zero
  // Subnormal half: normalise into a float32 normal.
  int e = -1;
  do {
    mant <<= 1;
    ++e;
  } while ((mant & 0x400u) == 0);
  return bits_to_float(sign | (uint32_t(112 - e) << 23) | ((mant & 0x3FFu) << 13));
}

// float32 -> 16-bit, round to nearest, ties to even; NaN stays NaN (quiet,
// sign kept), overflow goes to Inf as IEEE rounding prescribes.
template <typename T>
T from_float(float x);

template <>
inline float from_float<float>(float x) {
  return x;
}

template <>
inline bf16_t from_float<bf16_t>(float x) {
  uint32_t u = float_to_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bf16_t{uint16_t((u >> 16) | 0x0040u)};
  u += 0x7FFFu + ((u >> 16) & 1u);
  return bf16_t{uint16_t(u >> 16)};
}

template <>
inline f16_t from_float<f16_t>(float x) {
  const uint32_t u = float_to_bits(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return f16_t{uint16_t(sign | 0x7E00u | ((a >> 13) & 0x3FFu))};
  if (a >= 0x477FF000u) return f16_t{uint16_t(sign | 0x7C00u)};  // rounds to >= 65520: Inf
  if (a >= 0x38800000u) {                                        // normal half
    const uint32_t mant_rounded = a + 0xFFFu + ((a >> 13) & 1u);
    return f16_t{uint16_t(sign | ((mant_rounded - 0x38000000u) >> 13))};
  }
  if (a < 0x33000000u) return f16_t{uint16_t(sign)};  // below half of the smallest subnormal
  // Subnormal half: shift the implicit-one mantissa into place, round RNE.
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  return f16_t{uint16_t(sign | r)};
}

}  // namespace jax_lngb
