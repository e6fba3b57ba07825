#include "bench/stream_read.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "bench/stream_read_table.h"
#include "kernels/base/cpu_features.h"
#include "kernels/base/partition.h"

namespace jax_lngb {

namespace {

// Task boundaries inside a span fall on multiples of this many bytes, so the
// 64-bit word grid of every span is the same whoever reads which part.
constexpr int64_t kSliceAlign = 64;

SumWordsFn active_sum_words() {
  switch (active_isa()) {
#if defined(JAX_LNGB_HAVE_AVX512)
    case Isa::kAvx512:
      return avx512::sum_words_fn();
#endif
#if defined(JAX_LNGB_HAVE_AVX2)
    case Isa::kAvx2:
      return avx2::sum_words_fn();
#endif
    default:
      return generic::sum_words_fn();
  }
}

// Byte offset where task t of num_tasks starts inside a span of `bytes`.
int64_t slice_begin(int64_t bytes, int64_t t, int64_t num_tasks) {
  if (t >= num_tasks) return bytes;
  // bytes * t can overflow int64 only for buffers beyond 2^57 bytes.
  const int64_t b = bytes / num_tasks * t + bytes % num_tasks * t / num_tasks;
  return std::min(bytes, b / kSliceAlign * kSliceAlign);
}

}  // namespace

uint64_t stream_read(const StreamReadSpan* spans, int64_t count, const CpuExecutor& ex) {
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i) total += std::max<int64_t>(spans[i].bytes, 0);
  if (total == 0) return 0;
  // The kernels' sizing: about kTargetBlockBytes per task, at most
  // kMaxBlocksPerGroup tasks, and the executor decides how many threads
  // the bytes are worth.
  const int64_t num_tasks = std::clamp<int64_t>(total / kTargetBlockBytes, 1, kMaxBlocksPerGroup);
  static const SumWordsFn sum = active_sum_words();
  std::array<uint64_t, kMaxBlocksPerGroup> partial{};  // no allocation per call
  ex.run(num_tasks, total, [&](int64_t t) {
    uint64_t acc = 0;
    // The task's slices of up to kMaxSideBySide spans are read side by side
    // for the length they share, rounded down to whole 64-byte lines so each
    // span's word grid is kept; what a longer slice has left is read alone.
    for (int64_t first = 0; first < count; first += kMaxSideBySide) {
      const int k = int(std::min<int64_t>(kMaxSideBySide, count - first));
      const unsigned char* p[kMaxSideBySide];
      int64_t len[kMaxSideBySide];
      int64_t shared = INT64_MAX;
      for (int j = 0; j < k; ++j) {
        const StreamReadSpan& s = spans[first + j];
        const int64_t n = std::max<int64_t>(s.bytes, 0);
        const int64_t b0 = slice_begin(n, t, num_tasks), b1 = slice_begin(n, t + 1, num_tasks);
        p[j] = n > 0 ? static_cast<const unsigned char*>(s.data) + b0 : nullptr;
        len[j] = b1 - b0;
        shared = std::min(shared, len[j]);
      }
      shared = shared / kSliceAlign * kSliceAlign;
      if (shared > 0) acc += sum(p, k, shared);
      for (int j = 0; j < k; ++j) {
        if (len[j] <= shared) continue;
        const unsigned char* rest = p[j] + shared;
        acc += sum(&rest, 1, len[j] - shared);
      }
    }
    partial[size_t(t)] = acc;
  });
  uint64_t s = 0;
  for (int64_t t = 0; t < num_tasks; ++t) s += partial[size_t(t)];
  return s;
}

}  // namespace jax_lngb
