// The LayerNorm kernels (forward, LayerNormGrad, fused backward): every ISA
// variant of the row kernels gives the generic variant's bits, the drivers
// give the same bits with every kind of executor, every output element is
// written and none beyond (outputs are exactly sized and pre-filled with
// garbage, for the sanitizer builds), and the values agree with float64.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "kernels/base/cpu_features.h"
#include "kernels/layer_norm.h"
#include "kernels/layer_norm_rows_table.h"
#include "kernels/reduce_rows.h"
#include "support.h"

namespace jax_lngb::test {
namespace {

using RowsTable = IsaTable<LayerNormRowsTable>;

std::vector<RowsTable> runnable_row_tables() {
  return JAX_LNGB_RUNNABLE_TABLES(LayerNormRowsTable, layer_norm_rows_table);
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_result(a[i], b[i])) return false;
  return true;
}

// float64 mean and biased variance of each row.
template <typename T>
void float64_stats(const std::vector<T>& x, int64_t rows, int64_t H, std::vector<double>& mean,
                   std::vector<double>& var) {
  mean.assign(size_t(rows), 0.0);
  var.assign(size_t(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < H; ++c) s += to_float(x[r * H + c]);
    const double m = s / double(H);
    double q = 0;
    for (int64_t c = 0; c < H; ++c) q += (to_float(x[r * H + c]) - m) * (to_float(x[r * H + c]) - m);
    mean[r] = m;
    var[r] = q / double(H);
  }
}

// Row kernels of one table on [rows, H] inputs: forward (y, mean, variance),
// LayerNormGrad, and the fused backward's rows (pd_x and the gamma/beta
// sums, added into accumulators that start at 0.5). Their reference sums:
// reduce_rows over res_for_gamma in float32, as the kernels compute it
// ((x - mean) * (1 / sqrt(variance + epsilon)), float32 operations), and dy.
template <typename T>
struct RowResults {
  std::vector<T> y, pd_x, res, pd_x2;
  std::vector<float> mean, var, res32, acc_g, acc_b, ref_g, ref_b;
};

template <typename T>
RowResults<T> run_rows(const LayerNormRowsTable& t, const std::vector<T>& x, const std::vector<T>& dy,
                       const std::vector<float>& gamma, const std::vector<float>& beta, int64_t rows, int64_t H,
                       bool stream) {
  const size_t n = size_t(rows * H);
  const float eps = 1e-5f;
  RowResults<T> o;
  const T junk = from_float<T>(-777.0f);
  o.y.assign(n, junk);
  o.pd_x.assign(n, junk);
  o.res.assign(n, junk);
  o.pd_x2.assign(n, junk);
  o.mean.assign(size_t(rows), -777.0f);
  o.var.assign(size_t(rows), -777.0f);
  const int d = int(dtype_of<T>());
  t.forward[d](x.data(), rows, H, gamma.data(), beta.data(), eps, stream, o.y.data(), o.mean.data(), o.var.data());
  t.grad[d](dy.data(), x.data(), o.var.data(), o.mean.data(), gamma.data(), rows, H, eps, stream, o.pd_x.data(),
            o.res.data());
  o.acc_g.assign(size_t(H), 0.5f);
  o.acc_b.assign(size_t(H), 0.5f);
  t.grad_reduce[d](dy.data(), x.data(), o.var.data(), o.mean.data(), gamma.data(), rows, H, eps, stream, o.pd_x2.data(),
                   o.acc_g.data(), o.acc_b.data());
  t.stream_fence();
  o.res32.resize(n);
  for (int64_t r = 0; r < rows; ++r) {
    const float rstd = 1.0f / std::sqrt(o.var[size_t(r)] + eps);
    for (int64_t c = 0; c < H; ++c) {
      const size_t i = size_t(r * H + c);
      o.res32[i] = (to_float(x[i]) - o.mean[size_t(r)]) * rstd;
    }
  }
  o.ref_g.assign(size_t(H), 0.5f);
  o.ref_b.assign(size_t(H), 0.5f);
  // dy widened to float32 (exact): the sums of float32 res and dy.
  std::vector<float> dy32(n);
  for (size_t i = 0; i < n; ++i) dy32[i] = to_float(dy[i]);
  reduce_rows(o.res32.data(), dy32.data(), rows, H, H, H, o.ref_g.data(), o.ref_b.data());
  return o;
}

template <typename T>
void check_rows_type(std::mt19937_64& gen) {
  const std::vector<RowsTable> tables = runnable_row_tables();
  // Widths around the 16-lane blocks, the pairs of blocks, the 4-accumulator
  // sums and the thresholds of the row scratches (LayerNormGrad's one row
  // from 256 to 32768 columns, the fused rows' four from 256 to 16384).
  for (int64_t H :
       {1, 2, 7, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 255, 256, 257, 768, 1000, 16384, 16385, 32769}) {
    // 5 to 7 rows: a whole tile of the fused rows and a last one of 1 to 3;
    // rows of at most 256 columns 37 to 39: the short-row kernels add their
    // rows' lanes 16 rows at a time, so two whole groups and a partial one.
    const int64_t rows = (H <= 256 ? 37 : 5) + H % 3;
    std::vector<T> x = random_values<T>(gen, rows * H, 2.0f);
    for (auto& v : x) v = from_float<T>(to_float(v) + 0.75f);
    const std::vector<T> dy = random_values<T>(gen, rows * H);
    std::vector<float> gamma(static_cast<size_t>(H)), beta(static_cast<size_t>(H));
    std::normal_distribution<float> nd;
    for (int64_t c = 0; c < H; ++c) {
      gamma[c] = 1.0f + 0.2f * nd(gen);
      beta[c] = 0.1f * nd(gen);
    }
    for (bool stream : {false, true}) {
      const RowResults<T> want = run_rows(tables[0].table, x, dy, gamma, beta, rows, H, stream);
      for (const RowsTable& t : tables) {
        const RowResults<T> got = run_rows(t.table, x, dy, gamma, beta, rows, H, stream);
        const std::string what =
            std::string(t.name) + " " + type_name<T>() + " H " + std::to_string(H) + (stream ? " streamed" : "");
        CHECK_MSG(same_bits(got.y, want.y) && same_bits(got.mean, want.mean) && same_bits(got.var, want.var),
                  "forward differs from generic: " << what);
        CHECK_MSG(same_bits(got.pd_x, want.pd_x) && same_bits(got.res, want.res),
                  "LayerNormGrad differs from generic: " << what);
        // The scalar float32 res_for_gamma is the kernels' own: rounded to
        // T it is LayerNormGrad's output.
        std::vector<T> res_t(got.res32.size());
        for (size_t i = 0; i < res_t.size(); ++i) res_t[i] = from_float<T>(got.res32[i]);
        CHECK_MSG(same_bits(res_t, got.res), "float32 res_for_gamma reference differs: " << what);
        CHECK_MSG(same_bits(got.pd_x2, got.pd_x), "fused rows' pd_x differs from LayerNormGrad's: " << what);
        CHECK_MSG(same_bits(got.acc_g, got.ref_g) && same_bits(got.acc_b, got.ref_b),
                  "fused rows' sums differ from reduce_rows over float32 res_for_gamma: " << what);
      }
      // Values: float32 statistics and outputs against float64.
      std::vector<double> m64, v64;
      float64_stats(x, rows, H, m64, v64);
      const double u = unit_roundoff(dtype_of<T>());
      for (int64_t r = 0; r < rows; ++r) {
        CHECK_MSG(std::fabs(want.mean[r] - m64[r]) <= 1e-5 * (std::fabs(m64[r]) + 3.0),
                  "mean " << type_name<T>() << " H " << H << ": " << want.mean[r] << " vs " << m64[r]);
        CHECK_MSG(std::fabs(want.var[r] - v64[r]) <= 1e-5 * v64[r] + 1e-6,
                  "variance " << type_name<T>() << " H " << H << ": " << want.var[r] << " vs " << v64[r]);
        const double rs = 1.0 / std::sqrt(v64[r] + 1e-5);
        for (int64_t c = 0; c < H; ++c) {
          const double xhat = (to_float(x[r * H + c]) - m64[r]) * rs;
          const double y = xhat * gamma[c] + beta[c];
          CHECK_MSG(std::fabs(to_float(want.y[r * H + c]) - y) <= 2 * u * std::fabs(y) + 1e-4 * (std::fabs(xhat) + 1),
                    "y " << type_name<T>() << " H " << H << " at " << r << "," << c);
          CHECK_MSG(std::fabs(want.res32[r * H + c] - xhat) <= 1e-4 * (std::fabs(xhat) + 1),
                    "res_for_gamma " << type_name<T>() << " H " << H << " at " << r << "," << c);
        }
      }
    }
  }
}

JAX_LNGB_TEST(layer_norm_rows_every_isa_gives_the_generic_bits) {
  std::mt19937_64 gen(41);
  check_rows_type<float>(gen);
  check_rows_type<f16_t>(gen);
  check_rows_type<bf16_t>(gen);
}

// ---------------------------------------------------------------- drivers

template <typename T>
struct DriverResults {
  std::vector<T> y, pd_x, res, dx;
  std::vector<float> mean, var, pd_gamma, pd_beta;
};

template <typename T>
DriverResults<T> run_drivers(const std::vector<T>& x, const std::vector<T>& dy, const std::vector<float>& gamma,
                             const std::vector<float>& beta, int64_t G, int64_t R, int64_t H, bool per_group,
                             const CpuExecutor& ex, Executors& zoo) {
  const size_t n = size_t(G * R * H);
  const T junk = from_float<T>(-777.0f);
  DriverResults<T> o;
  o.y.assign(n, junk);
  o.pd_x.assign(n, junk);
  o.res.assign(n, junk);
  o.dx.assign(n, junk);
  o.mean.assign(size_t(G * R), -777.0f);
  o.var.assign(size_t(G * R), -777.0f);
  o.pd_gamma.assign(size_t(G * H), -777.0f);
  o.pd_beta.assign(size_t(G * H), -777.0f);

  LayerNormForwardProblem f;
  f.dtype = dtype_of<T>();
  f.x = x.data();
  f.gamma = gamma.data();
  f.beta = beta.data();
  f.gamma_stride = f.beta_stride = per_group ? H : 0;
  f.y = o.y.data();
  f.mean = o.mean.data();
  f.variance = o.var.data();
  f.groups = G;
  f.rows = R;
  f.cols = H;
  CHECK(layer_norm_forward(f, ex) == nullptr);
  zoo.flush_deferred();

  LayerNormGradProblem g;
  g.dtype = dtype_of<T>();
  g.dy = dy.data();
  g.x = x.data();
  g.variance = o.var.data();
  g.mean = o.mean.data();
  g.gamma = gamma.data();
  g.gamma_stride = per_group ? H : 0;
  g.pd_x = o.pd_x.data();
  g.res_for_gamma = o.res.data();
  g.groups = G;
  g.rows = R;
  g.cols = H;
  CHECK(layer_norm_grad(g, ex) == nullptr);
  zoo.flush_deferred();

  LayerNormBackwardProblem b;
  b.dtype = dtype_of<T>();
  b.out_dtype = DType::kF32;
  b.dy = dy.data();
  b.x = x.data();
  b.variance = o.var.data();
  b.mean = o.mean.data();
  b.gamma = gamma.data();
  b.gamma_stride = per_group ? H : 0;
  b.dx = o.dx.data();
  b.pd_gamma = o.pd_gamma.data();
  b.pd_beta = o.pd_beta.data();
  b.groups = G;
  b.rows = R;
  b.cols = H;
  CHECK(layer_norm_backward(b, ex) == nullptr);
  zoo.flush_deferred();
  return o;
}

template <typename T>
void check_drivers_type(std::mt19937_64& gen, Executors& zoo) {
  struct Shape {
    int64_t G, R, H;
  };
  // Several row blocks, groups, a width with a tail, rows of one, nothing
  // at all, and long rows (the fused backward's tiles of four rows cut short
  // by the block end, with and without the tile scratch).
  for (const Shape s :
       {Shape{1, 3000, 40}, Shape{3, 700, 33}, Shape{1, 1, 5}, Shape{4, 1, 64}, Shape{2, 0, 8}, Shape{1, 9, 1},
        Shape{1, 50, 2000}, Shape{2, 23, 4500}, Shape{1, 6, 2049}, Shape{1, 7, 9000}, Shape{1, 5, 16400}}) {
    const int64_t n = s.G * s.R * s.H;
    const std::vector<T> x = random_values<T>(gen, n, 1.5f);
    const std::vector<T> dy = random_values<T>(gen, n);
    for (bool per_group : {false, true}) {
      std::vector<float> gamma(size_t((per_group ? s.G : 1) * s.H)), beta(gamma.size());
      std::normal_distribution<float> nd;
      for (size_t i = 0; i < gamma.size(); ++i) {
        gamma[i] = 1.0f + 0.2f * nd(gen);
        beta[i] = 0.1f * nd(gen);
      }
      const DriverResults<T> want = run_drivers(x, dy, gamma, beta, s.G, s.R, s.H, per_group, zoo.all()[0].ex, zoo);
      const std::string shape = std::string(type_name<T>()) + " [" + std::to_string(s.G) + ", " + std::to_string(s.R) +
                                ", " + std::to_string(s.H) + "]" + (per_group ? " per-group gamma" : "");
      for (const NamedExecutor& e : zoo.all()) {
        const DriverResults<T> got = run_drivers(x, dy, gamma, beta, s.G, s.R, s.H, per_group, e.ex, zoo);
        CHECK_MSG(same_bits(got.y, want.y) && same_bits(got.mean, want.mean) && same_bits(got.var, want.var) &&
                      same_bits(got.pd_x, want.pd_x) && same_bits(got.res, want.res) && same_bits(got.dx, want.dx) &&
                      same_bits(got.pd_gamma, want.pd_gamma) && same_bits(got.pd_beta, want.pd_beta),
                  e.name << " changes bits: " << shape);
      }
      // The fused backward's dx is LayerNormGrad's pd_x; its sums are the
      // float32 sums of res_for_gamma * dy and dy per group.
      CHECK_MSG(same_bits(want.dx, want.pd_x), "fused dx != LayerNormGrad pd_x: " << shape);
      for (int64_t g = 0; g < s.G; ++g) {
        for (int64_t c = 0; c < s.H; ++c) {
          double sg = 0, sb = 0, ag = 0, ab = 0;
          for (int64_t r = 0; r < s.R; ++r) {
            const int64_t row = g * s.R + r, i = row * s.H + c;
            const double m = want.mean[row], rs = 1.0 / std::sqrt(double(want.var[row]) + 1e-5);
            const double res = (to_float(x[i]) - m) * rs, d = to_float(dy[i]);
            sg += res * d;
            sb += d;
            ag += std::fabs(res * d) +
                  8 * std::ldexp(1.0, -24) * (std::fabs(to_float(x[i])) + std::fabs(m)) * rs * std::fabs(d);
            ab += std::fabs(d);
          }
          CHECK_MSG(std::fabs(want.pd_gamma[g * s.H + c] - sg) <= sum_error_bound(sg, ag, s.R + 8, DType::kF32),
                    "pd_gamma " << shape << " at " << g << "," << c);
          CHECK_MSG(std::fabs(want.pd_beta[g * s.H + c] - sb) <= sum_error_bound(sb, ab, s.R, DType::kF32),
                    "pd_beta " << shape << " at " << g << "," << c);
        }
      }
    }
  }
}

JAX_LNGB_TEST(layer_norm_drivers_same_bits_with_every_executor) {
  std::mt19937_64 gen(42);
  Executors zoo;
  check_drivers_type<float>(gen, zoo);
  check_drivers_type<f16_t>(gen, zoo);
  check_drivers_type<bf16_t>(gen, zoo);
}

// A LayerNorm without beta (beta == nullptr, pd_beta == nullptr): y has the
// values of a zero bias (a -0 product may come out as +0 there), dx and
// pd_gamma the bits of the run with a beta, whatever the executor; the
// kernels never touch a bias nor a pd_beta (none exists here, and the
// sanitizer builds would see a stray access).
template <typename T>
void check_no_beta_type(std::mt19937_64& gen, Executors& zoo) {
  struct Shape {
    int64_t G, R, H;
  };
  for (const Shape s : {Shape{1, 3000, 40}, Shape{3, 70, 33}, Shape{1, 1, 5}, Shape{2, 0, 8}, Shape{1, 50, 2000},
                        Shape{1, 7, 9000}, Shape{1, 5, 16400}}) {
    const int64_t n = s.G * s.R * s.H;
    const std::vector<T> x = random_values<T>(gen, n, 1.5f);
    const std::vector<T> dy = random_values<T>(gen, n);
    std::vector<float> gamma(size_t(s.G * s.H)), zero(gamma.size(), 0.0f);
    std::normal_distribution<float> nd;
    for (float& g : gamma) g = 1.0f + 0.2f * nd(gen);
    const DriverResults<T> want = run_drivers(x, dy, gamma, zero, s.G, s.R, s.H, true, zoo.all()[0].ex, zoo);
    const std::string shape = std::string(type_name<T>()) + " [" + std::to_string(s.G) + ", " + std::to_string(s.R) +
                              ", " + std::to_string(s.H) + "]";
    for (const NamedExecutor& e : zoo.all()) {
      const T junk = from_float<T>(-777.0f);
      std::vector<T> y(size_t(n), junk), dx(size_t(n), junk);
      std::vector<float> mean(size_t(s.G * s.R), -777.0f), var(mean.size(), -777.0f);
      std::vector<float> pd_gamma(size_t(s.G * s.H), -777.0f);
      LayerNormForwardProblem f;
      f.dtype = dtype_of<T>();
      f.x = x.data();
      f.gamma = gamma.data();
      f.beta = nullptr;
      f.gamma_stride = s.H;
      f.beta_stride = s.H;  // ignored without a beta
      f.y = y.data();
      f.mean = mean.data();
      f.variance = var.data();
      f.groups = s.G;
      f.rows = s.R;
      f.cols = s.H;
      CHECK(layer_norm_forward(f, e.ex) == nullptr);
      zoo.flush_deferred();
      LayerNormBackwardProblem b;
      b.dtype = dtype_of<T>();
      b.out_dtype = DType::kF32;
      b.dy = dy.data();
      b.x = x.data();
      b.variance = var.data();
      b.mean = mean.data();
      b.gamma = gamma.data();
      b.gamma_stride = s.H;
      b.dx = dx.data();
      b.pd_gamma = pd_gamma.data();
      b.pd_beta = nullptr;
      b.groups = s.G;
      b.rows = s.R;
      b.cols = s.H;
      CHECK(layer_norm_backward(b, e.ex) == nullptr);
      zoo.flush_deferred();
      bool same_y = true;
      for (int64_t i = 0; i < n; ++i) same_y = same_y && to_float(y[size_t(i)]) == to_float(want.y[size_t(i)]);
      CHECK_MSG(same_y, e.name << " no-beta y differs from a zero bias: " << shape);
      CHECK_MSG(same_bits(mean, want.mean) && same_bits(var, want.var), e.name << " no-beta statistics: " << shape);
      CHECK_MSG(same_bits(dx, want.dx) && same_bits(pd_gamma, want.pd_gamma),
                e.name << " no-beta dx/pd_gamma differ from the run with a beta: " << shape);
    }
  }
}

JAX_LNGB_TEST(layer_norm_without_beta) {
  std::mt19937_64 gen(7);
  Executors zoo;
  check_no_beta_type<float>(gen, zoo);
  check_no_beta_type<f16_t>(gen, zoo);
  check_no_beta_type<bf16_t>(gen, zoo);
}

JAX_LNGB_TEST(layer_norm_drivers_refuse_bad_problems) {
  Executors zoo;
  LayerNormForwardProblem f;
  f.rows = -1;
  CHECK(layer_norm_forward(f, zoo.pool()) != nullptr);
  LayerNormBackwardProblem b;
  b.groups = 1;
  b.rows = 4;
  b.cols = 8;
  b.gamma_stride = 3;  // neither shared nor one row per group
  CHECK(layer_norm_backward(b, zoo.pool()) != nullptr);
  LayerNormGradProblem g;
  g.cols = -2;
  CHECK(layer_norm_grad(g, zoo.pool()) != nullptr);
}

}  // namespace
}  // namespace jax_lngb::test
