// How a kernel may use threads: a spawner and a thread budget. Kernels
// receive it from the caller (the FFI layer passes XLA's intra-op pool) and
// never create threads of their own.
#pragma once

#include <cstdint>

#include "parallel.h"

namespace jax_lngb {

struct CpuExecutor {
  Spawner spawn;            // may be empty: everything runs on the caller
  int64_t max_threads = 1;  // including the caller

  // Threads worth using for `bytes` of streamed input: small problems stay
  // on the caller, where a thread hand-off would cost more than the work.
  int64_t threads_for(int64_t bytes) const {
    constexpr int64_t kMinBytesPerThread = int64_t(256) << 10;
    const int64_t useful = bytes / kMinBytesPerThread;
    return useful < 1 ? 1 : (useful < max_threads ? useful : max_threads);
  }

  void run(int64_t num_tasks, int64_t bytes, const std::function<void(int64_t)>& body) const {
    parallel_for(num_tasks, threads_for(bytes), spawn, body);
  }
};

}  // namespace jax_lngb
