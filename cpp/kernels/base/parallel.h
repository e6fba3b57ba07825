// A fork-join loop over a fixed set of tasks that never blocks a worker.
//
// The calling thread takes part in the work. Helper tasks are handed to a
// scheduler the caller provides (XLA's intra-op pool in the FFI layer, plain
// threads in the C++ test driver); a helper that starts late, or never,
// costs nothing: tasks are claimed from an atomic counter, so the caller only
// ever waits for tasks that are already running on some thread. No task
// waits on another task, which keeps a one-thread or inline-running pool
// deadlock-free.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

namespace jax_lngb {

// Schedules a job somewhere; may run it inline before returning.
using Spawner = std::function<void(std::function<void()>)>;

namespace detail {
struct ForkJoinState {
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  int64_t total = 0;
  std::mutex mu;
  std::condition_variable cv;
  const std::function<void(int64_t)>* body = nullptr;

  // Runs tasks until none is left to claim.
  void drain() {
    for (;;) {
      const int64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= total) return;
      (*body)(i);
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == total) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
    }
  }
};
}  // namespace detail

// Calls body(i) for every i in [0, num_tasks), on up to `max_threads` threads
// (the caller included). Returns when every call has returned.
inline void parallel_for(int64_t num_tasks, int64_t max_threads, const Spawner& spawn,
                         const std::function<void(int64_t)>& body) {
  if (num_tasks <= 0) return;
  const int64_t helpers = std::min<int64_t>(std::max<int64_t>(max_threads, 1), num_tasks) - 1;
  if (helpers <= 0 || !spawn) {
    for (int64_t i = 0; i < num_tasks; ++i) body(i);
    return;
  }
  auto state = std::make_shared<detail::ForkJoinState>();
  state->total = num_tasks;
  state->body = &body;
  // A helper holds the state alive; it dereferences `body` only after
  // claiming an unfinished task, i.e. while the caller is still waiting.
  for (int64_t h = 0; h < helpers; ++h) spawn([state] { state->drain(); });
  state->drain();
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] { return state->done.load(std::memory_order_acquire) == num_tasks; });
}

}  // namespace jax_lngb
