// The streaming-read probe of the benchmark: reads every byte of a few
// buffers once, with the threads and the row-block sizing of the kernels, and
// does as little else as possible. Its bandwidth is the ceiling a
// memory-bound kernel reading the same bytes can reach.
//
// What it computes has to depend on every byte (or the compiler could skip
// loads) and has to be checkable (so a test can prove nothing was skipped):
// the wrapping 64-bit sum of every buffer read as little-endian 64-bit words,
// the last word of a buffer zero-padded. An integer add per loaded vector is
// the cheapest such use of the data, and it is exact, so the result does not
// depend on the number of threads or the instruction set.
#pragma once

#include <cstdint>

#include "kernels/base/executor.h"

namespace jax_lngb {

struct StreamReadSpan {
  const void* data = nullptr;
  int64_t bytes = 0;
};

// Reads spans[0..count) once; returns the wrapping sum of their 64-bit words.
// Every task reads the same fraction of every span, and reads its slices of
// them side by side (up to four at once), as a kernel reads its operands.
uint64_t stream_read(const StreamReadSpan* spans, int64_t count, const CpuExecutor& ex);

}  // namespace jax_lngb
