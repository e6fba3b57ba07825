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
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "grad_beta.h"
#include "stream_read.h"
#include "tests/support.h"  // ThreadPool: the worker threads the test driver uses

namespace {

using jax_lngb::DType;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Normal, finite values of moderate size in every dtype (no subnormals, so
// the timing says nothing about assists), different in the two operands.
void fill(void* data, int64_t n, DType dt, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const float v = (1.0f + float(s >> 8) * (1.0f / 16777216.0f)) * ((s & 1) ? -1.0f : 1.0f);
    switch (dt) {
      case DType::kF32:
        static_cast<float*>(data)[i] = v;
        break;
      case DType::kF16:
        static_cast<jax_lngb::f16_t*>(data)[i] = jax_lngb::from_float<jax_lngb::f16_t>(v);
        break;
      case DType::kBF16:
        static_cast<jax_lngb::bf16_t*>(data)[i] = jax_lngb::from_float<jax_lngb::bf16_t>(v);
        break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ROWS COLS [f32|f16|bf16] [THREADS] [REPS] [EVICT_MIB] [SETTLE_MS]\n",
                 argv[0]);
    return 2;
  }
  const int64_t rows = std::atoll(argv[1]), cols = std::atoll(argv[2]);
  const std::string dname = argc > 3 ? argv[3] : "f32";
  const int threads = argc > 4 ? std::atoi(argv[4]) : int(std::max(1u, std::thread::hardware_concurrency()));
  const int reps = argc > 5 ? std::atoi(argv[5]) : 15;
  const int64_t evict_mib = argc > 6 ? std::atoll(argv[6]) : 1024;
  const int settle_ms = argc > 7 ? std::atoi(argv[7]) : 50;
  DType dt;
  if (dname == "f32") dt = DType::kF32;
  else if (dname == "f16") dt = DType::kF16;
  else if (dname == "bf16") dt = DType::kBF16;
  else {
    std::fprintf(stderr, "dtype must be f32, f16 or bf16, got %s\n", dname.c_str());
    return 2;
  }
  if (rows <= 0 || cols <= 0 || threads < 1 || reps < 1 || evict_mib < 0 || settle_ms < 0) {
    std::fprintf(stderr, "ROWS, COLS, THREADS and REPS must be positive, EVICT_MIB and SETTLE_MS not negative\n");
    return 2;
  }

  const int64_t n = rows * cols, esize = jax_lngb::dtype_size(dt);
  std::vector<unsigned char> res(size_t(n * esize)), dy(size_t(n * esize));
  fill(res.data(), n, dt, 1);
  fill(dy.data(), n, dt, 2);
  std::vector<unsigned char> pd_gamma(size_t(cols * esize)), pd_beta(size_t(cols * esize));
  std::vector<unsigned char> evict(size_t(evict_mib) << 20, 1);

  jax_lngb::test::ThreadPool pool(threads - 1);
  jax_lngb::CpuExecutor ex;
  ex.max_threads = threads;
  if (threads > 1) ex.spawn = pool.spawner();

  jax_lngb::GradBetaProblem p;
  p.in_dtype = p.out_dtype = dt;
  p.res_for_gamma = res.data();
  p.dy = dy.data();
  p.pd_gamma = pd_gamma.data();
  p.pd_beta = pd_beta.data();
  p.rows = rows;
  p.cols = cols;
  const jax_lngb::StreamReadSpan spans[2] = {{res.data(), n * esize}, {dy.data(), n * esize}};

  std::vector<double> t_kernel, t_probe;
  volatile uint64_t sink = 0;
  constexpr int kWarmup = 2;
  for (int i = 0; i < kWarmup + reps; ++i) {
    for (int which = 0; which < 2; ++which) {
      // Dirty every line of the eviction buffer, then let the write-backs
      // drain before the clock starts.
      for (size_t j = 0; j < evict.size(); j += 64) evict[j]++;
      std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
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
  const double gb = 2.0 * double(n * esize) / 1e9;
  std::printf("[%lld, %lld] %s, %d threads, median of %d: kernel %.3f ms (%.1f GB/s), probe %.3f ms (%.1f GB/s), "
              "kernel / probe %.3f\n",
              (long long)rows, (long long)cols, dname.c_str(), threads, reps, k * 1e3, gb / k, pr * 1e3, gb / pr,
              k / pr);
  return 0;
}
