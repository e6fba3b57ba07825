#include "stream_read.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "cpu_features.h"
#include "partition.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define JAX_LNGB_STREAM_X86 1
#include <immintrin.h>
#endif

namespace jax_lngb {

namespace {

// Task boundaries inside a span fall on multiples of this many bytes, so the
// 64-bit word grid of every span is the same whoever reads which part.
constexpr int64_t kSliceAlign = 64;

using SumFn = uint64_t (*)(const unsigned char* p, int64_t n);

// Sum of the whole 64-bit words of p[0, n) plus the zero-padded last one.
uint64_t sum_words_generic(const unsigned char* p, int64_t n) {
  // Four independent accumulators: the loop is bound by loads, not by one
  // chain of additions.
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, sizeof(w));
    a0 += w[0];
    a1 += w[1];
    a2 += w[2];
    a3 += w[3];
  }
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    a0 += w;
  }
  if (i < n) {
    uint64_t w = 0;  // little-endian: the tail bytes are the low bytes
    for (int64_t k = 0; k < n - i; ++k) w |= uint64_t(p[i + k]) << (8 * k);
    a0 += w;
  }
  return a0 + a1 + a2 + a3;
}

#if defined(JAX_LNGB_STREAM_X86)
// The vector loops are compiled for their ISA with target attributes (this
// file is built with baseline flags) and called only where active_isa() says
// the CPU has it.
__attribute__((target("avx2"))) uint64_t sum_words_avx2(const unsigned char* p, int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + sum_words_generic(p + i, n - i);
}

__attribute__((target("avx512f"))) uint64_t sum_words_avx512(const unsigned char* p, int64_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 256 <= n; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 192));
  }
  for (; i + 64 <= n; i += 64) a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
  const __m512i s = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
  // Through memory rather than _mm512_reduce_add_epi64, whose GCC 12 header
  // trips -Wuninitialized.
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, s);
  uint64_t r = 0;
  for (uint64_t v : lanes) r += v;
  return r + sum_words_generic(p + i, n - i);
}
#endif

Isa chosen_isa() {
  // AVX2 and AVX-512F suffice for these loops; active_isa() asks for more,
  // so its choice is always safe here.
  return active_isa();
}

SumFn sum_fn() {
  static const SumFn fn = [] {
#if defined(JAX_LNGB_STREAM_X86)
    switch (chosen_isa()) {
      case Isa::kAvx512:
        return &sum_words_avx512;
      case Isa::kAvx2:
        return &sum_words_avx2;
      default:
        break;
    }
#endif
    return &sum_words_generic;
  }();
  return fn;
}

// Byte offset where task t of num_tasks starts inside a span of `bytes`.
int64_t slice_begin(int64_t bytes, int64_t t, int64_t num_tasks) {
  if (t >= num_tasks) return bytes;
  // bytes * t can overflow int64 only for buffers beyond 2^57 bytes.
  const int64_t b = bytes / num_tasks * t + bytes % num_tasks * t / num_tasks;
  return std::min(bytes, b / kSliceAlign * kSliceAlign);
}

}  // namespace

const char* stream_read_isa() {
#if defined(JAX_LNGB_STREAM_X86)
  const Isa isa = chosen_isa();
  if (isa == Isa::kAvx512 || isa == Isa::kAvx2) return isa_name(isa);
#endif
  return isa_name(Isa::kGeneric);
}

uint64_t stream_read(const StreamReadSpan* spans, int64_t count, const CpuExecutor& ex) {
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i) total += std::max<int64_t>(spans[i].bytes, 0);
  if (total == 0) return 0;
  // The kernels' sizing: about kTargetBlockBytes per task, at most
  // kMaxBlocksPerGroup tasks, and the executor decides how many threads
  // the bytes are worth.
  const int64_t num_tasks = std::clamp<int64_t>(total / kTargetBlockBytes, 1, kMaxBlocksPerGroup);
  const SumFn sum = sum_fn();
  std::array<uint64_t, kMaxBlocksPerGroup> partial{};  // no allocation per call
  ex.run(num_tasks, total, [&](int64_t t) {
    uint64_t acc = 0;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t n = std::max<int64_t>(spans[i].bytes, 0);
      const int64_t b0 = slice_begin(n, t, num_tasks), b1 = slice_begin(n, t + 1, num_tasks);
      if (b1 > b0) acc += sum(static_cast<const unsigned char*>(spans[i].data) + b0, b1 - b0);
    }
    partial[size_t(t)] = acc;
  });
  uint64_t s = 0;
  for (int64_t t = 0; t < num_tasks; ++t) s += partial[size_t(t)];
  return s;
}

}  // namespace jax_lngb
