// Test support for the kernel driver: thread spawners of every kind the
// kernels must tolerate, random data, the float64 reference and the
// bit-exact model of the gamma/beta reduction.
#pragma once

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/base/cpu_features.h"
#include "kernels/base/dtypes.h"
#include "kernels/base/executor.h"
#include "kernels/base/partition.h"

namespace jax_lngb::test {

// ------------------------------------------------------------ ISA tables

// One ISA variant's table of row kernels, by name.
template <class Table>
struct IsaTable {
  const char* name;
  Table table;
};

// The variants of a kernel table compiled into this build that this CPU can
// execute: generic always, AVX2 and AVX-512 where both hold. A variant the
// build lacks is passed as nullptr (JAX_LNGB_ISA_TABLE below).
template <class Table>
std::vector<IsaTable<Table>> runnable_tables(Table (*generic_table)(), Table (*avx2_table)(), Table (*avx512_table)()) {
  std::vector<IsaTable<Table>> out{{"generic", generic_table()}};
  if (avx2_table && int(supported_isa()) >= int(Isa::kAvx2)) out.push_back({"avx2", avx2_table()});
  if (avx512_table && int(supported_isa()) >= int(Isa::kAvx512)) out.push_back({"avx512", avx512_table()});
  return out;
}

#if defined(JAX_LNGB_HAVE_AVX2)
#define JAX_LNGB_AVX2_TABLE(getter) (&avx2::getter)
#else
#define JAX_LNGB_AVX2_TABLE(getter) nullptr
#endif
#if defined(JAX_LNGB_HAVE_AVX512)
#define JAX_LNGB_AVX512_TABLE(getter) (&avx512::getter)
#else
#define JAX_LNGB_AVX512_TABLE(getter) nullptr
#endif
// runnable_tables() of the table every ISA variant's `getter` returns.
#define JAX_LNGB_RUNNABLE_TABLES(Table, getter) \
  runnable_tables<Table>(&generic::getter, JAX_LNGB_AVX2_TABLE(getter), JAX_LNGB_AVX512_TABLE(getter))

// ------------------------------------------------------------- spawners

// A fixed set of std::threads fed from a queue, like XLA's intra-op pool.
// The destructor finishes every queued job, then joins.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void schedule(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  Spawner spawner() {
    return [this](std::function<void()> job) { schedule(std::move(job)); };
  }
  int size() const { return int(workers_.size()); }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ and nothing left
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// Holds jobs until flush(): helpers that start only after the kernel call
// has returned must find nothing to do and touch nothing that is gone.
class DeferredSpawner {
 public:
  Spawner spawner() {
    return [this](std::function<void()> job) {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    };
  }
  int64_t flush() {
    std::vector<std::function<void()>> jobs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs.swap(jobs_);
    }
    for (auto& j : jobs) j();
    return int64_t(jobs.size());
  }

 private:
  std::mutex mu_;
  std::vector<std::function<void()>> jobs_;
};

struct NamedExecutor {
  std::string name;
  CpuExecutor ex;
};

// Every way a caller may hand threads to a kernel: none, a spawner that runs
// the job inline, pools of one and several threads (also with a thread
// budget above the pool size), helpers that start after the call returned,
// and helpers that never start.
class Executors {
 public:
  Executors() : pool1_(1), pool3_(3) {
    const Spawner inline_spawn = [](std::function<void()> job) { job(); };
    const Spawner drop = [](std::function<void()>) {};
    list_ = {
        {"no spawner", CpuExecutor{Spawner{}, 1}},
        {"no spawner, budget 8", CpuExecutor{Spawner{}, 8}},
        {"inline spawner x4", CpuExecutor{inline_spawn, 4}},
        {"pool of 1, budget 2", CpuExecutor{pool1_.spawner(), 2}},
        {"pool of 1, budget 16", CpuExecutor{pool1_.spawner(), 16}},
        {"pool of 3, budget 4", CpuExecutor{pool3_.spawner(), 4}},
        {"pool of 3, budget 64", CpuExecutor{pool3_.spawner(), 64}},
        {"deferred helpers x8", CpuExecutor{deferred_.spawner(), 8}},
        {"helpers never run x8", CpuExecutor{drop, 8}},
    };
  }
  const std::vector<NamedExecutor>& all() const { return list_; }
  // The default a test uses when threading is not its subject.
  const CpuExecutor& pool() const { return list_[5].ex; }
  // Runs what the deferred spawner holds; call after each kernel call.
  int64_t flush_deferred() { return deferred_.flush(); }

 private:
  ThreadPool pool1_, pool3_;
  DeferredSpawner deferred_;
  std::vector<NamedExecutor> list_;
};

// ---------------------------------------------------------------- values

inline uint32_t bits(float f) { return float_to_bits(f); }
inline uint16_t bits(bf16_t x) { return x.bits; }
inline uint16_t bits(f16_t x) { return x.bits; }

// Equal as results: the same bits, or both NaN (NaN payloads may differ
// between independently written code paths).
template <typename T>
bool same_result(T a, T b) {
  const float fa = to_float(a), fb = to_float(b);
  if (std::isnan(fa) || std::isnan(fb)) return std::isnan(fa) && std::isnan(fb);
  return bits(a) == bits(b);
}

template <typename T>
std::vector<T> random_values(std::mt19937_64& gen, int64_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = from_float<T>(dist(gen));
  return v;
}

template <typename T>
constexpr const char* type_name() {
  return dtype_name(dtype_of<T>());
}

inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::kF32:
      return std::ldexp(1.0, -24);
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kBF16:
      return std::ldexp(1.0, -8);
  }
  return 1.0;
}

inline double half_min_subnormal(DType t) {
  switch (t) {
    case DType::kF32:
      return std::ldexp(1.0, -150);
    case DType::kF16:
      return std::ldexp(1.0, -25);
    case DType::kBF16:
      return std::ldexp(1.0, -134);
  }
  return 1.0;
}

// Error bound of a float32-accumulated sum of n rounded products (Higham's
// gamma_{n+1} times the sum of magnitudes, plus product underflow), then
// narrowed once to `out`.
inline double sum_error_bound(double ref, double abs_sum, int64_t n, DType out) {
  const double u = std::ldexp(1.0, -24);
  const double k = double(n + 1) * u;
  const double acc = k / (1 - k) * abs_sum + double(n) * std::ldexp(1.0, -149);
  return acc + unit_roundoff(out) * (std::fabs(ref) + acc) + half_min_subnormal(out);
}

// ------------------------------------------------------------ references

// float64 sums over the rows of each of G [R, H] problems.
struct Float64Sums {
  std::vector<double> gamma, beta, abs_gamma, abs_beta;  // [G][H]
};

template <typename T>
Float64Sums float64_sums(const T* res, const T* dy, int64_t G, int64_t R, int64_t H) {
  Float64Sums s;
  const size_t n = size_t(G * H);
  s.gamma.assign(n, 0.0);
  s.beta.assign(n, 0.0);
  s.abs_gamma.assign(n, 0.0);
  s.abs_beta.assign(n, 0.0);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < H; ++c) {
        const int64_t i = (g * R + r) * H + c;
        const double x = to_float(res[i]), d = to_float(dy[i]);
        s.gamma[g * H + c] += x * d;
        s.beta[g * H + c] += d;
        s.abs_gamma[g * H + c] += std::fabs(x * d);
        s.abs_beta[g * H + c] += std::fabs(d);
      }
  return s;
}

// The contract of grad_beta, bit for bit: the shape-only partition of
// partition.h, float32 row-order sums per block, block partials added in
// block order, one rounding to the output type.
template <typename T, typename TOut>
void model_grad_beta(const T* res, const T* dy, int64_t G, int64_t R, int64_t H, TOut* pd_gamma, TOut* pd_beta) {
  const ReducePartition part = make_reduce_partition(R, H, 2 * int64_t(sizeof(T)));
  std::vector<float> sum_g(static_cast<size_t>(H)), sum_b(static_cast<size_t>(H)), blk_g(static_cast<size_t>(H)),
      blk_b(static_cast<size_t>(H));
  for (int64_t g = 0; g < G; ++g) {
    std::fill(sum_g.begin(), sum_g.end(), 0.0f);
    std::fill(sum_b.begin(), sum_b.end(), 0.0f);
    for (int64_t rb = 0; rb < part.rows.num_blocks; ++rb) {
      std::fill(blk_g.begin(), blk_g.end(), 0.0f);
      std::fill(blk_b.begin(), blk_b.end(), 0.0f);
      for (int64_t r = part.rows.begin(rb); r < part.rows.end(rb); ++r)
        for (int64_t c = 0; c < H; ++c) {
          const int64_t i = (g * R + r) * H + c;
          const float d = to_float(dy[i]);
          const float p = to_float(res[i]) * d;
          blk_g[c] = blk_g[c] + p;
          blk_b[c] = blk_b[c] + d;
        }
      for (int64_t c = 0; c < H; ++c) {
        // Block 0 is the running sum itself (0 + x would turn -0 into +0).
        sum_g[c] = rb == 0 ? blk_g[c] : sum_g[c] + blk_g[c];
        sum_b[c] = rb == 0 ? blk_b[c] : sum_b[c] + blk_b[c];
      }
    }
    for (int64_t c = 0; c < H; ++c) {
      pd_gamma[g * H + c] = from_float<TOut>(sum_g[c]);
      pd_beta[g * H + c] = from_float<TOut>(sum_b[c]);
    }
  }
}

}  // namespace jax_lngb::test
