// Reusable float32 scratch for kernel partials.
//
// One buffer per calling thread, grown on demand and kept, so steady-state
// calls neither allocate nor fault pages in. Concurrent kernel calls run on
// different XLA threads and get different buffers; tasks a call hands to
// helpers write into the caller's buffer while the caller waits.
#pragma once

#include <cstdint>
#include <vector>

namespace jax_lngb {

inline float* thread_workspace(int64_t floats) {
  thread_local std::vector<float> buf;
  if (int64_t(buf.size()) < floats) {
    buf.clear();
    buf.shrink_to_fit();
    buf.resize(size_t(floats));
  }
  return buf.data();
}

}  // namespace jax_lngb
