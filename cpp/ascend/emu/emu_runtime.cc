#include "ascend/emu/emu_runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>

namespace jax_lngb::emu {
namespace {

thread_local CoreState* g_core = nullptr;

constexpr size_t kBlock = 32;

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace

void fault(const std::string& what) { throw KernelFault(what); }

CoreState& core() {
  if (!g_core) fault("an AscendC call was made outside a kernel launch");
  return *g_core;
}

bool in_kernel() { return g_core != nullptr; }

Device::Device(uint64_t ub_bytes, uint32_t npu_arch) : ub_bytes_(ub_bytes), npu_arch_(npu_arch) {
  if (ub_bytes < 1024 || ub_bytes % kBlock != 0 || ub_bytes > (uint64_t(1) << 31))
    throw std::invalid_argument("ub_bytes must be a multiple of 32 in [1024, 2^31]; got " + std::to_string(ub_bytes));
  if (npu_arch != 2002 && npu_arch != 2201 && npu_arch != 3510)
    throw std::invalid_argument("npu_arch must be 2002, 2201 or 3510; got " + std::to_string(npu_arch));
}

GmRegion& Device::alloc(const std::string& name, size_t bytes, uint8_t fill) {
  auto r = std::make_unique<GmRegion>();
  r->name = name;
  // Alignment rules are checked on offsets into the region (device
  // allocations are at least 32-byte aligned), so host alignment is moot.
  r->bytes.assign(bytes, fill);
  const size_t blocks = (bytes + kBlock - 1) / kBlock;
  r->writer.assign(blocks, -1);
  r->reader.assign(blocks, -1);
  regions_.push_back(std::move(r));
  return *regions_.back();
}

GmRegion& Device::region_of(const void* p, size_t bytes, const char* what) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (auto& r : regions_) {
    const uint8_t* lo = r->data();
    const uint8_t* hi = lo + r->size();
    if (b >= lo && b <= hi) {
      if (bytes > size_t(hi - b))
        fault(std::string(what) + ": global memory access of " + std::to_string(bytes) + " bytes at offset " +
              std::to_string(b - lo) + " of '" + r->name + "' (" + std::to_string(r->size()) +
              " bytes) is out of bounds");
      return *r;
    }
  }
  fault(std::string(what) + ": address " + hex(p) + " is not in any global memory allocation");
}

void Device::record_gm(const void* p, size_t bytes, bool write, const char* what) {
  GmRegion& r = region_of(p, bytes, what);
  if (bytes == 0) return;
  const int32_t me = int32_t(core().block_idx);
  const size_t off = static_cast<const uint8_t*>(p) - r.data();
  for (size_t blk = off / kBlock; blk <= (off + bytes - 1) / kBlock; ++blk) {
    int32_t& w = r.writer[blk];
    int32_t& rd = r.reader[blk];
    if (w >= 0 && w != me)
      fault(std::string(what) + ": core " + std::to_string(me) + " " + (write ? "writes" : "reads") +
            " the 32-byte block at offset " + std::to_string(blk * kBlock) + " of '" + r.name + "' that core " +
            std::to_string(w) +
            " wrote in the same launch (a race on the NPU: hand results over through a second launch)");
    if (write) {
      if (rd == -2 || (rd >= 0 && rd != me))
        fault(std::string(what) + ": core " + std::to_string(me) + " writes the 32-byte block at offset " +
              std::to_string(blk * kBlock) + " of '" + r.name +
              "' that another core read in the same launch (a race on the NPU)");
      w = me;
    } else {
      rd = (rd == -1 || rd == me) ? me : -2;
    }
  }
}

LaunchStats Device::launch(const std::string& kernel, uint32_t block_dim, const std::function<void()>& body,
                           bool reverse_order) {
  if (block_dim < 1 || block_dim > 65535)
    throw std::invalid_argument(kernel + ": block_dim must be in [1, 65535]; got " + std::to_string(block_dim));
  if (g_core) throw std::logic_error(kernel + ": nested kernel launch");
  LaunchStats stats;
  stats.block_dim = block_dim;
  for (auto& r : regions_) {
    std::fill(r->writer.begin(), r->writer.end(), -1);
    std::fill(r->reader.begin(), r->reader.end(), -1);
  }
  CoreState st;
  st.device = this;
  st.block_num = block_dim;
  st.stats = &stats;
  for (uint32_t i = 0; i < block_dim; ++i) {
    st.block_idx = reverse_order ? block_dim - 1 - i : i;
    st.ub.assign(ub_bytes_, 0xFF);
    st.ub_used = 0;
    st.pipe_live = false;
    st.buffers_in_use = 0;
    std::fill(std::begin(st.queue_buffers_per_pos), std::end(st.queue_buffers_per_pos), 0u);
    g_core = &st;
    try {
      body();
      if (st.buffers_in_use != 0)
        fault(std::to_string(st.buffers_in_use) +
              " queue buffer(s) still allocated when the kernel returned (missing FreeTensor)");
    } catch (const KernelFault& e) {
      g_core = nullptr;
      throw KernelFault(kernel + " [core " + std::to_string(st.block_idx) + " of " + std::to_string(block_dim) +
                        "]: " + e.what());
    } catch (...) {
      g_core = nullptr;
      throw;
    }
    g_core = nullptr;
    stats.ub_peak_bytes = std::max(stats.ub_peak_bytes, st.ub_used);
  }
  return stats;
}

}  // namespace jax_lngb::emu
