// The RMSNorm kernels (forward, the chained backward's rows, the fused
// backward): every ISA variant of the row kernels gives the generic
// variant's bits, the fused rows' gamma sums are reduce_rows' over the
// float32 res_for_gamma bit for bit, the drivers give the same bits with
// every kind of executor, every output element is written and none beyond
// (exactly sized outputs pre-filled with garbage, for the sanitizer
// builds), and the values agree with float64.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "kernels/base/cpu_features.h"
#include "kernels/reduce_rows.h"
#include "kernels/rms_norm.h"
#include "kernels/rms_norm_rows_table.h"
#include "support.h"

namespace jax_lngb::test {
namespace {

using RowsTable = IsaTable<RmsNormRowsTable>;

std::vector<RowsTable> runnable_row_tables() { return JAX_LNGB_RUNNABLE_TABLES(RmsNormRowsTable, rms_norm_rows_table); }

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_result(a[i], b[i])) return false;
  return true;
}

constexpr float kEps = 1e-6f;

template <typename T>
struct RowResults {
  std::vector<T> y, dx, res, dx2;
  std::vector<float> rstd, acc_g, ref_g;
};

// One table's row kernels on [rows, H]; the fused rows add into
// accumulators that start at 0.5. ref_g: reduce_rows over the float32
// res_for_gamma (x * rstd) and dy widened to float32, from 0.5 too.
template <typename T>
RowResults<T> run_rows(const RmsNormRowsTable& t, const std::vector<T>& x, const std::vector<T>& dy,
                       const std::vector<float>& gamma, int64_t rows, int64_t H, bool stream) {
  const size_t n = size_t(rows * H);
  const T junk = from_float<T>(-777.0f);
  RowResults<T> o;
  o.y.assign(n, junk);
  o.dx.assign(n, junk);
  o.res.assign(n, junk);
  o.dx2.assign(n, junk);
  o.rstd.assign(size_t(rows), -777.0f);
  const int d = int(dtype_of<T>());
  t.forward[d](x.data(), rows, H, gamma.data(), kEps, stream, o.y.data(), o.rstd.data());
  t.grad[d](dy.data(), x.data(), o.rstd.data(), gamma.data(), rows, H, stream, o.dx.data(), o.res.data());
  o.acc_g.assign(size_t(H), 0.5f);
  t.grad_reduce[d](dy.data(), x.data(), o.rstd.data(), gamma.data(), rows, H, stream, o.dx2.data(), o.acc_g.data());
  t.stream_fence();
  std::vector<float> res32(n), dy32(n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < H; ++c) {
      const size_t i = size_t(r * H + c);
      res32[i] = to_float(x[i]) * o.rstd[size_t(r)];
      dy32[i] = to_float(dy[i]);
    }
  o.ref_g.assign(size_t(H), 0.5f);
  std::vector<float> ref_b(size_t(H), 0.0f);
  reduce_rows(res32.data(), dy32.data(), rows, H, H, H, o.ref_g.data(), ref_b.data());
  return o;
}

template <typename T>
void check_rows_type(std::mt19937_64& gen) {
  const std::vector<RowsTable> tables = runnable_row_tables();
  // Around the 16-lane blocks and pairs, the 4-accumulator sums, the
  // 16-row groups of short rows (at most 512 bytes, and under 256 columns
  // for the fused rows), and the fused rows' tiles of four and of two.
  for (int64_t H : {1, 7, 16, 17, 33, 64, 100, 255, 256, 257, 768, 1000, 16384, 16385, 40000}) {
    const int64_t rows = (H <= 256 ? 37 : 5) + H % 3;
    const std::vector<T> x = random_values<T>(gen, rows * H, 2.0f);
    const std::vector<T> dy = random_values<T>(gen, rows * H);
    std::vector<float> gamma(static_cast<size_t>(H));
    std::normal_distribution<float> nd;
    for (auto& g : gamma) g = 1.0f + 0.2f * nd(gen);
    for (bool stream : {false, true}) {
      const RowResults<T> want = run_rows(tables[0].table, x, dy, gamma, rows, H, stream);
      for (const RowsTable& t : tables) {
        const RowResults<T> got = run_rows(t.table, x, dy, gamma, rows, H, stream);
        const std::string what =
            std::string(t.name) + " " + type_name<T>() + " H " + std::to_string(H) + (stream ? " streamed" : "");
        CHECK_MSG(same_bits(got.y, want.y) && same_bits(got.rstd, want.rstd), "forward differs from generic: " << what);
        CHECK_MSG(same_bits(got.dx, want.dx) && same_bits(got.res, want.res),
                  "grad rows differ from generic: " << what);
        CHECK_MSG(same_bits(got.dx2, got.dx), "fused rows' dx differs from the grad rows': " << what);
        CHECK_MSG(same_bits(got.acc_g, got.ref_g), "fused rows' sums differ from reduce_rows: " << what);
        // The stored res_for_gamma is the float32 x * rstd rounded once.
        bool res_ok = true;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < H; ++c)
            res_ok = res_ok && same_result(got.res[r * H + c], from_float<T>(to_float(x[r * H + c]) * got.rstd[r]));
        CHECK_MSG(res_ok, "res_for_gamma is not x * rstd: " << what);
      }
      // Values against float64.
      const double u = unit_roundoff(dtype_of<T>());
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0, s = 0, sa = 0;
        for (int64_t c = 0; c < H; ++c) {
          const double xv = to_float(x[r * H + c]);
          ss += xv * xv;
          s += to_float(dy[r * H + c]) * double(gamma[c]) * xv;
          sa += std::fabs(to_float(dy[r * H + c]) * double(gamma[c]) * xv);
        }
        const double rs = 1.0 / std::sqrt(ss / double(H) + double(kEps));
        CHECK_MSG(std::fabs(want.rstd[r] - rs) <= 1e-5 * rs, "rstd " << type_name<T>() << " H " << H << " row " << r);
        for (int64_t c = 0; c < H; ++c) {
          const double xv = to_float(x[r * H + c]);
          const double y = xv * rs * gamma[c];
          CHECK_MSG(std::fabs(to_float(want.y[r * H + c]) - y) <=
                        2 * u * std::fabs(y) + 1e-5 * std::fabs(y) + 2 * half_min_subnormal(dtype_of<T>()),
                    "y " << type_name<T>() << " H " << H << " at " << r << "," << c);
          const double g = to_float(dy[r * H + c]) * double(gamma[c]);
          const double dx = rs * g - xv * rs * rs * rs * s / double(H);
          const double tol = 2 * u * std::fabs(dx) + 2 * half_min_subnormal(dtype_of<T>()) +
                             1e-5 * (std::fabs(rs * g) + std::fabs(xv) * rs * rs * rs * sa / double(H));
          CHECK_MSG(std::fabs(to_float(want.dx[r * H + c]) - dx) <= tol,
                    "dx " << type_name<T>() << " H " << H << " at " << r << "," << c << ": "
                          << to_float(want.dx[r * H + c]) << " vs " << dx);
        }
      }
    }
  }
}

JAX_LNGB_TEST(rms_norm_rows_every_isa_gives_the_generic_bits) {
  std::mt19937_64 gen(61);
  check_rows_type<float>(gen);
  check_rows_type<f16_t>(gen);
  check_rows_type<bf16_t>(gen);
}

// ---------------------------------------------------------------- drivers

template <typename T>
struct DriverResults {
  std::vector<T> y, dx, res, dx2;
  std::vector<float> rstd, pd_gamma;
};

template <typename T>
DriverResults<T> run_drivers(const std::vector<T>& x, const std::vector<T>& dy, const std::vector<float>& gamma,
                             int64_t G, int64_t R, int64_t H, bool per_group, const CpuExecutor& ex, Executors& zoo) {
  const size_t n = size_t(G * R * H);
  const T junk = from_float<T>(-777.0f);
  DriverResults<T> o;
  o.y.assign(n, junk);
  o.dx.assign(n, junk);
  o.res.assign(n, junk);
  o.dx2.assign(n, junk);
  o.rstd.assign(size_t(G * R), -777.0f);
  o.pd_gamma.assign(size_t(G * H), -777.0f);

  RmsNormForwardProblem f;
  f.dtype = dtype_of<T>();
  f.x = x.data();
  f.gamma = gamma.data();
  f.gamma_stride = per_group ? H : 0;
  f.y = o.y.data();
  f.rstd = o.rstd.data();
  f.groups = G;
  f.rows = R;
  f.cols = H;
  f.epsilon = kEps;
  CHECK(rms_norm_forward(f, ex) == nullptr);
  zoo.flush_deferred();

  RmsNormGradProblem g;
  g.dtype = dtype_of<T>();
  g.dy = dy.data();
  g.x = x.data();
  g.rstd = o.rstd.data();
  g.gamma = gamma.data();
  g.gamma_stride = per_group ? H : 0;
  g.dx = o.dx.data();
  g.res_for_gamma = o.res.data();
  g.groups = G;
  g.rows = R;
  g.cols = H;
  CHECK(rms_norm_grad(g, ex) == nullptr);
  zoo.flush_deferred();

  RmsNormBackwardProblem b;
  b.dtype = dtype_of<T>();
  b.out_dtype = DType::kF32;
  b.dy = dy.data();
  b.x = x.data();
  b.rstd = o.rstd.data();
  b.gamma = gamma.data();
  b.gamma_stride = per_group ? H : 0;
  b.dx = o.dx2.data();
  b.pd_gamma = o.pd_gamma.data();
  b.groups = G;
  b.rows = R;
  b.cols = H;
  CHECK(rms_norm_backward(b, ex) == nullptr);
  zoo.flush_deferred();
  return o;
}

template <typename T>
void check_drivers_type(std::mt19937_64& gen, Executors& zoo) {
  struct Shape {
    int64_t G, R, H;
  };
  // Several row blocks, groups, a width with a tail, single rows, no rows,
  // and long rows (tiles of four cut short by the block end, tiles of two).
  for (const Shape s : {Shape{1, 3000, 40}, Shape{3, 700, 33}, Shape{1, 1, 5}, Shape{4, 1, 64}, Shape{2, 0, 8},
                        Shape{1, 9, 1}, Shape{1, 50, 2000}, Shape{2, 23, 4500}, Shape{1, 7, 40000}}) {
    const int64_t n = s.G * s.R * s.H;
    const std::vector<T> x = random_values<T>(gen, n, 1.5f);
    const std::vector<T> dy = random_values<T>(gen, n);
    for (bool per_group : {false, true}) {
      std::vector<float> gamma(size_t((per_group ? s.G : 1) * s.H));
      std::normal_distribution<float> nd;
      for (auto& v : gamma) v = 1.0f + 0.2f * nd(gen);
      const DriverResults<T> want = run_drivers(x, dy, gamma, s.G, s.R, s.H, per_group, zoo.all()[0].ex, zoo);
      const std::string shape = std::string(type_name<T>()) + " [" + std::to_string(s.G) + ", " + std::to_string(s.R) +
                                ", " + std::to_string(s.H) + "]" + (per_group ? " per-group gamma" : "");
      for (const NamedExecutor& e : zoo.all()) {
        const DriverResults<T> got = run_drivers(x, dy, gamma, s.G, s.R, s.H, per_group, e.ex, zoo);
        CHECK_MSG(same_bits(got.y, want.y) && same_bits(got.rstd, want.rstd) && same_bits(got.dx, want.dx) &&
                      same_bits(got.res, want.res) && same_bits(got.dx2, want.dx2) &&
                      same_bits(got.pd_gamma, want.pd_gamma),
                  e.name << " changes bits: " << shape);
      }
      CHECK_MSG(same_bits(want.dx2, want.dx), "fused dx != chained dx: " << shape);
      // pd_gamma: the float32 sums of (x * rstd) * dy per group.
      for (int64_t g = 0; g < s.G; ++g)
        for (int64_t c = 0; c < s.H; ++c) {
          double sg = 0, ag = 0;
          for (int64_t r = 0; r < s.R; ++r) {
            const int64_t row = g * s.R + r, i = row * s.H + c;
            const double p = to_float(x[i]) * double(want.rstd[row]) * to_float(dy[i]);
            sg += p;
            ag += std::fabs(p) * (1 + 2 * std::ldexp(1.0, -24));
          }
          CHECK_MSG(std::fabs(want.pd_gamma[g * s.H + c] - sg) <= sum_error_bound(sg, ag, s.R + 2, DType::kF32),
                    "pd_gamma " << shape << " at " << g << "," << c);
        }
    }
  }
}

JAX_LNGB_TEST(rms_norm_drivers_same_bits_with_every_executor) {
  std::mt19937_64 gen(62);
  Executors zoo;
  check_drivers_type<float>(gen, zoo);
  check_drivers_type<f16_t>(gen, zoo);
  check_drivers_type<bf16_t>(gen, zoo);
}

// Narrowed outputs: the fused backward's 16-bit pd_gamma is its float32
// sum rounded once; non-finite rows stay in their rows.
JAX_LNGB_TEST(rms_norm_backward_narrows_once_and_isolates_nonfinite_rows) {
  std::mt19937_64 gen(63);
  Executors zoo;
  const int64_t R = 300, H = 48;
  std::vector<float> x = random_values<float>(gen, R * H), dy = random_values<float>(gen, R * H);
  x[5 * H + 3] = std::numeric_limits<float>::infinity();  // row 5: rstd 0, y NaN at col 3
  std::vector<float> gamma(size_t(H), 1.25f), y(static_cast<size_t>(R * H)), rstd(static_cast<size_t>(R));
  RmsNormForwardProblem f;
  f.x = x.data();
  f.gamma = gamma.data();
  f.y = y.data();
  f.rstd = rstd.data();
  f.rows = R;
  f.cols = H;
  CHECK(rms_norm_forward(f, zoo.pool()) == nullptr);
  CHECK(rstd[5] == 0.0f);
  CHECK(std::isnan(y[5 * H + 3]));
  for (int64_t r = 0; r < R; ++r)
    if (r != 5)
      for (int64_t c = 0; c < H; ++c) CHECK(std::isfinite(y[r * H + c]));
  std::vector<float> dx(static_cast<size_t>(R * H)), g32(static_cast<size_t>(H));
  std::vector<bf16_t> g16(static_cast<size_t>(H));
  RmsNormBackwardProblem b;
  b.dy = dy.data();
  b.x = x.data();
  b.rstd = rstd.data();
  b.gamma = gamma.data();
  b.dx = dx.data();
  b.pd_gamma = g32.data();
  b.rows = R;
  b.cols = H;
  CHECK(rms_norm_backward(b, zoo.pool()) == nullptr);
  b.out_dtype = DType::kBF16;
  b.pd_gamma = g16.data();
  CHECK(rms_norm_backward(b, zoo.pool()) == nullptr);
  for (int64_t c = 0; c < H; ++c) CHECK(same_result(g16[c], from_float<bf16_t>(g32[c])));
  CHECK(std::isnan(g32[3]));  // inf * 0 in row 5
  for (int64_t c = 0; c < H; ++c)
    if (c != 3) CHECK(std::isfinite(g32[c]));
  for (int64_t r = 0; r < R; ++r)
    if (r != 5)
      for (int64_t c = 0; c < H; ++c) CHECK(std::isfinite(dx[r * H + c]));
}

JAX_LNGB_TEST(rms_norm_drivers_refuse_bad_problems) {
  Executors zoo;
  RmsNormForwardProblem f;
  f.rows = -1;
  CHECK(rms_norm_forward(f, zoo.pool()) != nullptr);
  RmsNormGradProblem g;
  g.rows = 4;
  g.cols = 8;
  g.gamma_stride = 3;
  CHECK(rms_norm_grad(g, zoo.pool()) != nullptr);
  RmsNormBackwardProblem b;
  b.rows = 4;
  b.cols = 8;
  b.out_dtype = static_cast<DType>(7);
  CHECK(rms_norm_backward(b, zoo.pool()) != nullptr);
}

}  // namespace
}  // namespace jax_lngb::test
