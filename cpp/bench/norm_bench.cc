// Times the LayerNorm and RMSNorm CPU kernels (forward, backward rows that
// store res_for_gamma, and the fused backward) on one shape, with no JAX in
// between. As in kernel_bench.cc, a buffer larger than the last-level cache
// is written and the process sleeps before every timed call, so each call
// reads its inputs from memory; the six kernels take turns and the medians
// are reported. Used to check that changes to the shared row code cost no
// speed (run an old and a new build alternately).
//
//   jax_lngb_norm_bench ROWS COLS [f32|f16|bf16] [THREADS] [REPS] [EVICT_MIB] [SETTLE_MS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_common.h"
#include "kernels/layer_norm.h"
#include "kernels/rms_norm.h"
#include "tests/support.h"  // ThreadPool and random_values, as the test driver uses them

namespace {

using jax_lngb::bench::median;
using jax_lngb::bench::Options;
using jax_lngb::bench::seconds_now;

template <typename T>
int run(const Options& o) {
  using namespace jax_lngb;
  const int64_t n = o.rows * o.cols;
  std::mt19937_64 gen(0);
  const std::vector<T> x = test::random_values<T>(gen, n);
  const std::vector<T> dy = test::random_values<T>(gen, n);
  std::vector<float> gamma(size_t(o.cols), 1.25f), beta(size_t(o.cols), -0.5f);
  std::vector<float> mean(size_t(o.rows)), var(size_t(o.rows)), rstd(size_t(o.rows));
  const size_t sz = static_cast<size_t>(n);
  std::vector<T> y(sz), dx(sz), res(sz);
  std::vector<T> pd_gamma(size_t(o.cols)), pd_beta(size_t(o.cols));
  std::vector<unsigned char> evict(size_t(o.evict_mib) << 20, 1);

  test::ThreadPool pool(o.threads - 1);
  CpuExecutor ex;
  ex.max_threads = o.threads;
  if (o.threads > 1) ex.spawn = pool.spawner();
  const DType dt = dtype_of<T>();

  LayerNormForwardProblem lf;
  lf.dtype = dt, lf.x = x.data(), lf.gamma = gamma.data(), lf.beta = beta.data(), lf.y = y.data();
  lf.mean = mean.data(), lf.variance = var.data(), lf.rows = o.rows, lf.cols = o.cols;
  LayerNormGradProblem lg;
  lg.dtype = dt, lg.dy = dy.data(), lg.x = x.data(), lg.variance = var.data(), lg.mean = mean.data();
  lg.gamma = gamma.data(), lg.pd_x = dx.data(), lg.res_for_gamma = res.data(), lg.rows = o.rows, lg.cols = o.cols;
  LayerNormBackwardProblem lb;
  lb.dtype = lb.out_dtype = dt, lb.dy = dy.data(), lb.x = x.data(), lb.variance = var.data();
  lb.mean = mean.data(), lb.gamma = gamma.data(), lb.dx = dx.data(), lb.pd_gamma = pd_gamma.data();
  lb.pd_beta = pd_beta.data(), lb.rows = o.rows, lb.cols = o.cols;
  RmsNormForwardProblem rf;
  rf.dtype = dt, rf.x = x.data(), rf.gamma = gamma.data(), rf.y = y.data(), rf.rstd = rstd.data();
  rf.rows = o.rows, rf.cols = o.cols;
  RmsNormGradProblem rg;
  rg.dtype = dt, rg.dy = dy.data(), rg.x = x.data(), rg.rstd = rstd.data(), rg.gamma = gamma.data();
  rg.dx = dx.data(), rg.res_for_gamma = res.data(), rg.rows = o.rows, rg.cols = o.cols;
  RmsNormBackwardProblem rb;
  rb.dtype = rb.out_dtype = dt, rb.dy = dy.data(), rb.x = x.data(), rb.rstd = rstd.data();
  rb.gamma = gamma.data(), rb.dx = dx.data(), rb.pd_gamma = pd_gamma.data(), rb.rows = o.rows, rb.cols = o.cols;

  // Forwards first in every round: the backwards read their statistics.
  const char* names[6] = {"ln_forward", "ln_grad", "ln_backward", "rms_forward", "rms_grad", "rms_backward"};
  const std::function<const char*()> calls[6] = {
      [&] { return layer_norm_forward(lf, ex); },  [&] { return layer_norm_grad(lg, ex); },
      [&] { return layer_norm_backward(lb, ex); }, [&] { return rms_norm_forward(rf, ex); },
      [&] { return rms_norm_grad(rg, ex); },       [&] { return rms_norm_backward(rb, ex); }};
  std::vector<double> t[6];
  constexpr int kWarmup = 1;
  for (int i = 0; i < kWarmup + o.reps; ++i) {
    for (int k = 0; k < 6; ++k) {
      jax_lngb::bench::evict_and_settle(evict, o.settle_ms);
      const double t0 = seconds_now();
      if (const char* err = calls[k]()) {
        std::fprintf(stderr, "%s: %s\n", names[k], err);
        return 1;
      }
      if (i >= kWarmup) t[k].push_back(seconds_now() - t0);
    }
  }
  std::printf("[%lld, %lld] %s, %d threads, median of %d (ms):", (long long)o.rows, (long long)o.cols, o.dtype,
              o.threads, o.reps);
  for (int k = 0; k < 6; ++k) std::printf(" %s %.3f", names[k], median(t[k]) * 1e3);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int status = jax_lngb::bench::parse_options(argc, argv, 9, o)) return status;
  return jax_lngb::bench::for_dtype(o, [&](auto tag) { return run<decltype(tag)>(o); });
}
