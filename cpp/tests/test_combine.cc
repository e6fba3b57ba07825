// combine_partials and store_sums_fn: block partials added in block order and
// narrowed once, bit-exact for every output dtype, column granularity and
// executor; nothing outside [groups][cols] is written.
#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

#include "harness.h"
#include "kernels/grad_beta.h"
#include "kernels/reduce_rows.h"
#include "support.h"

namespace jax_lngb::test {
namespace {

template <typename TOut>
void check_combine(std::mt19937_64& gen, Executors& zoo, int64_t G, int64_t RB, int64_t H, int64_t col_chunk,
                   const NamedExecutor& ne) {
  const std::vector<float> orig = random_values<float>(gen, G * RB * 2 * H, 1000.0f);
  std::vector<float> data = orig;
  GradBetaPartials parts{data.data(), G, RB, H};
  // Exactly sized outputs: ASan catches a write past [G][H].
  std::vector<TOut> out_g(static_cast<size_t>(G * H), TOut{}), out_b(static_cast<size_t>(G * H), TOut{});
  combine_partials(parts, dtype_of<TOut>(), out_g.data(), out_b.data(), col_chunk, ne.ex);
  zoo.flush_deferred();
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < H; ++c) {
      float sg = orig[size_t((g * RB * 2) * H + c)], sb = orig[size_t((g * RB * 2 + 1) * H + c)];
      for (int64_t b = 1; b < RB; ++b) {
        sg = sg + orig[size_t(((g * RB + b) * 2) * H + c)];
        sb = sb + orig[size_t(((g * RB + b) * 2 + 1) * H + c)];
      }
      CHECK_MSG(bits(out_g[size_t(g * H + c)]) == bits(from_float<TOut>(sg)) &&
                    bits(out_b[size_t(g * H + c)]) == bits(from_float<TOut>(sb)),
                type_name<TOut>() << " G " << G << " RB " << RB << " H " << H << " chunk " << col_chunk << " ("
                                  << ne.name << ") at " << g << "," << c);
    }
}

JAX_LNGB_TEST(combine_partials_block_order_bit_exact) {
  std::mt19937_64 gen(7);
  Executors zoo;
  const NamedExecutor& pool = zoo.all()[5];
  for (int64_t G : {0, 1, 3})
    for (int64_t RB : {1, 2, 5, 64})
      for (int64_t H : {0, 1, 7, 64, 129, 1000})
        for (int64_t chunk : {-5, 0, 1, 3, 64, 1000, 1 << 30}) {
          check_combine<float>(gen, zoo, G, RB, H, chunk, pool);
          check_combine<f16_t>(gen, zoo, G, RB, H, chunk, pool);
          check_combine<bf16_t>(gen, zoo, G, RB, H, chunk, pool);
        }
}

JAX_LNGB_TEST(combine_partials_any_executor) {
  // Big enough (2 MiB of partials) for the executor to hand out work.
  std::mt19937_64 gen(8);
  Executors zoo;
  for (const NamedExecutor& ne : zoo.all())
    for (int64_t chunk : {64, 333, 4096}) {
      check_combine<float>(gen, zoo, 1, 64, 4096, chunk, ne);
      check_combine<bf16_t>(gen, zoo, 3, 16, 2048, chunk, ne);
    }
}

// A producer with zero rows has a partition with zero row blocks
// (make_reduce_partition(0, ...).rows.num_blocks == 0); its sums are empty,
// so the results must be zeros.
JAX_LNGB_TEST(combine_partials_with_zero_blocks_gives_zeros) {
  Executors zoo;
  std::vector<float> none;  // [G][0][2][H]: no floats at all
  GradBetaPartials parts{none.data(), 2, 0, 5};
  std::vector<float> out_g(10, 1.0f), out_b(10, 1.0f);
  combine_partials(parts, DType::kF32, out_g.data(), out_b.data(), 5, zoo.pool());
  for (int i = 0; i < 10; ++i) CHECK(bits(out_g[size_t(i)]) == 0u && bits(out_b[size_t(i)]) == 0u);
}

// Whatever NaN (sign, payload) a partial holds, the result is the one
// canonical quiet NaN of the output dtype: ISA variants may produce
// different NaNs in their partials, their results must not differ.
JAX_LNGB_TEST(combine_partials_canonicalizes_nan) {
  Executors zoo;
  const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu};
  for (uint32_t nan_bits : nans) {
    // G 1, RB 2, H 4: column 0 NaN in block 0, column 1 NaN in block 1,
    // column 2 Inf - Inf, column 3 finite.
    std::vector<float> data = {bits_to_float(nan_bits), 1.f,       INFINITY, 2.f, 3.f, 4.f, 5.f, 6.f, 1.f,
                               bits_to_float(nan_bits), -INFINITY, 2.f,      3.f, 4.f, 5.f, 6.f};
    GradBetaPartials parts{data.data(), 1, 2, 4};
    std::vector<float> f32_g(4), f32_b(4);
    std::vector<bf16_t> bf_g(4), bf_b(4);
    std::vector<f16_t> h_g(4), h_b(4);
    std::vector<float> again = data;
    combine_partials(parts, DType::kF32, f32_g.data(), f32_b.data(), 4, zoo.pool());
    GradBetaPartials p2{again.data(), 1, 2, 4};
    combine_partials(p2, DType::kBF16, bf_g.data(), bf_b.data(), 4, zoo.pool());
    std::vector<float> third = data;
    GradBetaPartials p3{third.data(), 1, 2, 4};
    combine_partials(p3, DType::kF16, h_g.data(), h_b.data(), 4, zoo.pool());
    zoo.flush_deferred();
    for (int c : {0, 1, 2}) {
      CHECK_MSG(bits(f32_g[size_t(c)]) == 0x7FC00000u, "f32 column " << c << " from NaN " << nan_bits);
      CHECK_MSG(bits(bf_g[size_t(c)]) == 0x7FC0u, "bf16 column " << c << " from NaN " << nan_bits);
      CHECK_MSG(bits(h_g[size_t(c)]) == 0x7E00u, "f16 column " << c << " from NaN " << nan_bits);
    }
    CHECK(f32_g[3] == 4.f && f32_b[3] == 12.f && f32_b[0] == 6.f);
  }
}

// store_sums_fn, on the active ISA (the sanitizer script and the Python
// determinism tests force the others): every length (whole vectors and
// tails), every dtype, bit-identical to from_float, NaNs of any sign and
// payload to the canonical one, infinities, overflow to Inf, subnormals.
JAX_LNGB_TEST(store_sums_every_dtype) {
  std::mt19937_64 gen(9);
  const uint32_t specials[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7F800000u, 0xFF800000u,
                               0x477FF000u, 0x477FEFFFu, 0x33000000u, 0x33000001u, 0x38800000u, 0x387FFFFFu,
                               0x00000001u, 0x80000000u, 0x7F7FFFFFu, 0x3F808000u, 0x3F818000u};
  for (int64_t n : {0, 1, 7, 16, 17, 33, 1000}) {
    std::vector<float> src = random_values<float>(gen, n, 1e5f);
    for (int64_t i = 0; i < n; i += 3) src[size_t(i)] = bits_to_float(specials[size_t(i / 3) % std::size(specials)]);
    std::vector<float> f(static_cast<size_t>(n));
    std::vector<f16_t> h(static_cast<size_t>(n));
    std::vector<bf16_t> b(static_cast<size_t>(n));
    store_sums_fn(DType::kF32)(src.data(), f.data(), n);
    store_sums_fn(DType::kF16)(src.data(), h.data(), n);
    store_sums_fn(DType::kBF16)(src.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float v = src[size_t(i)];
      const bool nan = v != v;
      CHECK_MSG(bits(f[size_t(i)]) == (nan ? 0x7FC00000u : bits(v)), "f32 " << i << " of " << n);
      CHECK_MSG(bits(h[size_t(i)]) == (nan ? 0x7E00u : bits(from_float<f16_t>(v))), "f16 " << i << " of " << n);
      CHECK_MSG(bits(b[size_t(i)]) == (nan ? 0x7FC0u : bits(from_float<bf16_t>(v))), "bf16 " << i << " of " << n);
    }
  }
  CHECK(store_sums_fn(static_cast<DType>(99)) == nullptr);
}

}  // namespace
}  // namespace jax_lngb::test
