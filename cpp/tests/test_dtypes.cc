// dtypes.h conversions against independent references: every one of the
// 65536 patterns of both 16-bit formats widened, round-tripped, and the
// float32 -> 16-bit rounding checked at every tie and its neighbours plus a
// sweep of the float32 bit space.
#include <cmath>
#include <cstdint>
#include <vector>

#include "harness.h"
#include "kernels/base/dtypes.h"
#include "support.h"

namespace jax_lngb::test {
namespace {

// A 16-bit format described by its field widths; values computed in double.
struct Format16 {
  const char* name;
  int exp_bits, man_bits, bias;

  uint16_t exp_mask() const { return uint16_t(((1u << exp_bits) - 1u) << man_bits); }
  uint16_t man_mask() const { return uint16_t((1u << man_bits) - 1u); }
  bool is_nan(uint16_t h) const { return (h & exp_mask()) == exp_mask() && (h & man_mask()) != 0; }
  bool is_inf(uint16_t h) const { return (h & 0x7FFFu) == exp_mask(); }
  uint16_t max_finite() const { return uint16_t(exp_mask() - 1u); }
  uint16_t quiet_bit() const { return uint16_t(1u << (man_bits - 1)); }
  // Value of a finite pattern (sign included), exact in double.
  double value(uint16_t h) const {
    const int e = (h & exp_mask()) >> man_bits;
    const int m = h & man_mask();
    const double mag = e == 0 ? std::ldexp(double(m), 1 - bias - man_bits)
                              : std::ldexp(double(m + (1 << man_bits)), e - bias - man_bits);
    return (h & 0x8000u) ? -mag : mag;
  }
  // |value| of the non-negative pattern p, with the first pattern past the
  // largest finite one standing for 2^(emax+1): IEEE rounds to it (and then
  // to infinity) exactly as it would to a next finite value.
  double magnitude_or_overflow(uint32_t p) const {
    if (p > max_finite()) return std::ldexp(1.0, (1 << exp_bits) - 1 - bias);
    return value(uint16_t(p));
  }
  // Round to nearest, ties to even, of a finite float, by search over the
  // ordered non-negative patterns (bit order is value order).
  uint16_t round(float x) const {
    const double a = std::fabs(double(x));
    const uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
    uint32_t lo = 0, hi = uint32_t(max_finite()) + 1;  // value(lo) <= a < value(hi) (or hi = overflow)
    if (a >= magnitude_or_overflow(hi)) return uint16_t(sign | exp_mask());
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (magnitude_or_overflow(mid) <= a)
        lo = mid;
      else
        hi = mid;
    }
    const double dlo = a - magnitude_or_overflow(lo), dhi = magnitude_or_overflow(hi) - a;
    uint32_t r = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1u) == 0 ? lo : hi);
    if (r > max_finite()) r = exp_mask();  // rounded past the largest finite value
    return uint16_t(sign | r);
  }
};

constexpr Format16 kF16{"float16", 5, 10, 15};
constexpr Format16 kBF16{"bfloat16", 8, 7, 127};

template <typename T>
T make(uint16_t b) {
  return T{b};
}

template <typename T>
void check_widening(const Format16& f) {
  for (uint32_t p = 0; p < 65536; ++p) {
    const uint16_t h = uint16_t(p);
    const float got = to_float(make<T>(h));
    if (f.is_nan(h)) {
      // The payload moves up unchanged (a signalling NaN stays signalling:
      // the kernels' arithmetic quiets it, the conversion does not).
      const uint32_t want =
          (uint32_t(h & 0x8000u) << 16) | 0x7F800000u | (uint32_t(h & f.man_mask()) << (23 - f.man_bits));
      CHECK_MSG(bits(got) == want, f.name << " pattern 0x" << std::hex << p << " widened to 0x" << bits(got));
    } else if (f.is_inf(h)) {
      CHECK_MSG(std::isinf(got) && std::signbit(got) == bool(h & 0x8000u), f.name << " inf 0x" << std::hex << p);
    } else {
      const double want = f.value(h);
      CHECK_MSG(double(got) == want && std::signbit(got) == bool(h & 0x8000u),
                f.name << " pattern 0x" << std::hex << p << " widened to " << got << ", want " << want);
    }
  }
}

template <typename T>
void check_round_trip(const Format16& f) {
  for (uint32_t p = 0; p < 65536; ++p) {
    const uint16_t h = uint16_t(p);
    const uint16_t back = bits(from_float<T>(to_float(make<T>(h))));
    // NaN comes back quiet with its sign and payload; everything else exact.
    const uint16_t want = f.is_nan(h) ? uint16_t(h | f.quiet_bit()) : h;
    CHECK_MSG(back == want, f.name << " 0x" << std::hex << p << " -> 0x" << back << ", want 0x" << want);
  }
}

template <typename T>
void check_narrowing_one(const Format16& f, float x) {
  const uint16_t got = bits(from_float<T>(x));
  if (std::isnan(x)) {
    CHECK_MSG(f.is_nan(got) && (got & f.quiet_bit()) && bool(got & 0x8000u) == std::signbit(x),
              f.name << " NaN 0x" << std::hex << bits(x) << " -> 0x" << got);
    return;
  }
  const uint16_t want = std::isinf(x) ? uint16_t((std::signbit(x) ? 0x8000u : 0u) | f.exp_mask()) : f.round(x);
  CHECK_MSG(got == want,
            f.name << " from " << x << " (0x" << std::hex << bits(x) << ") gave 0x" << got << ", want 0x" << want);
}

template <typename T>
void check_narrowing(const Format16& f) {
  // Every finite pattern, the midpoints to its upper neighbour (the ties),
  // and the float32 values a few ulps either side of both.
  for (uint32_t p = 0; p <= f.max_finite(); ++p) {
    const double v = f.value(uint16_t(p));
    const double mid = (v + f.magnitude_or_overflow(p + 1)) / 2;
    for (double anchor : {v, mid}) {
      float x = float(anchor);  // exact: both fit in float32
      for (int k = 0; k < 3; ++k) x = std::nextafter(x, 0.0f);
      for (int k = 0; k < 7; ++k, x = std::nextafter(x, INFINITY)) {
        check_narrowing_one<T>(f, x);
        check_narrowing_one<T>(f, -x);
      }
    }
  }
  // A sweep across the whole float32 bit space: every exponent, subnormals,
  // infinities and NaN payloads of both signs.
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099) check_narrowing_one<T>(f, bits_to_float(uint32_t(u)));
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::max(),
                  -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), 65504.0f, 65519.996f, 65520.0f, 1e-8f, 2.98e-8f})
    check_narrowing_one<T>(f, x);
  for (uint32_t payload : {1u, 2u, 0x1FFFu, 0x2000u, 0x3FFFFFu, 0x400000u, 0x7FFFFFu})
    for (uint32_t sign : {0u, 0x80000000u}) check_narrowing_one<T>(f, bits_to_float(sign | 0x7F800000u | payload));
}

JAX_LNGB_TEST(f16_widening_all_patterns) { check_widening<f16_t>(kF16); }
JAX_LNGB_TEST(bf16_widening_all_patterns) { check_widening<bf16_t>(kBF16); }
JAX_LNGB_TEST(f16_round_trip_all_patterns) { check_round_trip<f16_t>(kF16); }
JAX_LNGB_TEST(bf16_round_trip_all_patterns) { check_round_trip<bf16_t>(kBF16); }
JAX_LNGB_TEST(f16_narrowing_ties_and_sweep) { check_narrowing<f16_t>(kF16); }
JAX_LNGB_TEST(bf16_narrowing_ties_and_sweep) { check_narrowing<bf16_t>(kBF16); }

JAX_LNGB_TEST(float32_identity_and_dtype_tags) {
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65537) {
    const float x = bits_to_float(uint32_t(u));
    CHECK(bits(from_float<float>(x)) == uint32_t(u));
    CHECK(bits(to_float(x)) == uint32_t(u));
  }
  CHECK(dtype_of<float>() == DType::kF32 && dtype_of<f16_t>() == DType::kF16 && dtype_of<bf16_t>() == DType::kBF16);
  CHECK(dtype_size(DType::kF32) == 4 && dtype_size(DType::kF16) == 2 && dtype_size(DType::kBF16) == 2);
  CHECK(sizeof(f16_t) == 2 && sizeof(bf16_t) == 2);
}

}  // namespace
}  // namespace jax_lngb::test
