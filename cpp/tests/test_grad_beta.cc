// grad_beta, the LayerNormGradBeta driver: bit-exact against the model of
// its contract (support.h) and within the float32 accumulation bound of the
// float64 sums, over edge shapes, every input/output dtype, every kind of
// executor, NaN/Inf inputs, concurrent callers, and a sparse problem with
// more than 2^31 elements.
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "harness.h"
#include "kernels/grad_beta.h"
#include "support.h"

namespace jax_lngb::test {
namespace {

template <typename T, typename TOut>
struct Outputs {
  std::vector<TOut> g, b;
};

template <typename T, typename TOut>
Outputs<T, TOut> run_kernel(const std::vector<T>& res, const std::vector<T>& dy, int64_t G, int64_t R, int64_t H,
                            const CpuExecutor& ex, Executors& zoo) {
  // Outputs exactly [G][H] and pre-filled with garbage: every element must
  // be written, none beyond.
  Outputs<T, TOut> o{std::vector<TOut>(static_cast<size_t>(G * H), from_float<TOut>(-12345.0f)),
                     std::vector<TOut>(static_cast<size_t>(G * H), from_float<TOut>(-12345.0f))};
  GradBetaProblem p;
  p.in_dtype = dtype_of<T>();
  p.out_dtype = dtype_of<TOut>();
  p.res_for_gamma = res.data();
  p.dy = dy.data();
  p.pd_gamma = o.g.data();
  p.pd_beta = o.b.data();
  p.groups = G;
  p.rows = R;
  p.cols = H;
  const char* err = grad_beta(p, ex);
  zoo.flush_deferred();
  CHECK_MSG(err == nullptr, "grad_beta refused a valid problem: " << (err ? err : ""));
  return o;
}

template <typename T, typename TOut>
Outputs<T, TOut> model_outputs(const std::vector<T>& res, const std::vector<T>& dy, int64_t G, int64_t R, int64_t H) {
  Outputs<T, TOut> want{std::vector<TOut>(static_cast<size_t>(G * H)), std::vector<TOut>(static_cast<size_t>(G * H))};
  model_grad_beta(res.data(), dy.data(), G, R, H, want.g.data(), want.b.data());
  return want;
}

template <typename T, typename TOut>
void check_same(const Outputs<T, TOut>& got, const Outputs<T, TOut>& want, int64_t G, int64_t R, int64_t H,
                const char* what) {
  for (int64_t i = 0; i < G * H; ++i)
    CHECK_MSG(same_result(got.g[size_t(i)], want.g[size_t(i)]) && same_result(got.b[size_t(i)], want.b[size_t(i)]),
              what << " " << type_name<T>() << "->" << type_name<TOut>() << " G " << G << " R " << R << " H " << H
                   << " at " << i << ": got " << to_float(got.g[size_t(i)]) << "/" << to_float(got.b[size_t(i)])
                   << " want " << to_float(want.g[size_t(i)]) << "/" << to_float(want.b[size_t(i)]));
}

template <typename T, typename TOut>
void check_against_model(const std::vector<T>& res, const std::vector<T>& dy, int64_t G, int64_t R, int64_t H,
                         const Outputs<T, TOut>& got, const char* what) {
  check_same(got, model_outputs<T, TOut>(res, dy, G, R, H), G, R, H, what);
}

template <typename T, typename TOut>
void check_against_float64(const std::vector<T>& res, const std::vector<T>& dy, int64_t G, int64_t R, int64_t H,
                           const Outputs<T, TOut>& got) {
  const Float64Sums ref = float64_sums(res.data(), dy.data(), G, R, H);
  const DType out = dtype_of<TOut>();
  for (int64_t i = 0; i < G * H; ++i) {
    const double eg = std::fabs(double(to_float(got.g[size_t(i)])) - ref.gamma[size_t(i)]);
    const double eb = std::fabs(double(to_float(got.b[size_t(i)])) - ref.beta[size_t(i)]);
    CHECK_MSG(eg <= sum_error_bound(ref.gamma[size_t(i)], ref.abs_gamma[size_t(i)], R, out) &&
                  eb <= sum_error_bound(ref.beta[size_t(i)], ref.abs_beta[size_t(i)], R, out),
              type_name<T>() << "->" << type_name<TOut>() << " G " << G << " R " << R << " H " << H << " at " << i
                             << ": errors " << eg << "/" << eb);
  }
}

template <typename T, typename TOut>
void small_grid(std::mt19937_64& gen, Executors& zoo) {
  for (int64_t G : {1, 3})
    for (int64_t R : {0, 1, 2, 3, 4, 5, 7, 15, 16, 17, 33, 100})
      for (int64_t H : {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 257, 1000}) {
        const std::vector<T> res = random_values<T>(gen, G * R * H);
        const std::vector<T> dy = random_values<T>(gen, G * R * H, 3.0f);
        const auto got = run_kernel<T, TOut>(res, dy, G, R, H, zoo.pool(), zoo);
        check_against_model(res, dy, G, R, H, got, "small grid");
        check_against_float64(res, dy, G, R, H, got);
      }
}

template <typename T>
void small_grid_all_outputs(std::mt19937_64& gen, Executors& zoo) {
  small_grid<T, float>(gen, zoo);
  small_grid<T, f16_t>(gen, zoo);
  small_grid<T, bf16_t>(gen, zoo);
}

JAX_LNGB_TEST(grad_beta_edge_shapes_every_dtype_pair) {
  std::mt19937_64 gen(1);
  Executors zoo;
  small_grid_all_outputs<float>(gen, zoo);
  small_grid_all_outputs<f16_t>(gen, zoo);
  small_grid_all_outputs<bf16_t>(gen, zoo);
}

// Shapes that exercise each branch of the partition: many row blocks,
// column chunks (H >> rows), groups with several blocks each, and bundles
// of tiny groups (what vmap over examples produces).
struct BigShape {
  int64_t G, R, H;
};
constexpr BigShape kBigShapes[] = {
    {1, 4096, 1024},  // 64 row blocks (f32)
    {1, 8, 70001},    // column chunks
    {1, 1, 300000},   // one row, column chunks
    {3, 20000, 64},   // several blocks per group
    {2000, 3, 40},    // tiny groups bundled into tasks
    {1, 200000, 1},   // H = 1
    {2, 3001, 257},   // odd everything
};

template <typename T, typename TOut>
void big_shapes_every_executor(std::mt19937_64& gen, Executors& zoo) {
  for (const BigShape& s : kBigShapes) {
    const std::vector<T> res = random_values<T>(gen, s.G * s.R * s.H);
    const std::vector<T> dy = random_values<T>(gen, s.G * s.R * s.H);
    const auto want = model_outputs<T, TOut>(res, dy, s.G, s.R, s.H);
    bool first = true;
    for (const NamedExecutor& ne : zoo.all()) {
      const auto got = run_kernel<T, TOut>(res, dy, s.G, s.R, s.H, ne.ex, zoo);
      check_same(got, want, s.G, s.R, s.H, ne.name.c_str());
      if (first) check_against_float64(res, dy, s.G, s.R, s.H, got);
      first = false;
    }
  }
}

JAX_LNGB_TEST(grad_beta_big_shapes_any_executor_same_bits) {
  std::mt19937_64 gen(2);
  Executors zoo;
  big_shapes_every_executor<float, float>(gen, zoo);
  big_shapes_every_executor<f16_t, f16_t>(gen, zoo);
  big_shapes_every_executor<bf16_t, float>(gen, zoo);
}

template <typename T>
void nan_inf_case(std::mt19937_64& gen, Executors& zoo) {
  const int64_t G = 2, R = 3000, H = 70;
  std::vector<T> res = random_values<T>(gen, G * R * H), dy = random_values<T>(gen, G * R * H);
  auto at = [&](int64_t g, int64_t r, int64_t c) { return size_t((g * R + r) * H + c); };
  const T nan = from_float<T>(NAN), inf = from_float<T>(INFINITY), ninf = from_float<T>(-INFINITY);
  res[at(0, 17, 3)] = nan;                                          // gamma[3] NaN, beta[3] finite
  dy[at(0, 5, 6)] = nan;                                            // gamma[6], beta[6] NaN
  dy[at(0, 2999, 4)] = inf;                                         // beta[4] +inf
  res[at(0, 100, 7)] = inf;                                         // gamma[7] +/-inf (sign of dy there)
  dy[at(0, 10, 8)] = inf, dy[at(0, 2000, 8)] = ninf;                // inf - inf: beta[8] NaN
  res[at(0, 50, 9)] = inf, dy[at(0, 50, 9)] = from_float<T>(0.0f);  // inf * 0: gamma[9] NaN
  res[at(1, 0, 0)] = nan;                                           // second group is independent
  const auto got = run_kernel<T, float>(res, dy, G, R, H, zoo.pool(), zoo);
  check_against_model(res, dy, G, R, H, got, "nan/inf");
  auto isnan_at = [&](const std::vector<float>& v, int64_t g, int64_t c) { return std::isnan(v[size_t(g * H + c)]); };
  CHECK(isnan_at(got.g, 0, 3) && !isnan_at(got.b, 0, 3));
  CHECK(isnan_at(got.g, 0, 6) && isnan_at(got.b, 0, 6));
  CHECK(std::isinf(got.b[4]) && got.b[4] > 0);
  CHECK(std::isinf(got.g[7]));
  CHECK(isnan_at(got.b, 0, 8) && isnan_at(got.g, 0, 9));
  CHECK(isnan_at(got.g, 1, 0) && !isnan_at(got.g, 1, 1) && !isnan_at(got.g, 0, 0));
  int64_t finite = 0;
  for (int64_t c = 10; c < H; ++c) finite += std::isfinite(got.g[size_t(c)]) && std::isfinite(got.b[size_t(c)]);
  CHECK(finite == H - 10);
}

JAX_LNGB_TEST(grad_beta_nan_and_inf_propagate) {
  std::mt19937_64 gen(3);
  Executors zoo;
  nan_inf_case<float>(gen, zoo);
  nan_inf_case<f16_t>(gen, zoo);
  nan_inf_case<bf16_t>(gen, zoo);
}

JAX_LNGB_TEST(grad_beta_zero_rows_and_empty_problems) {
  Executors zoo;
  const CpuExecutor& ex = zoo.pool();
  // Zero rows: the sums are empty, the outputs zeros (no input is read).
  for (DType out : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<uint32_t> g(6, 0xFFFFFFFFu), b(6, 0xFFFFFFFFu);  // generously sized
    GradBetaProblem p;
    p.in_dtype = DType::kBF16;
    p.out_dtype = out;
    p.pd_gamma = g.data();
    p.pd_beta = b.data();
    p.groups = 2;
    p.rows = 0;
    p.cols = 3;
    CHECK(grad_beta(p, ex) == nullptr);
    const int64_t bytes = 2 * 3 * dtype_size(out);
    const char* gb = reinterpret_cast<const char*>(g.data());
    const char* bb = reinterpret_cast<const char*>(b.data());
    for (int64_t i = 0; i < 24; ++i) {
      CHECK_MSG(gb[i] == (i < bytes ? 0 : char(0xFF)) && bb[i] == (i < bytes ? 0 : char(0xFF)), dtype_name(out)
                                                                                                    << " byte " << i);
    }
  }
  // No groups or no columns: nothing to read or write, null buffers are fine.
  for (int64_t G : {0, 1})
    for (int64_t H : {0, 1}) {
      if (G * H != 0) continue;
      GradBetaProblem p;
      p.groups = G;
      p.rows = 5;
      p.cols = H;
      CHECK(grad_beta(p, ex) == nullptr);
    }
}

JAX_LNGB_TEST(grad_beta_refuses_negative_extents) {
  Executors zoo;
  for (int which = 0; which < 3; ++which) {
    GradBetaProblem p;
    p.groups = which == 0 ? -1 : 1;
    p.rows = which == 1 ? -1 : 1;
    p.cols = which == 2 ? -1 : 1;
    const char* err = grad_beta(p, zoo.pool());
    CHECK_MSG(err != nullptr && std::strlen(err) > 0, "extent " << which);
  }
}

JAX_LNGB_TEST(grad_beta_concurrent_callers) {
  // Several threads run the kernel at once on one pool, each with its own
  // problem size (thread-local workspaces must not be shared).
  ThreadPool pool(3);
  const CpuExecutor ex{pool.spawner(), 4};
  std::vector<std::thread> callers;
  std::vector<int64_t> bad(4, 0);
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      std::mt19937_64 gen(100 + c);
      Executors local;  // unused pools are cheap; keeps run_kernel's signature
      for (int rep = 0; rep < 3; ++rep) {
        const int64_t G = 1 + c, R = 1500 + 700 * c + rep, H = 96 + 33 * c;
        const std::vector<float> res = random_values<float>(gen, G * R * H), dy = random_values<float>(gen, G * R * H);
        const auto got = run_kernel<float, float>(res, dy, G, R, H, ex, local);
        std::vector<float> want_g(static_cast<size_t>(G * H)), want_b(static_cast<size_t>(G * H));
        model_grad_beta(res.data(), dy.data(), G, R, H, want_g.data(), want_b.data());
        for (int64_t i = 0; i < G * H; ++i)
          bad[size_t(c)] +=
              bits(got.g[size_t(i)]) != bits(want_g[size_t(i)]) || bits(got.b[size_t(i)]) != bits(want_b[size_t(i)]);
      }
    });
  for (auto& t : callers) t.join();
  for (int c = 0; c < 4; ++c) CHECK_MSG(bad[size_t(c)] == 0, "caller " << c);
}

// 64-bit indexing without 8.6 GB of memory: anonymous mappings read as
// zeros without being backed, so only the pages written below cost memory.
// Rows past element 2^31 carry values; truncated offsets would miss them.
JAX_LNGB_TEST(grad_beta_more_than_2_pow_31_elements_sparse) {
  const int64_t R = (int64_t(1) << 21) + 3, H = 1024, n = R * H;
  static_assert(sizeof(void*) == 8, "64-bit only");
  const size_t bytes = size_t(n) * sizeof(bf16_t);
  void* res_map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* dy_map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (res_map == MAP_FAILED || dy_map == MAP_FAILED) {
    std::printf("  skipped: cannot map 2 x %zu bytes of address space\n", bytes);
    if (res_map != MAP_FAILED) munmap(res_map, bytes);
    if (dy_map != MAP_FAILED) munmap(dy_map, bytes);
    return;
  }
  bf16_t* res = static_cast<bf16_t*>(res_map);
  bf16_t* dy = static_cast<bf16_t*>(dy_map);
  // Row r, column c gets res = r % 7 + 1, dy = c % 5 + 1 on these rows.
  const int64_t rows[] = {0, 1, (int64_t(1) << 20) + 5, int64_t(1) << 21, R - 2, R - 1};
  std::vector<double> want_g(static_cast<size_t>(H), 0.0), want_b(static_cast<size_t>(H), 0.0);
  for (int64_t r : rows)
    for (int64_t c = 0; c < H; ++c) {
      const float x = float(r % 7 + 1), d = float(c % 5 + 1);
      res[r * H + c] = from_float<bf16_t>(x);
      dy[r * H + c] = from_float<bf16_t>(d);
      want_g[size_t(c)] += double(x) * d;
      want_b[size_t(c)] += d;
    }
  ThreadPool pool(3);
  std::vector<float> g(static_cast<size_t>(H)), b(static_cast<size_t>(H));
  GradBetaProblem p;
  p.in_dtype = DType::kBF16;
  p.out_dtype = DType::kF32;
  p.res_for_gamma = res;
  p.dy = dy;
  p.pd_gamma = g.data();
  p.pd_beta = b.data();
  p.rows = R;
  p.cols = H;
  CHECK(grad_beta(p, CpuExecutor{pool.spawner(), 4}) == nullptr);
  // Small integers: every float32 partial sum is exact.
  for (int64_t c = 0; c < H; ++c)
    CHECK_MSG(double(g[size_t(c)]) == want_g[size_t(c)] && double(b[size_t(c)]) == want_b[size_t(c)],
              "column " << c << ": " << g[size_t(c)] << "/" << b[size_t(c)] << " want " << want_g[size_t(c)] << "/"
                        << want_b[size_t(c)]);
  munmap(res_map, bytes);
  munmap(dy_map, bytes);
}

}  // namespace
}  // namespace jax_lngb::test
