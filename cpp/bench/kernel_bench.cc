// Times grad_beta (the LayerNormGradBeta CPU kernel) against stream_read
// (the probe that only reads the same bytes) on one shape, with no JAX in
// between. Both run on the same persistent worker threads; before every
// timed call a buffer larger than the last-level cache is written and the
// process sleeps, as the Python benchmark's settle pause does, so each call
// reads its inputs from memory. Calls alternate kernel / probe and the
// medians are reported.
//
//   jax_lngb_kernel_bench ROWS COLS [f32|f16|bf16] [THREADS] [REPS] [EVICT_MIB] [SETTLE_MS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_common.h"
#include "bench/stream_read.h"
#include "kernels/grad_beta.h"
#include "tests/support.h"  // ThreadPool and random_values, as the test driver uses them

namespace {

using jax_lngb::bench::median;
using jax_lngb::bench::Options;
using jax_lngb::bench::seconds_now;

// A copy of `v` on a 64-byte boundary, as XLA aligns its CPU buffers:
// std::vector's large blocks start 16 bytes into a page, where every
// 64-byte vector load straddles two lines (7% slower streaming, measured).
template <typename T>
struct Aligned {
  explicit Aligned(const std::vector<T>& v)
      : p(static_cast<T*>(std::aligned_alloc(64, (v.size() * sizeof(T) + 63) / 64 * 64))) {
    if (p == nullptr) throw std::bad_alloc();
    std::copy(v.begin(), v.end(), p);
  }
  ~Aligned() { std::free(p); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  T* data() const { return p; }
  T* p;
};

// One shape in one dtype; inputs are standard normal, as in the Python
// benchmark (tests/support.h's random_values).
template <typename T>
int run(const Options& o) {
  const int64_t n = o.rows * o.cols;
  std::mt19937_64 gen(0);
  const Aligned<T> res(jax_lngb::test::random_values<T>(gen, n));
  const Aligned<T> dy(jax_lngb::test::random_values<T>(gen, n));
  std::vector<T> pd_gamma(size_t(o.cols)), pd_beta(size_t(o.cols));
  std::vector<unsigned char> evict(size_t(o.evict_mib) << 20, 1);

  jax_lngb::test::ThreadPool pool(o.threads - 1);
  jax_lngb::CpuExecutor ex;
  ex.max_threads = o.threads;
  if (o.threads > 1) ex.spawn = pool.spawner();

  jax_lngb::GradBetaProblem p;
  p.in_dtype = p.out_dtype = jax_lngb::dtype_of<T>();
  p.res_for_gamma = res.data();
  p.dy = dy.data();
  p.pd_gamma = pd_gamma.data();
  p.pd_beta = pd_beta.data();
  p.rows = o.rows;
  p.cols = o.cols;
  const int64_t bytes = n * int64_t(sizeof(T));
  const jax_lngb::StreamReadSpan spans[2] = {{res.data(), bytes}, {dy.data(), bytes}};

  std::vector<double> t_kernel, t_probe;
  volatile uint64_t sink = 0;
  constexpr int kWarmup = 2;
  for (int i = 0; i < kWarmup + o.reps; ++i) {
    for (int which = 0; which < 2; ++which) {
      jax_lngb::bench::evict_and_settle(evict, o.settle_ms);
      const double t0 = seconds_now();
      if (which == 0) {
        if (const char* err = jax_lngb::grad_beta(p, ex)) {
          std::fprintf(stderr, "grad_beta: %s\n", err);
          return 1;
        }
      } else {
        sink = sink + jax_lngb::stream_read(spans, 2, ex);
      }
      const double t = seconds_now() - t0;
      if (i >= kWarmup) (which == 0 ? t_kernel : t_probe).push_back(t);
    }
  }
  const double k = median(t_kernel), pr = median(t_probe);
  const double gb = 2.0 * double(bytes) / 1e9;
  std::printf(
      "[%lld, %lld] %s, %d threads, median of %d: kernel %.3f ms (%.1f GB/s), probe %.3f ms (%.1f GB/s), "
      "kernel / probe %.3f\n",
      (long long)o.rows, (long long)o.cols, o.dtype, o.threads, o.reps, k * 1e3, gb / k, pr * 1e3, gb / pr, k / pr);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int status = jax_lngb::bench::parse_options(argc, argv, 15, o)) return status;
  return jax_lngb::bench::for_dtype(o, [&](auto tag) { return run<decltype(tag)>(o); });
}
