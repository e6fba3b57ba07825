// The residual add + norm kernels (add_norm.h): forward and fused backward
// agree with float64 (h exactly x + residual rounded once to residual's
// dtype, y the norm of that h), every executor gives the same bits (the
// parameter sums depend on the shape alone), every ISA variant of the row
// kernels gives the generic variant's bits, y and the statistics are
// layer_norm's / rms_norm's bits for the stored h, a norm without beta
// reads and writes no bias, and every output element is written (outputs
// pre-filled with garbage, for the sanitizer builds).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "harness.h"
#include "kernels/add_norm.h"
#include "kernels/add_norm_rows_table.h"
#include "kernels/base/cpu_features.h"
#include "kernels/layer_norm.h"
#include "kernels/rms_norm.h"
#include "support.h"

namespace jax_lngb::test {
namespace {

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_result(a[i], b[i])) return false;
  return true;
}

template <typename T>
std::vector<T> garbage(size_t n) {
  std::vector<T> v(n);
  for (auto& x : v) x = from_float<T>(-12345.0f);
  return v;
}

template <typename X, typename R>
struct Outputs {
  std::vector<X> y;
  std::vector<R> h, d_sum;
  std::vector<float> s0, s1, pd_gamma, pd_beta;
};

struct Shape {
  int64_t G, Rw, H;
};

// Runs forward then backward on random data for one configuration.
template <typename X, typename R>
Outputs<X, R> run(AddNormKind kind, bool has_beta, bool zc, const Shape& s, const std::vector<X>& x,
                  const std::vector<R>& r, const std::vector<float>& gamma, const std::vector<float>& beta,
                  const std::vector<X>& dy, const std::vector<R>& dh, const CpuExecutor& ex) {
  const int64_t N = s.G * s.Rw, n = N * s.H;
  Outputs<X, R> o;
  o.y = garbage<X>(n);
  o.h = garbage<R>(n);
  o.s0.assign(N, -7.0f);
  o.s1.assign(N, -7.0f);
  AddNormForwardProblem f;
  f.kind = kind;
  f.x_dtype = dtype_of<X>();
  f.r_dtype = dtype_of<R>();
  f.x = x.data();
  f.residual = r.data();
  f.gamma = gamma.data();
  f.beta = has_beta ? beta.data() : nullptr;
  f.param_stride = s.G > 1 ? s.H : 0;
  f.zero_centered = zc;
  f.y = o.y.data();
  f.h = o.h.data();
  const bool layer = kind == AddNormKind::kLayer;
  f.mean = layer ? o.s0.data() : nullptr;
  f.variance = layer ? o.s1.data() : nullptr;
  f.rstd = layer ? nullptr : o.s0.data();
  f.groups = s.G;
  f.rows = s.Rw;
  f.cols = s.H;
  f.epsilon = 1e-5f;
  CHECK(add_norm_forward(f, ex) == nullptr);

  o.d_sum = garbage<R>(n);
  o.pd_gamma.assign(s.G * s.H, -7.0f);
  o.pd_beta.assign(s.G * s.H, -7.0f);
  AddNormBackwardProblem b;
  b.kind = kind;
  b.dy_dtype = dtype_of<X>();
  b.h_dtype = dtype_of<R>();
  b.out_dtype = DType::kF32;
  b.dy = dy.data();
  b.dh = dh.data();
  b.h = o.h.data();
  b.mean = f.mean;
  b.variance = f.variance;
  b.rstd = f.rstd;
  b.gamma = gamma.data();
  b.gamma_stride = f.param_stride;
  b.zero_centered = zc;
  b.d_sum = o.d_sum.data();
  b.pd_gamma = o.pd_gamma.data();
  b.pd_beta = has_beta ? o.pd_beta.data() : nullptr;
  b.groups = s.G;
  b.rows = s.Rw;
  b.cols = s.H;
  b.epsilon = 1e-5f;
  CHECK(add_norm_backward(b, ex) == nullptr);
  return o;
}

template <typename X, typename R>
void check_case(std::mt19937_64& gen, Executors& zoo, AddNormKind kind, bool has_beta, bool zc, const Shape& s) {
  const int64_t N = s.G * s.Rw, n = N * s.H;
  const auto x = random_values<X>(gen, n, 1.0f);
  const auto r = random_values<R>(gen, n, 2.0f);
  const auto dy = random_values<X>(gen, n, 1.0f);
  const auto dh = random_values<R>(gen, n, 1.0f);
  const auto gamma = random_values<float>(gen, s.G * s.H, zc ? 0.1f : 1.0f);
  const auto beta = random_values<float>(gen, s.G * s.H, 1.0f);
  const bool layer = kind == AddNormKind::kLayer;
  const auto base = run<X, R>(kind, has_beta, zc, s, x, r, gamma, beta, dy, dh, zoo.all()[0].ex);

  // float64 reference, per row from the h the kernel stored.
  double err_y = 0, err_d = 0, err_g = 0, err_b = 0, scale_g = 1, scale_b = 1;
  bool h_ok = true;
  std::vector<double> pg(s.G * s.H, 0.0), pb(s.G * s.H, 0.0);
  for (int64_t row = 0; row < N; ++row) {
    const int64_t g = row / s.Rw;
    const float* gm = gamma.data() + (s.G > 1 ? g * s.H : 0);
    const float* bt = beta.data() + (s.G > 1 ? g * s.H : 0);
    std::vector<double> hv(s.H);
    for (int64_t c = 0; c < s.H; ++c) {
      const int64_t i = row * s.H + c;
      const R want = from_float<R>(to_float(x[i]) + to_float(r[i]));
      h_ok = h_ok && same_result(want, base.h[i]);
      hv[c] = to_float(base.h[i]);
    }
    double mean = 0, ms = 0;
    for (double v : hv) mean += v;
    mean = layer ? mean / s.H : 0.0;
    for (double v : hv) ms += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt(ms / s.H + 1e-5);
    if (layer) {
      CHECK(std::fabs(base.s0[row] - mean) <= 1e-5 * (1 + std::fabs(mean)));
      CHECK(std::fabs(1.0 / std::sqrt(base.s1[row] + 1e-5) - rstd) <= 1e-4 * rstd);
    } else {
      CHECK(std::fabs(base.s0[row] - rstd) <= 1e-5 * rstd);
    }
    double sg = 0, sgx = 0;
    std::vector<double> xh(s.H), gd(s.H);
    for (int64_t c = 0; c < s.H; ++c) {
      const int64_t i = row * s.H + c;
      xh[c] = (hv[c] - mean) * rstd;
      const double sc = double(gm[c]) + (zc ? 1.0 : 0.0);
      const double yv = xh[c] * sc + (has_beta ? double(bt[c]) : 0.0);
      err_y = std::max(err_y, std::fabs(to_float(base.y[i]) - yv) / (1 + std::fabs(yv)));
      gd[c] = to_float(dy[i]) * sc;
      sg += gd[c];
      sgx += gd[c] * xh[c];
      pg[g * s.H + c] += xh[c] * to_float(dy[i]);
      pb[g * s.H + c] += to_float(dy[i]);
    }
    for (int64_t c = 0; c < s.H; ++c) {
      const int64_t i = row * s.H + c;
      double dx = rstd * (gd[c] - xh[c] * sgx / s.H - (layer ? sg / s.H : 0.0));
      dx += to_float(dh[i]);
      err_d = std::max(err_d, std::fabs(to_float(base.d_sum[i]) - dx) / (1 + std::fabs(dx)));
    }
  }
  for (int64_t i = 0; i < s.G * s.H; ++i) {
    err_g = std::max(err_g, std::fabs(base.pd_gamma[i] - pg[i]));
    scale_g = std::max(scale_g, std::fabs(pg[i]));
    err_b = std::max(err_b, std::fabs(base.pd_beta[i] - pb[i]));
    scale_b = std::max(scale_b, std::fabs(pb[i]));
  }
  const double tol_x = 8 * std::max(unit_roundoff(dtype_of<X>()), 1e-6);
  const double tol_r = 8 * std::max(unit_roundoff(dtype_of<R>()), 1e-6) + 1e-4;
  CHECK_MSG(h_ok, "h is not x + residual rounded once");
  CHECK_MSG(err_y <= tol_x + 1e-4, "y error " << err_y);
  CHECK_MSG(err_d <= tol_r + tol_x, "d_sum error " << err_d);
  CHECK_MSG(err_g <= 1e-4 * scale_g * std::sqrt(double(s.Rw)), "pd_gamma error " << err_g);
  if (has_beta) {
    CHECK_MSG(err_b <= 1e-5 * scale_b * std::sqrt(double(s.Rw)), "pd_beta error " << err_b);
  } else {
    // No bias: the pd_beta buffer was not handed over, so nothing in it changed.
    CHECK(std::all_of(base.pd_beta.begin(), base.pd_beta.end(), [](float v) { return v == -7.0f; }));
  }
  if (!layer) CHECK(std::all_of(base.s1.begin(), base.s1.end(), [](float v) { return v == -7.0f; }));

  // The same bits from every executor (threads decide who, never what).
  for (const auto& e : zoo.all()) {
    const auto o = run<X, R>(kind, has_beta, zc, s, x, r, gamma, beta, dy, dh, e.ex);
    CHECK_MSG(same_bits(o.y, base.y) && same_bits(o.h, base.h) && same_bits(o.d_sum, base.d_sum) &&
                  same_bits(o.s0, base.s0) && same_bits(o.pd_gamma, base.pd_gamma) &&
                  same_bits(o.pd_beta, base.pd_beta),
              "executor " << e.name << " changed a bit");
  }
}

template <typename X, typename R>
void check_types(std::mt19937_64& gen, Executors& zoo) {
  // 1500 rows of 256 columns: several row blocks (3 to 6), so the block-order
  // combination of the partials is exercised.
  const Shape shapes[] = {{1, 5, 7}, {1, 1500, 256}, {3, 40, 130}};
  for (const auto& s : shapes) {
    check_case<X, R>(gen, zoo, AddNormKind::kLayer, true, false, s);
    check_case<X, R>(gen, zoo, AddNormKind::kLayer, false, true, s);
    check_case<X, R>(gen, zoo, AddNormKind::kRms, false, false, s);
    check_case<X, R>(gen, zoo, AddNormKind::kRms, false, true, s);
  }
}

JAX_LNGB_TEST(add_norm_matches_float64_and_is_deterministic) {
  std::mt19937_64 gen(20240611);
  Executors zoo;
  check_types<float, float>(gen, zoo);
  check_types<bf16_t, float>(gen, zoo);
  check_types<f16_t, f16_t>(gen, zoo);
  check_types<bf16_t, bf16_t>(gen, zoo);
}

using RowsTable = IsaTable<AddNormRowsTable>;

std::vector<RowsTable> runnable_row_tables() { return JAX_LNGB_RUNNABLE_TABLES(AddNormRowsTable, add_norm_rows_table); }

// Every ISA variant's row kernels, called directly (streaming stores on and
// off, with and without beta), give the generic variant's bits. NaN and Inf
// in some rows; row lengths cover the 16-row groups, partial blocks and the
// two-row tiles of long rows.
template <typename X, typename R>
void check_isa_variants(std::mt19937_64& gen, const std::vector<RowsTable>& tables) {
  for (const int64_t H : {5, 100, 257, 803, 20000}) {
    const int64_t rows = H > 1000 ? 3 : 37, n = rows * H;
    auto x = random_values<X>(gen, n, 1.0f);
    const auto r = random_values<R>(gen, n, 3.0f);
    const auto dy = random_values<X>(gen, n, 1.0f);
    const auto dh = random_values<R>(gen, n, 1.0f);
    const auto scale = random_values<float>(gen, H, 1.0f);
    const auto beta = random_values<float>(gen, H, 1.0f);
    x[H] = from_float<X>(NAN);
    x[2 * H + H / 2] = from_float<X>(INFINITY);
    for (int kind = 0; kind < 2; ++kind) {
      for (const bool with_beta : {true, false}) {
        if (kind == 1 && with_beta) continue;
        for (const bool stream : {false, true}) {
          std::vector<X> y0;
          std::vector<R> h0, d0;
          std::vector<float> s00, s10, g0, b0;
          for (const auto& t : tables) {
            std::vector<X> y = garbage<X>(n);
            std::vector<R> h = garbage<R>(n), d = garbage<R>(n);
            std::vector<float> s0(rows, -7.0f), s1(rows, -7.0f), g(H, 0.0f), b(H, 0.0f);
            t.table.forward[kind][int(dtype_of<X>())][int(dtype_of<R>())](
                x.data(), r.data(), rows, H, scale.data(), with_beta ? beta.data() : nullptr, 1e-5f, stream, y.data(),
                h.data(), s0.data(), s1.data());
            t.table.backward[kind][int(dtype_of<X>())][int(dtype_of<R>())](
                dy.data(), dh.data(), h.data(), s0.data(), s1.data(), scale.data(), rows, H, 1e-5f, stream, d.data(),
                g.data(), with_beta ? b.data() : nullptr);
            t.table.stream_fence();
            if (y0.empty()) {
              y0 = y, h0 = h, d0 = d, s00 = s0, s10 = s1, g0 = g, b0 = b;
              continue;
            }
            CHECK_MSG(same_bits(y, y0) && same_bits(h, h0) && same_bits(d, d0) && same_bits(s0, s00) &&
                          same_bits(s1, s10) && same_bits(g, g0) && same_bits(b, b0),
                      t.name << " differs from generic: H " << H << " kind " << kind << " beta " << with_beta
                             << " stream " << stream);
          }
        }
      }
    }
  }
}

JAX_LNGB_TEST(add_norm_row_kernels_same_bits_on_every_isa) {
  std::mt19937_64 gen(77);
  const auto tables = runnable_row_tables();
  check_isa_variants<float, float>(gen, tables);
  check_isa_variants<bf16_t, float>(gen, tables);
  check_isa_variants<bf16_t, bf16_t>(gen, tables);
  check_isa_variants<f16_t, f16_t>(gen, tables);
}

// y, mean and variance (LayerNorm) and y and rstd (RMSNorm) are the bits
// layer_norm_forward / rms_norm_forward give for the h the fused forward
// stored: the same formulas and the same association of every row sum.
template <typename T>
void check_norm_of_h(std::mt19937_64& gen, Executors& zoo, int64_t rows, int64_t H) {
  const CpuExecutor& ex = zoo.all()[0].ex;
  const int64_t n = rows * H;
  const auto x = random_values<T>(gen, n, 1.0f);
  const auto r = random_values<T>(gen, n, 4.0f);
  const auto gamma = random_values<float>(gen, H, 1.0f);
  const auto beta = random_values<float>(gen, H, 1.0f);
  for (const AddNormKind kind : {AddNormKind::kLayer, AddNormKind::kRms}) {
    const bool layer = kind == AddNormKind::kLayer;
    std::vector<T> y(n), h(n), y2(n);
    std::vector<float> s0(rows), s1(rows), t0(rows), t1(rows);
    AddNormForwardProblem f;
    f.kind = kind;
    f.x_dtype = f.r_dtype = dtype_of<T>();
    f.x = x.data();
    f.residual = r.data();
    f.gamma = gamma.data();
    f.beta = layer ? beta.data() : nullptr;
    f.y = y.data();
    f.h = h.data();
    f.mean = layer ? s0.data() : nullptr;
    f.variance = layer ? s1.data() : nullptr;
    f.rstd = layer ? nullptr : s0.data();
    f.rows = rows;
    f.cols = H;
    f.epsilon = 1e-5f;
    CHECK(add_norm_forward(f, ex) == nullptr);
    if (layer) {
      LayerNormForwardProblem l;
      l.dtype = dtype_of<T>();
      l.x = h.data();
      l.gamma = gamma.data();
      l.beta = beta.data();
      l.y = y2.data();
      l.mean = t0.data();
      l.variance = t1.data();
      l.rows = rows;
      l.cols = H;
      l.epsilon = 1e-5f;
      CHECK(layer_norm_forward(l, ex) == nullptr);
      CHECK_MSG(same_bits(s1, t1), "variance differs from layer_norm's, H " << H);
    } else {
      RmsNormForwardProblem m;
      m.dtype = dtype_of<T>();
      m.x = h.data();
      m.gamma = gamma.data();
      m.y = y2.data();
      m.rstd = t0.data();
      m.rows = rows;
      m.cols = H;
      m.epsilon = 1e-5f;
      CHECK(rms_norm_forward(m, ex) == nullptr);
    }
    CHECK_MSG(same_bits(y, y2) && same_bits(s0, t0), "y or statistics differ from the norm's, H " << H);
  }
}

JAX_LNGB_TEST(add_norm_forward_is_the_norm_of_h_bit_for_bit) {
  std::mt19937_64 gen(5);
  Executors zoo;
  for (const int64_t H : {7, 64, 300, 768, 5000}) {
    check_norm_of_h<float>(gen, zoo, 50, H);
    check_norm_of_h<bf16_t>(gen, zoo, 50, H);
  }
}

JAX_LNGB_TEST(add_norm_refuses_bad_problems) {
  Executors zoo;
  const CpuExecutor& ex = zoo.all()[0].ex;
  AddNormForwardProblem f;
  f.rows = -1;
  CHECK(add_norm_forward(f, ex) != nullptr);
  f.rows = 1;
  f.cols = 4;
  f.param_stride = 3;
  CHECK(add_norm_forward(f, ex) != nullptr);
  f.param_stride = 0;
  f.kind = AddNormKind::kRms;
  const float beta[4] = {};
  f.beta = beta;
  CHECK(add_norm_forward(f, ex) != nullptr);
  AddNormBackwardProblem b;
  b.out_dtype = static_cast<DType>(7);
  b.rows = 1;
  b.cols = 4;
  CHECK(add_norm_backward(b, ex) != nullptr);
}

}  // namespace
}  // namespace jax_lngb::test
