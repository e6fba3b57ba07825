// Fuzzing of the host-side CANN tiling (SPEC section 2).
//
// cpp/tests/CMakeLists.txt links the tiling library (`jax_lngb_tiling`)
// and defines JAX_LNGB_HAVE_TILING; tiling_adapter.h maps the real
// functions onto the structs below (nullopt = the function refused). The
// `tiling_adapter_is_written` case fails if the adapter is ever removed, so
// the fuzzer cannot be dropped silently. The reference below is the SPEC
// formula in 64-bit arithmetic; the fuzzer compares every field for random
// and boundary shapes and buffer sizes, including H = 0, B*S = 0, sizes
// that overflow uint32, and buffers one byte short of the minimum (UBSan
// turns a division by zero or a signed overflow into a failure).
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>

#include "harness.h"

namespace jax_lngb::test {

struct TilingQuery {
  uint64_t b = 0, s = 0, h = 0, original_h = 0;
  uint64_t stack_buffer_bytes = 0;
  uint32_t type_size = 4;  // 2 (half) or 4 (float); anything else must be refused
  bool reuse_source = false;
};

struct TmpSize {
  uint64_t max_bytes = 0, min_bytes = 0;
};

struct GradBetaTiling {
  uint32_t stack_buffer_size = 0, b_length = 0, s_length = 0, h_length = 0, original_h_length = 0;
  uint32_t bsh_length = 0, bs_length = 0, one_cal_size = 0, number_of_tmp_buf = 0, loop_round = 0;
  uint32_t input_tail_size = 0, input_tail_pos = 0, bs_tail_size = 0, bsh_cur_length = 0, bs_cur_length = 0;
  uint32_t gamma_temp_tensor_pos = 0, beta_temp_tensor_pos = 0, input_dy_tmp_tensor_pos = 0;
  uint32_t res_for_gamma_tmp_tensor_pos = 0, reserved = 0;
};

// SPEC section 2, with every quantity checked to fit the uint32 fields.
inline std::optional<GradBetaTiling> reference_tiling(const TilingQuery& q) {
  if (q.type_size != 2 && q.type_size != 4) return std::nullopt;
  if (q.h == 0 || q.b == 0 || q.s == 0) return std::nullopt;
  const uint64_t kMax = UINT32_MAX;
  const uint64_t bs = q.b * q.s, bsh = bs * q.h;
  if (q.b > kMax || q.s > kMax || q.h > kMax || bs > kMax || bs / q.s != q.b || bsh > kMax) return std::nullopt;
  // CANN's stackBufferSize parameter is a uint32 byte count.
  if (q.stack_buffer_bytes > kMax) return std::nullopt;
  const uint64_t sf = q.stack_buffer_bytes / 4;
  if (sf < 2 * q.h) return std::nullopt;
  const bool half = q.type_size == 2;
  uint64_t one = half ? (sf - 2 * q.h) / 2 : sf;
  one = one / q.h * q.h;
  if (one == 0) return std::nullopt;
  if (one > bsh) one = bsh;
  GradBetaTiling t;
  t.stack_buffer_size = uint32_t(sf);
  t.b_length = uint32_t(q.b);
  t.s_length = uint32_t(q.s);
  t.h_length = uint32_t(q.h);
  t.original_h_length = uint32_t(q.original_h);
  t.bsh_length = uint32_t(bsh);
  t.bs_length = uint32_t(bs);
  t.one_cal_size = uint32_t(one);
  t.number_of_tmp_buf = half ? 2 : 1;
  t.loop_round = uint32_t(bsh / one);
  t.input_tail_size = uint32_t(bsh % one);
  t.input_tail_pos = uint32_t(bsh - bsh % one);
  t.bs_tail_size = uint32_t((bsh % one) / q.h);
  t.bsh_cur_length = uint32_t(one);
  t.bs_cur_length = uint32_t(one / q.h);
  if (half) {
    t.beta_temp_tensor_pos = uint32_t(q.h);
    t.input_dy_tmp_tensor_pos = uint32_t(2 * q.h);
    t.res_for_gamma_tmp_tensor_pos = uint32_t(2 * q.h + one);
  }
  return t;
}

// The shape rules are those of the tiling above (every dimension >= 1,
// B*S*H within uint32): a size for a shape no tiling accepts is refused.
inline std::optional<TmpSize> reference_tmp_size(const TilingQuery& q) {
  if (q.type_size != 2 && q.type_size != 4) return std::nullopt;
  const uint64_t kMax = UINT32_MAX;
  if (q.h == 0 || q.b == 0 || q.s == 0 || q.b > kMax || q.s > kMax || q.h > kMax) return std::nullopt;
  if (q.b * q.s > kMax || q.b * q.s * q.h > kMax) return std::nullopt;
  const uint64_t k = q.type_size == 2 ? 4 : 2;
  return TmpSize{k * q.b * q.s * q.h * 4, k * q.h * 4};
}

}  // namespace jax_lngb::test

#if defined(JAX_LNGB_HAVE_TILING)
#if __has_include("tiling_adapter.h")
#include "tiling_adapter.h"
#define JAX_LNGB_TILING_ADAPTER 1
#endif

namespace jax_lngb::test {
namespace {

JAX_LNGB_TEST(tiling_adapter_is_written) {
#if !defined(JAX_LNGB_TILING_ADAPTER)
  CHECK_MSG(false, "cpp/tiling is built but cpp/tests/tiling_adapter.h is missing: write it (see tiling_fuzz.cc)");
#endif
}

#if defined(JAX_LNGB_TILING_ADAPTER)
bool same(const GradBetaTiling& a, const GradBetaTiling& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;  // all-uint32 POD, no padding
}

void check_query(const TilingQuery& q) {
  const auto want = reference_tiling(q);
  const auto got = tiling_under_test(q);
  CHECK_MSG(
      want.has_value() == got.has_value() && (!want || same(*want, *got)),
      "B " << q.b << " S " << q.s << " H " << q.h << " bytes " << q.stack_buffer_bytes << " type " << q.type_size);
  if (got) {
    // Invariants the kernel relies on, whatever the reference says.
    CHECK(uint64_t(got->loop_round) * got->one_cal_size + got->input_tail_size == got->bsh_length);
    CHECK(got->h_length != 0 && got->one_cal_size % got->h_length == 0);
  }
  const auto want_tmp = reference_tmp_size(q);
  const auto got_tmp = tmp_size_under_test(q);
  CHECK(want_tmp.has_value() == got_tmp.has_value() &&
        (!want_tmp || (want_tmp->max_bytes == got_tmp->max_bytes && want_tmp->min_bytes == got_tmp->min_bytes)));
}

// Under AddressSanitizer the queries run about 30 times slower; there the
// run looks for memory errors along the code paths, which a tenth of the
// sample reaches as well. The plain build checks all of it against the spec.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kFuzzQueries = 20000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int kFuzzQueries = 20000;
#else
constexpr int kFuzzQueries = 200000;
#endif
#else
constexpr int kFuzzQueries = 200000;
#endif

JAX_LNGB_TEST(tiling_fuzz_against_spec) {
  std::mt19937_64 gen(2024);
  auto pick = [&](std::initializer_list<uint64_t> v) { return *(v.begin() + gen() % v.size()); };
  for (int i = 0; i < kFuzzQueries; ++i) {
    TilingQuery q;
    q.b = pick({0, 1, 2, 3, 7, 64, 1000, uint64_t(1) << 16, uint64_t(1) << 32}) + (gen() % 4 == 0 ? gen() % 5 : 0);
    q.s = pick({0, 1, 2, 8, 512, 4096, uint64_t(1) << 20}) + (gen() % 4 == 0 ? gen() % 5 : 0);
    q.h = pick({0, 1, 7, 8, 16, 33, 768, 1024, 4096, uint64_t(1) << 20, uint64_t(1) << 31});
    q.original_h = q.h - (q.h > 0 ? gen() % (q.h < 8 ? q.h : 8) : 0);
    q.type_size = uint32_t(pick({2, 4, 2, 4, 1, 3, 8}));
    q.reuse_source = gen() % 2;
    const uint64_t min_bytes = (q.type_size == 2 ? 16 : 8) * q.h;
    q.stack_buffer_bytes = pick({0, 1, min_bytes - 1, min_bytes, min_bytes + 3, 192 * 1024, uint64_t(1) << 33}) +
                           (gen() % 3 == 0 ? gen() % 4096 : 0);
    check_query(q);
  }
}
#endif

}  // namespace
}  // namespace jax_lngb::test
#endif  // JAX_LNGB_HAVE_TILING
