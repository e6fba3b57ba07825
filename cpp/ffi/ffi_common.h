// Shared pieces of the XLA FFI handlers: dtype mapping, buffer checks that
// turn inconsistencies into ffi::Error (never an abort), and the executor
// built on XLA's intra-op thread pool.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "kernels/dtypes.h"
#include "kernels/executor.h"
#include "xla/ffi/api/ffi.h"

namespace jax_lngb::ffi_util {

namespace ffi = xla::ffi;

inline std::optional<DType> to_dtype(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32:
      return DType::kF32;
    case ffi::DataType::F16:
      return DType::kF16;
    case ffi::DataType::BF16:
      return DType::kBF16;
    default:
      return std::nullopt;
  }
}

inline std::string dims_str(ffi::Span<const int64_t> d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

inline bool same_dims(ffi::Span<const int64_t> a, ffi::Span<const int64_t> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

inline ffi::Error invalid(const std::string& what) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, "jax_lngb: " + what);
}

// The number of threads to use: XLA's intra-op pool size, optionally capped
// by JAX_LNGB_NUM_THREADS (read once; results never depend on it).
inline int64_t thread_cap() {
  static const int64_t cap = [] {
    const char* s = std::getenv("JAX_LNGB_NUM_THREADS");
    const long v = s ? std::strtol(s, nullptr, 10) : 0;
    return v > 0 ? int64_t(v) : int64_t(0);
  }();
  return cap;
}

inline CpuExecutor make_executor(ffi::ThreadPool& pool) {
  CpuExecutor ex;
  int64_t n = pool.num_threads();
  if (n < 1) n = 1;
  if (thread_cap() > 0 && thread_cap() < n) n = thread_cap();
  ex.max_threads = n;
  if (n > 1) ex.spawn = [&pool](std::function<void()> f) { pool.Schedule(std::move(f)); };
  return ex;
}

}  // namespace jax_lngb::ffi_util
