// Shared pieces of the XLA FFI handlers: dtype mapping, buffer checks that
// turn inconsistencies into ffi::Error (never an abort), and the executor
// built on XLA's intra-op thread pool.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "kernels/base/dtypes.h"
#include "kernels/base/executor.h"
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

// epsilon as the primitives pass it: finite and >= 0 (abstract evaluation
// refuses anything else). A hand-written call could pass NaN, a negative
// value or an infinity, which would silently turn rows into NaN or beta.
inline bool valid_epsilon(float eps) { return std::isfinite(eps) && eps >= 0.0f; }

// Whether two buffers share a byte. XLA gives a custom call results
// disjoint from its operands unless the call declares input_output_aliases;
// the LayerNorm kernels need that (they re-read operands after storing
// results: a row's later passes, the fused backward's dy), so an aliased
// call must be refused rather than computed wrongly.
inline bool overlap(const ffi::AnyBuffer& a, const ffi::AnyBuffer& b) {
  const size_t na = a.size_bytes(), nb = b.size_bytes();
  if (na == 0 || nb == 0) return false;
  const auto pa = reinterpret_cast<std::uintptr_t>(a.untyped_data());
  const auto pb = reinterpret_cast<std::uintptr_t>(b.untyped_data());
  return pa < pb + nb && pb < pa + na;
}

using NamedBuffer = std::pair<const char*, const ffi::AnyBuffer*>;

// The first result that shares memory with an operand, as a message (empty
// if none does).
inline std::string first_overlap(std::initializer_list<NamedBuffer> results,
                                 std::initializer_list<NamedBuffer> operands) {
  for (const auto& r : results)
    for (const auto& o : operands)
      if (overlap(*r.second, *o.second))
        return std::string(r.first) + " buffer shares memory with operand " + o.first +
               " (results must not alias the operands)";
  return {};
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
