// What the kernel timing drivers (kernel_bench.cc, norm_bench.cc) share:
// the clock, the median, their command line, the cache eviction and pause
// before each timed call, and the dispatch on the dtype argument.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kernels/base/dtypes.h"

namespace jax_lngb::bench {

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Options {
  int64_t rows = 0, cols = 0;
  const char* dtype = "f32";
  int threads = 1, reps = 9, settle_ms = 50;
  int64_t evict_mib = 1024;
};

// ROWS COLS [f32|f16|bf16] [THREADS] [REPS] [EVICT_MIB] [SETTLE_MS] into
// `o` (REPS defaults to `default_reps`, THREADS to the hardware's). Returns
// 0, or the exit status after printing what was wrong.
inline int parse_options(int argc, char** argv, int default_reps, Options& o) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ROWS COLS [f32|f16|bf16] [THREADS] [REPS] [EVICT_MIB] [SETTLE_MS]\n", argv[0]);
    return 2;
  }
  o.rows = std::atoll(argv[1]);
  o.cols = std::atoll(argv[2]);
  if (argc > 3) o.dtype = argv[3];
  o.threads = argc > 4 ? std::atoi(argv[4]) : int(std::max(1u, std::thread::hardware_concurrency()));
  o.reps = argc > 5 ? std::atoi(argv[5]) : default_reps;
  if (argc > 6) o.evict_mib = std::atoll(argv[6]);
  if (argc > 7) o.settle_ms = std::atoi(argv[7]);
  if (o.rows <= 0 || o.cols <= 0 || o.threads < 1 || o.reps < 1 || o.evict_mib < 0 || o.settle_ms < 0) {
    std::fprintf(stderr, "ROWS, COLS, THREADS and REPS must be positive, EVICT_MIB and SETTLE_MS not negative\n");
    return 2;
  }
  return 0;
}

// Dirty every line of the eviction buffer, then let the write-backs drain
// before the clock starts, so the next call reads its inputs from memory.
inline void evict_and_settle(std::vector<unsigned char>& evict, int settle_ms) {
  for (size_t j = 0; j < evict.size(); j += 64) evict[j]++;
  std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
}

// run(T{}) for the element type the dtype argument names.
template <typename Run>
int for_dtype(const Options& o, Run&& run) {
  const std::string dtype = o.dtype;
  if (dtype == "f32") return run(float{});
  if (dtype == "f16") return run(f16_t{});
  if (dtype == "bf16") return run(bf16_t{});
  std::fprintf(stderr, "dtype must be f32, f16 or bf16, got %s\n", o.dtype);
  return 2;
}

}  // namespace jax_lngb::bench
