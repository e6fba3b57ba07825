// parallel_for and CpuExecutor: every task runs exactly once and has
// returned when the call returns, whatever the spawner does with helpers
// (nothing, inline, a pool of one or several threads, later, never); calls
// nest and run concurrently from several threads without deadlock.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "harness.h"
#include "kernels/base/executor.h"
#include "kernels/base/parallel.h"
#include "support.h"

namespace jax_lngb::test {
namespace {

void check_each_task_once(const Spawner& spawn, int64_t max_threads, int64_t num_tasks, const char* what, bool jitter) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(num_tasks > 0 ? num_tasks : 0));
  for (auto& h : hits) h.store(0);
  std::atomic<int64_t> returned{0};
  parallel_for(num_tasks, max_threads, spawn, [&](int64_t i) {
    if (jitter && (i % 7) == 3) std::this_thread::yield();
    if (jitter && (i % 61) == 5) std::this_thread::sleep_for(std::chrono::microseconds(200));
    hits[size_t(i)].fetch_add(1);
    returned.fetch_add(1);
  });
  // Checked right after the call: nothing may still be running.
  CHECK_MSG(returned.load() == (num_tasks > 0 ? num_tasks : 0),
            what << ": " << returned.load() << " of " << num_tasks << " tasks done at return");
  for (int64_t i = 0; i < num_tasks; ++i)
    CHECK_MSG(hits[size_t(i)].load() == 1, what << ": task " << i << " ran " << hits[size_t(i)].load() << " times");
}

JAX_LNGB_TEST(parallel_for_runs_every_task_once) {
  Executors zoo;
  for (const auto& ne : zoo.all())
    for (int64_t budget : {-3, 0, 1, 2, 3, 8, 64})
      for (int64_t n : {-1, 0, 1, 2, 3, 7, 64, 1000}) {
        check_each_task_once(ne.ex.spawn, budget, n, ne.name.c_str(), n >= 64);
        zoo.flush_deferred();
      }
}

JAX_LNGB_TEST(late_helpers_touch_nothing) {
  // Helpers that only start after parallel_for returned find no task, so a
  // body that has gone out of scope is never called.
  DeferredSpawner deferred;
  std::atomic<int> calls{0};
  for (int rep = 0; rep < 50; ++rep) {
    {
      std::vector<int> scratch(16, 0);
      parallel_for(16, 8, deferred.spawner(), [&](int64_t i) {
        scratch[size_t(i)] += 1;
        calls.fetch_add(1);
      });
      for (int v : scratch) CHECK(v == 1);
    }
    CHECK(deferred.flush() == 7);  // budget 8 = caller + 7 helpers
  }
  CHECK(calls.load() == 50 * 16);
}

JAX_LNGB_TEST(nested_parallel_for_on_one_pool) {
  // A task that itself forks on the same pool: no task waits on another, so
  // even a one-thread pool cannot deadlock.
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> sum{0};
    parallel_for(8, 8, pool.spawner(), [&](int64_t i) {
      parallel_for(50, 8, pool.spawner(), [&](int64_t j) { sum.fetch_add(i * 50 + j); });
    });
    CHECK_MSG(sum.load() == 400 * 399 / 2, "pool of " << threads);
  }
}

JAX_LNGB_TEST(concurrent_callers_share_a_pool) {
  // Several XLA threads may run kernels at the same time on one pool.
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 30; ++rep) {
        std::vector<int> out(static_cast<size_t>(100 + c), 0);
        parallel_for(int64_t(out.size()), 4, pool.spawner(), [&](int64_t i) { out[size_t(i)] = int(i) + c; });
        for (size_t i = 0; i < out.size(); ++i)
          if (out[i] != int(i) + c) bad.fetch_add(1);
      }
    });
  for (auto& t : callers) t.join();
  CHECK(bad.load() == 0);
}

JAX_LNGB_TEST(executor_thread_budget) {
  const int64_t kib = 1024;
  CpuExecutor ex{Spawner{}, 8};
  CHECK(ex.threads_for(0) == 1);
  CHECK(ex.threads_for(-5) == 1);
  CHECK(ex.threads_for(256 * kib - 1) == 1);
  CHECK(ex.threads_for(512 * kib) == 2);
  CHECK(ex.threads_for(int64_t(1) << 40) == 8);
  for (int64_t budget : {1, 2, 3, 64}) {
    CpuExecutor e{Spawner{}, budget};
    for (int64_t bytes : {int64_t(0), 300 * kib, 10000 * kib, int64_t(1) << 50}) {
      const int64_t t = e.threads_for(bytes);
      CHECK_MSG(t >= 1 && t <= budget, "budget " << budget << " bytes " << bytes << " -> " << t);
    }
  }
  // A budget below one still runs everything on the caller.
  CpuExecutor none{Spawner{}, 0};
  int64_t ran = 0;
  none.run(5, int64_t(1) << 30, [&](int64_t) { ++ran; });
  CHECK(ran == 5);
}

}  // namespace
}  // namespace jax_lngb::test
