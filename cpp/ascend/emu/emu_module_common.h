// What the nanobind bindings of `jax_lngb._ascend_emu` share: bytes in and
// out, the launch counters as a dict, FFI handler capsules, and running an
// emulation with the GIL released.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "ascend/emu/emu_runtime.h"
#include "xla/ffi/api/c_api.h"

namespace jax_lngb::emu {

inline const uint8_t* data_of(const nanobind::bytes& b) { return reinterpret_cast<const uint8_t*>(b.c_str()); }

inline nanobind::bytes to_bytes(const std::vector<uint8_t>& v) {
  return nanobind::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

// The counters of one launch. `with_op_counts` adds the DataCopy and vector
// instruction counts, which only the LayerNormGradBeta bindings report.
inline nanobind::dict stats_dict(const LaunchStats& s, bool with_op_counts) {
  nanobind::dict d;
  d["block_dim"] = s.block_dim;
  d["ub_peak_bytes"] = s.ub_peak_bytes;
  d["gm_read_bytes"] = s.gm_read_bytes;
  d["gm_write_bytes"] = s.gm_write_bytes;
  if (with_op_counts) {
    d["data_copies"] = s.data_copies;
    d["vector_ops"] = s.vector_ops;
  }
  d["api_calls"] = s.api_calls;
  d["queue_buffers_cycled"] = s.queue_buffers_cycled;
  return d;
}

// An XLA FFI handler as the capsule jax.ffi.register_ffi_target takes.
inline nanobind::capsule ffi_capsule(XLA_FFI_Error* (*handler)(XLA_FFI_CallFrame*)) {
  return nanobind::capsule(reinterpret_cast<void*>(handler));
}

// Runs `run(args...)` with the GIL released: the emulation is pure C++ and
// may take long, so other Python threads keep running meanwhile.
template <class Run, class... Args>
auto without_gil(Run&& run, Args&&... args) {
  nanobind::gil_scoped_release release;
  return run(std::forward<Args>(args)...);
}

}  // namespace jax_lngb::emu
