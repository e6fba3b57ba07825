// Software prefetch of input streams, shared by the row kernels and the
// gamma/beta reduction.
//
// The hardware prefetchers stop at every 4 KiB page, and a kernel whose
// memory-reading pass alternates with passes that run from cache (the row
// kernels), or that carries few bytes per instruction (16-bit rows), leaves
// the memory system idle meanwhile. Such a kernel requests the data
// kPrefetchBytes further along each input. The request goes into L2
// (prefetcht2), measured faster than into L1. The address is formed as an
// integer: it may lie past the end of the buffer, and a prefetch never
// faults.
#pragma once

#include <cstdint>

namespace jax_lngb {

inline constexpr int64_t kPrefetchBytes = 4096;

template <typename T>
inline void prefetch_ahead(const T* p) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + kPrefetchBytes), 0, 1);
}

// The line holding p, into L2 as above: for a kernel that knows which lines
// it reads next.
inline void prefetch_line(const void* p) { __builtin_prefetch(p, 0, 1); }

// prefetch_ahead for element c of a row segment of `cols` elements that is
// not the whole row (a column chunk): where kPrefetchBytes further on lies
// past the segment's end, the request goes that far into the segment `next`
// elements on instead, the one read after this (the same columns some rows
// down), rather than into columns another task reads.
template <typename T>
inline void prefetch_ahead_in(const T* row, int64_t c, int64_t cols, int64_t next) {
  int64_t at = c + kPrefetchBytes / int64_t(sizeof(T));
  if (at >= cols) at += next - cols;
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(row) + uintptr_t(at) * sizeof(T)), 0, 1);
}

}  // namespace jax_lngb
