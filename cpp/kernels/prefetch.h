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

}  // namespace jax_lngb
