// The machine under the AscendC emulation: global memory regions, vector
// cores with their unified buffers (UB), kernel launches, and the faults a
// wrong kernel raises.
//
// A launch runs its cores one after another. That is a legal schedule of the
// hardware only if no core depends on another within the launch, so the
// emulation checks exactly that: every global-memory access is recorded per
// 32-byte block, and a block written by one core and read or written by
// another in the same launch is a fault (on the NPU it would be a race).
// Cross-core hand-offs must go through a second launch on the stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace jax_lngb::emu {

// What a kernel did wrong (UB overflow, misaligned or out-of-bounds access,
// queue misuse, a cross-core race). Surfaces in Python as
// jax_lngb.ascend_emu.KernelFault.
class KernelFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fault(const std::string& what);

// One allocation in global memory.
struct GmRegion {
  std::string name;
  std::vector<uint8_t> bytes;
  // Per 32-byte block, for the current launch: the core that wrote it (-1:
  // none) and the core that read it (-1: none, -2: several).
  std::vector<int32_t> writer;
  std::vector<int32_t> reader;
  uint8_t* data() { return bytes.data(); }
  size_t size() const { return bytes.size(); }
};

// Counters of one launch, summed over cores (peaks are maxima).
struct LaunchStats {
  uint32_t block_dim = 0;
  uint64_t ub_peak_bytes = 0;   // largest UB footprint of any core
  uint64_t gm_read_bytes = 0;   // DataCopy GM -> UB
  uint64_t gm_write_bytes = 0;  // DataCopy UB -> GM
  uint64_t data_copies = 0;
  uint64_t vector_ops = 0;
  uint64_t api_calls = 0;             // high-level API calls (LayerNormGradBeta, LayerNorm, LayerNormGrad, RmsNorm)
  uint32_t queue_buffers_cycled = 0;  // most distinct buffers one queue handed out (2: double buffering)
};

class Device;

// The state of the core currently running (thread local).
struct CoreState {
  Device* device = nullptr;
  uint32_t block_idx = 0;
  uint32_t block_num = 0;
  std::vector<uint8_t> ub;  // the unified buffer
  uint64_t ub_used = 0;     // bump allocator of TPipe::InitBuffer
  bool pipe_live = false;
  int64_t buffers_in_use = 0;               // queue buffers allocated and not freed
  uint32_t queue_buffers_per_pos[16] = {};  // InitBuffer'd queue buffers per TPosition
  LaunchStats* stats = nullptr;
};

CoreState& core();  // faults when no kernel is running
bool in_kernel();

class Device {
 public:
  // `npu_arch` (2002, 2201 or 3510, as __NPU_ARCH__) selects what differs
  // between architectures in the emulated AscendC: which of CANN's two
  // LayerNormGradBeta implementations runs (3510: the dav-3510 one, else the
  // common one).
  explicit Device(uint64_t ub_bytes, uint32_t npu_arch = 2201);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  uint64_t ub_bytes() const { return ub_bytes_; }
  uint32_t npu_arch() const { return npu_arch_; }

  // A global-memory allocation, filled with `fill` (0xFF bytes are NaN for
  // float and half: data nobody wrote shows up as NaN).
  GmRegion& alloc(const std::string& name, size_t bytes, uint8_t fill = 0xFF);

  // Runs `body` on cores 0..block_dim-1, in order (or reversed), each with a
  // fresh UB filled with NaN bytes. Faults are rethrown with the kernel name
  // and the core. Returns the launch's counters.
  LaunchStats launch(const std::string& kernel, uint32_t block_dim, const std::function<void()>& body,
                     bool reverse_order = false);

  // Global-memory access checks (bounds, then the cross-core race rule).
  GmRegion& region_of(const void* p, size_t bytes, const char* what);
  void record_gm(const void* p, size_t bytes, bool write, const char* what);

 private:
  uint64_t ub_bytes_;
  uint32_t npu_arch_;
  std::vector<std::unique_ptr<GmRegion>> regions_;
};

}  // namespace jax_lngb::emu
