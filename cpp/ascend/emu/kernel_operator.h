// The AscendC subset our kernels use, emulated on the host so that the same
// kernel source compiles with g++ and runs on the CPU.
//
// Exactly what the kernels need, with the hardware's rules enforced:
// GlobalTensor / LocalTensor, TPipe / TQue / TBuf on a unified buffer of
// fixed capacity, DataCopy (32-byte aligned UB addresses, lengths in whole
// 32-byte blocks, bounds), the count-based vector ops used (Add, Mul, Adds,
// Duplicate, Cast with 32-byte aligned operands), GetBlockIdx / GetBlockNum,
// `half` as _Float16, and LayerNormGradBeta with CANN's semantics (fp32
// products, rows added in row order, the half result rounded to nearest
// even). Any violation raises jax_lngb::emu::KernelFault.
//
// The emulated LayerNormGradBeta follows CANN's two implementations, picked
// by the device's architecture as CANN picks them by __NPU_ARCH__:
//   common (dav-2002, dav-2201; layernormgradbeta_common_impl.h): per
//     chunk of oneCalSize elements a product into the scratch (or over
//     resForGamma with isReuseSource), then row-by-row adds of
//     originalHLength elements with originalHLength as the row stride;
//   3510 (dav-3510; layernormgradbeta_3510_impl.h): per 64-column vector
//     register, sums from zero over bsLength rows strided by hLength, read
//     in place; sharedTmpBuffer, oneCalSize, loopRound and originalHLength
//     are ignored, and the row counter is a uint16_t.
// Both give the same bits for a call both handle: fp32 products, rows
// added in row order.
//
// LayerNorm, LayerNormGrad and RmsNorm ([B, S, H] forms) follow CANN's
// dav-2002/dav-2201 implementations step by step: see emu_norm_apis.h.
// Tensors carry the TPosition of the queue or buffer that made them.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "ascend/emu/emu_runtime.h"

#define __global__
#define __aicore__
#define __gm__
#define GM_ADDR uint8_t*
#define KERNEL_TASK_TYPE_DEFAULT(type) ((void)0)

using half = _Float16;

enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL };

// kernel_tiling.h's struct, as CANN generates it for the device.
struct LayerNormGradBetaTiling {
  uint32_t stackBufferSize = 0;
  uint32_t bLength = 0;
  uint32_t sLength = 0;
  uint32_t hLength = 0;
  uint32_t originalHLength = 0;
  uint32_t bshLength = 0;
  uint32_t bsLength = 0;
  uint32_t oneCalSize = 0;
  uint32_t numberOfTmpBuf = 0;
  uint32_t loopRound = 0;
  uint32_t inputTailSize = 0;
  uint32_t inputTailPos = 0;
  uint32_t bsTailSize = 0;
  uint32_t bshCurLength = 0;
  uint32_t bsCurLength = 0;
  uint32_t gammaTempTensorPos = 0;
  uint32_t betaTempTensorPos = 0;
  uint32_t inputDyTmpTensorPos = 0;
  uint32_t resForGammaTmpTensorPos = 0;
  uint32_t reserved = 0;
};

namespace AscendC {

enum class TPosition : uint8_t {
  GM = 0,
  VECIN = 1,
  VECOUT = 2,
  VECCALC = 3,
  // The other memories of an AI core (L1, L0A/B/C, ...). Tensors there are
  // never in the unified buffer: a vector instruction, a UB copy or a
  // high-level API given one faults. LCM is VECCALC, as in CANN.
  A1,
  A2,
  B1,
  B2,
  C1,
  C2,
  CO1,
  CO2,
  SPM,
  TSCM,
  LCM = VECCALC,
  SHM = SPM,
};
using QuePosition = TPosition;

// kernel_struct_data_copy.h's layouts (LayerNormGradShapeInfo names one).
enum class DataFormat : uint8_t { ND = 0, NZ, NCHW, NC1HWC0, NHWC, NCDHW, NDC1HWC0, FRACTAL_Z_3D };

enum class RoundMode { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

template <typename T, typename U>
struct IsSameType {
  static constexpr bool value = std::is_same<T, U>::value;
};

inline int64_t GetBlockIdx() { return jax_lngb::emu::core().block_idx; }
inline int64_t GetBlockNum() { return jax_lngb::emu::core().block_num; }

// The emulation is sequential: every pipe is always drained.
template <pipe_t pipe>
inline void PipeBarrier() {}

namespace emu_detail {

using jax_lngb::emu::core;
using jax_lngb::emu::fault;

constexpr uint32_t kUbAlign = 32;
constexpr uint32_t kMaxQueueBuffersPerPosition = 8;  // hardware sync event IDs (A2/A3, inference AI Core)

template <typename T>
constexpr const char* type_name() {
  if constexpr (std::is_same<T, float>::value)
    return "float";
  else if constexpr (std::is_same<T, half>::value)
    return "half";
  else if constexpr (std::is_same<T, uint8_t>::value)
    return "uint8_t";
  else if constexpr (std::is_same<T, uint32_t>::value)
    return "uint32_t";
  else
    return "T";
}

// One UB buffer: a queue buffer or a TBuf.
struct Slot {
  enum State { kFree, kAllocated, kEnqueued, kDequeued, kFixed };
  uint32_t offset = 0;  // bytes from the UB start
  uint32_t len = 0;     // bytes
  State state = kFree;
  uint64_t gen = 0;  // bumped by FreeTensor: older tensors are stale
  bool used = false;
};

inline uint32_t ub_alloc(uint64_t len, const char* what) {
  auto& c = core();
  if (!c.pipe_live) fault(std::string(what) + " without a live TPipe");
  const uint64_t aligned = (len + kUbAlign - 1) / kUbAlign * kUbAlign;  // InitBuffer rounds up to 32 bytes
  if (c.ub_used + aligned > c.ub.size())
    fault(std::string("unified buffer overflow: ") + what + " needs " + std::to_string(aligned) + " bytes at offset " +
          std::to_string(c.ub_used) + ", the unified buffer has " + std::to_string(c.ub.size()) + " bytes");
  const uint32_t off = uint32_t(c.ub_used);
  c.ub_used += aligned;
  if (c.stats) c.stats->ub_peak_bytes = std::max<uint64_t>(c.stats->ub_peak_bytes, c.ub_used);
  return off;
}

constexpr bool is_ub_position(TPosition p) {
  return p == TPosition::VECIN || p == TPosition::VECOUT || p == TPosition::VECCALC;
}

inline const char* position_name(TPosition p) {
  switch (p) {
    case TPosition::GM:
      return "GM";
    case TPosition::VECIN:
      return "VECIN";
    case TPosition::VECOUT:
      return "VECOUT";
    case TPosition::VECCALC:
      return "VECCALC";
    case TPosition::A1:
      return "A1";
    case TPosition::A2:
      return "A2";
    case TPosition::B1:
      return "B1";
    case TPosition::B2:
      return "B2";
    case TPosition::C1:
      return "C1";
    case TPosition::C2:
      return "C2";
    case TPosition::CO1:
      return "CO1";
    case TPosition::CO2:
      return "CO2";
    case TPosition::SPM:
      return "SPM";
    case TPosition::TSCM:
      return "TSCM";
  }
  return "?";
}

inline void count_vector_op() {
  auto& c = core();
  if (c.stats) ++c.stats->vector_ops;
}

}  // namespace emu_detail

template <TPosition pos, int32_t depth>
class TQue;
template <TPosition pos>
class TBuf;

// ----------------------------------------------------------------- tensors

template <typename T>
class LocalTensor {
 public:
  using PrimType = T;
  LocalTensor() = default;

  LocalTensor operator[](uint32_t offset) const {
    if (offset > size_)
      emu_detail::fault("LocalTensor[" + std::to_string(offset) + "] is past the end of a tensor of " +
                        std::to_string(size_) + " elements");
    LocalTensor t = *this;
    t.byte_off_ += offset * uint32_t(sizeof(T));
    t.size_ -= offset;
    return t;
  }

  uint32_t GetSize() const { return size_; }
  int32_t GetPosition() const { return static_cast<int32_t>(pos_); }

  template <typename U>
  LocalTensor<U> ReinterpretCast() const {
    LocalTensor<U> t;
    t.slot_ = slot_;
    t.gen_ = gen_;
    t.pos_ = pos_;
    t.byte_off_ = byte_off_;
    t.size_ = uint32_t(uint64_t(size_) * sizeof(T) / sizeof(U));
    return t;
  }

  T GetValue(uint32_t i) const {
    T v;
    std::memcpy(&v, emu_ptr(i, 1, "LocalTensor::GetValue", false), sizeof(T));
    return v;
  }
  void SetValue(uint32_t i, T v) const { std::memcpy(emu_ptr(i, 1, "LocalTensor::SetValue", false), &v, sizeof(T)); }

  // Emulation internals: a checked pointer to `count` elements from the
  // start (vector instructions and DataCopy need a 32-byte aligned start).
  T* emu_span(uint64_t count, const char* op) const { return emu_ptr(0, count, op, true); }
  uint32_t emu_offset() const { return byte_off_; }
  TPosition emu_position() const { return pos_; }
  bool emu_bound() const { return slot_ != nullptr; }
  // A tensor over a buffer the emulation itself manages (the temporary
  // space the framework hands a high-level API called without one).
  static LocalTensor emu_make(emu_detail::Slot* slot, TPosition pos, uint32_t byte_off, uint32_t elems) {
    LocalTensor t;
    t.slot_ = slot;
    t.gen_ = slot->gen;
    t.pos_ = pos;
    t.byte_off_ = byte_off;
    t.size_ = elems;
    return t;
  }

 private:
  template <typename>
  friend class LocalTensor;
  template <TPosition, int32_t>
  friend class TQue;
  template <TPosition>
  friend class TBuf;

  T* emu_ptr(uint64_t first, uint64_t count, const char* op, bool aligned) const {
    using emu_detail::Slot;
    if (!slot_) emu_detail::fault(std::string(op) + ": LocalTensor does not refer to a buffer");
    if (slot_->gen != gen_) emu_detail::fault(std::string(op) + ": LocalTensor used after FreeTensor");
    if (slot_->state == Slot::kEnqueued)
      emu_detail::fault(std::string(op) + ": LocalTensor used while it sits in a queue (between EnQue and DeQue)");
    if (slot_->state == Slot::kFree) emu_detail::fault(std::string(op) + ": LocalTensor of a free queue buffer");
    if (!emu_detail::is_ub_position(pos_))
      emu_detail::fault(std::string(op) + ": LocalTensor in TPosition::" + emu_detail::position_name(pos_) +
                        " is not in the unified buffer (vector instructions reach VECIN/VECOUT/VECCALC only)");
    if (aligned && byte_off_ % emu_detail::kUbAlign != 0)
      emu_detail::fault(std::string(op) + ": unified-buffer address " + std::to_string(byte_off_) +
                        " is not 32-byte aligned");
    if (first + count > size_)
      emu_detail::fault(std::string(op) + ": " + std::to_string(count) + " " + emu_detail::type_name<T>() +
                        " elements from element " + std::to_string(first) + " run past the end of a LocalTensor of " +
                        std::to_string(size_) + " elements");
    return reinterpret_cast<T*>(emu_detail::core().ub.data() + byte_off_) + first;
  }

  emu_detail::Slot* slot_ = nullptr;
  uint64_t gen_ = 0;
  TPosition pos_ = TPosition::GM;  // of the TQue/TBuf that handed it out
  uint32_t byte_off_ = 0;
  uint32_t size_ = 0;  // elements
};

template <typename T>
class GlobalTensor {
 public:
  using PrimType = T;
  GlobalTensor() = default;

  void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize) {
    auto& dev = *emu_detail::core().device;
    if (bufferSize > (uint64_t(1) << 48) / sizeof(T))
      emu_detail::fault("GlobalTensor::SetGlobalBuffer: " + std::to_string(bufferSize) + " elements is absurd");
    auto& r = dev.region_of(buffer, bufferSize * sizeof(T), "GlobalTensor::SetGlobalBuffer");
    const auto off = reinterpret_cast<const uint8_t*>(buffer) - r.data();
    if (off % sizeof(T) != 0)
      emu_detail::fault("GlobalTensor::SetGlobalBuffer: address at offset " + std::to_string(off) + " of '" + r.name +
                        "' is not aligned to sizeof(" + emu_detail::type_name<T>() + ")");
    base_ = buffer;
    size_ = bufferSize;
  }

  GlobalTensor operator[](uint64_t offset) const {
    if (!base_) emu_detail::fault("GlobalTensor[] before SetGlobalBuffer");
    if (offset > size_)
      emu_detail::fault("GlobalTensor[" + std::to_string(offset) + "] is past the end of a tensor of " +
                        std::to_string(size_) + " elements");
    GlobalTensor t = *this;
    t.base_ += offset;
    t.size_ -= offset;
    return t;
  }

  uint64_t GetSize() const { return size_; }
  __gm__ T* GetPhyAddr() const { return base_; }

  T GetValue(uint64_t i) const {
    T v;
    std::memcpy(&v, emu_ptr(i, 1, "GlobalTensor::GetValue", false), sizeof(T));
    return v;
  }
  void SetValue(uint64_t i, T v) const { std::memcpy(emu_ptr(i, 1, "GlobalTensor::SetValue", true), &v, sizeof(T)); }

  T* emu_span(uint64_t count, const char* op, bool write) const { return emu_ptr(0, count, op, write); }

 private:
  T* emu_ptr(uint64_t first, uint64_t count, const char* op, bool write) const {
    if (!base_) emu_detail::fault(std::string(op) + ": GlobalTensor used before SetGlobalBuffer");
    if (first + count > size_)
      emu_detail::fault(std::string(op) + ": " + std::to_string(count) + " elements from element " +
                        std::to_string(first) + " run past the end of a GlobalTensor of " + std::to_string(size_) +
                        " elements");
    emu_detail::core().device->record_gm(base_ + first, count * sizeof(T), write, op);
    return base_ + first;
  }

  T* base_ = nullptr;
  uint64_t size_ = 0;
};

// ------------------------------------------------------ buffers and queues

template <TPosition pos, int32_t depth>
class TQue {
  static_assert(pos == TPosition::VECIN || pos == TPosition::VECOUT, "only VECIN/VECOUT queues are emulated");
  static_assert(depth >= 1, "queue depth must be >= 1 (depth 0, in-place queues, is not emulated)");

 public:
  TQue() = default;
  TQue(const TQue&) = delete;
  TQue& operator=(const TQue&) = delete;

  template <typename T>
  LocalTensor<T> AllocTensor() {
    using emu_detail::Slot;
    if (slots_.empty()) emu_detail::fault("TQue::AllocTensor before TPipe::InitBuffer");
    Slot& s = slots_[next_];
    if (s.state != Slot::kFree)
      emu_detail::fault("TQue::AllocTensor: all " + std::to_string(slots_.size()) +
                        " buffers of the queue are in use (the core would wait forever)");
    next_ = (next_ + 1) % slots_.size();
    s.state = Slot::kAllocated;
    if (!s.used) {
      s.used = true;
      ++cycled_;
      auto& c = emu_detail::core();
      if (c.stats) c.stats->queue_buffers_cycled = std::max(c.stats->queue_buffers_cycled, cycled_);
    }
    ++emu_detail::core().buffers_in_use;
    return make<T>(s);
  }

  template <typename T>
  bool EnQue(const LocalTensor<T>& t) {
    using emu_detail::Slot;
    Slot* s = own(t, "TQue::EnQue");
    if (s->state != Slot::kAllocated) emu_detail::fault("TQue::EnQue of a tensor that is not freshly allocated");
    if (fifo_.size() >= size_t(depth))
      emu_detail::fault("TQue::EnQue: queue depth " + std::to_string(depth) + " exceeded");
    s->state = Slot::kEnqueued;
    fifo_.push_back(s);
    return true;
  }

  template <typename T>
  LocalTensor<T> DeQue() {
    using emu_detail::Slot;
    if (fifo_.empty()) emu_detail::fault("TQue::DeQue on an empty queue (the core would wait forever)");
    Slot* s = fifo_.front();
    fifo_.pop_front();
    s->state = Slot::kDequeued;
    return make<T>(*s);
  }

  template <typename T>
  void FreeTensor(LocalTensor<T>& t) {
    using emu_detail::Slot;
    Slot* s = own(t, "TQue::FreeTensor");
    if (s->state == Slot::kEnqueued) emu_detail::fault("TQue::FreeTensor of a tensor still in the queue");
    s->state = Slot::kFree;
    ++s->gen;
    --emu_detail::core().buffers_in_use;
  }

  void emu_init(uint8_t num, uint32_t len) {
    if (!slots_.empty()) emu_detail::fault("TPipe::InitBuffer called twice for one queue");
    if (num < 1) emu_detail::fault("TPipe::InitBuffer: a queue needs at least one buffer");
    auto& per_pos = emu_detail::core().queue_buffers_per_pos[int(pos)];
    if (per_pos + num > emu_detail::kMaxQueueBuffersPerPosition)
      emu_detail::fault("TPipe::InitBuffer: more than " + std::to_string(emu_detail::kMaxQueueBuffersPerPosition) +
                        " queue buffers on one TPosition (the hardware has 8 sync events)");
    per_pos += num;
    const uint32_t aligned = (len + emu_detail::kUbAlign - 1) / emu_detail::kUbAlign * emu_detail::kUbAlign;
    const uint32_t base = emu_detail::ub_alloc(uint64_t(num) * aligned, "TPipe::InitBuffer(TQue)");
    slots_.resize(num);
    for (uint8_t i = 0; i < num; ++i) {
      slots_[i].offset = base + i * aligned;
      slots_[i].len = aligned;
    }
  }

 private:
  template <typename T>
  LocalTensor<T> make(emu_detail::Slot& s) {
    LocalTensor<T> t;
    t.slot_ = &s;
    t.gen_ = s.gen;
    t.pos_ = pos;
    t.byte_off_ = s.offset;
    t.size_ = s.len / uint32_t(sizeof(T));
    return t;
  }

  template <typename T>
  emu_detail::Slot* own(const LocalTensor<T>& t, const char* op) {
    for (auto& s : slots_)
      if (&s == t.slot_) {
        if (t.gen_ != s.gen) emu_detail::fault(std::string(op) + ": tensor already freed");
        if (t.byte_off_ != s.offset) emu_detail::fault(std::string(op) + ": not the tensor AllocTensor returned");
        return &s;
      }
    emu_detail::fault(std::string(op) + ": tensor does not belong to this queue");
  }

  std::vector<emu_detail::Slot> slots_;
  std::deque<emu_detail::Slot*> fifo_;
  size_t next_ = 0;
  uint32_t cycled_ = 0;
};

template <TPosition pos>
class TBuf {
 public:
  TBuf() = default;
  TBuf(const TBuf&) = delete;
  TBuf& operator=(const TBuf&) = delete;

  template <typename T>
  LocalTensor<T> Get() {
    return Get<T>(slot_.len / uint32_t(sizeof(T)));
  }

  template <typename T>
  LocalTensor<T> Get(uint32_t len) {
    if (slot_.state != emu_detail::Slot::kFixed) emu_detail::fault("TBuf::Get before TPipe::InitBuffer");
    if (uint64_t(len) * sizeof(T) > slot_.len)
      emu_detail::fault("TBuf::Get(" + std::to_string(len) + ") exceeds the buffer of " + std::to_string(slot_.len) +
                        " bytes");
    LocalTensor<T> t;
    t.slot_ = &slot_;
    t.gen_ = slot_.gen;
    t.pos_ = pos;
    t.byte_off_ = slot_.offset;
    t.size_ = len;
    return t;
  }

  void emu_init(uint32_t len) {
    if (slot_.state == emu_detail::Slot::kFixed) emu_detail::fault("TPipe::InitBuffer called twice for one TBuf");
    // A buffer outside the unified buffer takes no UB space; its tensors
    // fault on any access (see LocalTensor::emu_ptr).
    slot_.offset = emu_detail::is_ub_position(pos) ? emu_detail::ub_alloc(len, "TPipe::InitBuffer(TBuf)") : 0;
    slot_.len = (len + emu_detail::kUbAlign - 1) / emu_detail::kUbAlign * emu_detail::kUbAlign;
    slot_.state = emu_detail::Slot::kFixed;
  }

 private:
  emu_detail::Slot slot_;
};

class TPipe {
 public:
  TPipe() {
    auto& c = emu_detail::core();
    if (c.pipe_live) emu_detail::fault("a second TPipe on one core");
    c.pipe_live = true;
    c.ub_used = 0;
  }
  ~TPipe() {
    if (jax_lngb::emu::in_kernel()) emu_detail::core().pipe_live = false;
  }
  TPipe(const TPipe&) = delete;
  TPipe& operator=(const TPipe&) = delete;

  template <class Q>
  bool InitBuffer(Q& que, uint8_t num, uint32_t len) {
    que.emu_init(num, len);
    return true;
  }
  template <TPosition P>
  bool InitBuffer(TBuf<P>& buf, uint32_t len) {
    buf.emu_init(len);
    return true;
  }
};

// ------------------------------------------------------------ data movement

namespace emu_detail {
template <typename T>
void check_copy_len(uint32_t count, const char* op) {
  if ((uint64_t(count) * sizeof(T)) % kUbAlign != 0)
    fault(std::string(op) + ": " + std::to_string(count) + " " + type_name<T>() + " elements are " +
          std::to_string(uint64_t(count) * sizeof(T)) +
          " bytes, not a multiple of 32 (the hardware would drop the remainder)");
}
inline void count_copy(uint64_t bytes, bool to_gm) {
  auto& c = core();
  if (!c.stats) return;
  ++c.stats->data_copies;
  (to_gm ? c.stats->gm_write_bytes : c.stats->gm_read_bytes) += bytes;
}
}  // namespace emu_detail

template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count) {
  emu_detail::check_copy_len<T>(count, "DataCopy GM->UB");
  T* d = dst.emu_span(count, "DataCopy GM->UB");
  const T* s = src.emu_span(count, "DataCopy GM->UB", false);
  std::memcpy(d, s, size_t(count) * sizeof(T));
  emu_detail::count_copy(uint64_t(count) * sizeof(T), false);
}

template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count) {
  emu_detail::check_copy_len<T>(count, "DataCopy UB->GM");
  const T* s = src.emu_span(count, "DataCopy UB->GM");
  T* d = dst.emu_span(count, "DataCopy UB->GM", true);
  std::memcpy(d, s, size_t(count) * sizeof(T));
  emu_detail::count_copy(uint64_t(count) * sizeof(T), true);
}

// --------------------------------------------------------------- vector ops

namespace emu_detail {

inline uint32_t check_count(int64_t count, const char* op) {
  if (count < 0) fault(std::string(op) + ": negative element count " + std::to_string(count));
  return uint32_t(count);
}

// Operands may coincide exactly (in-place) but not partially overlap.
template <typename D, typename S>
void check_overlap(const LocalTensor<D>& d, uint64_t nd, const LocalTensor<S>& s, uint64_t ns, const char* op) {
  const uint64_t d0 = d.emu_offset(), d1 = d0 + nd * sizeof(D);
  const uint64_t s0 = s.emu_offset(), s1 = s0 + ns * sizeof(S);
  if (d0 != s0 && d0 < s1 && s0 < d1)
    fault(std::string(op) + ": destination and source partially overlap in the unified buffer");
}

template <typename T>
void binary(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int64_t count, const char* op,
            T (*f)(T, T)) {
  static_assert(std::is_same<T, float>::value, "only float vector arithmetic is emulated");
  const uint32_t n = check_count(count, op);
  if (n == 0) return;  // a NOP on dav-2201
  check_overlap(dst, n, a, n, op);
  check_overlap(dst, n, b, n, op);
  T* d = dst.emu_span(n, op);
  const T* x = a.emu_span(n, op);
  const T* y = b.emu_span(n, op);
  for (uint32_t i = 0; i < n; ++i) d[i] = f(x[i], y[i]);
  count_vector_op();
}

}  // namespace emu_detail

template <typename T>
void Add(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count) {
  emu_detail::binary<T>(dst, src0, src1, count, "Add", [](T x, T y) { return x + y; });
}

template <typename T>
void Mul(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count) {
  emu_detail::binary<T>(dst, src0, src1, count, "Mul", [](T x, T y) { return x * y; });
}

template <typename T>
void Adds(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar, const int32_t& count) {
  static_assert(std::is_same<T, float>::value, "only float vector arithmetic is emulated");
  const uint32_t n = emu_detail::check_count(count, "Adds");
  if (n == 0) return;
  emu_detail::check_overlap(dst, n, src, n, "Adds");
  T* d = dst.emu_span(n, "Adds");
  const T* s = src.emu_span(n, "Adds");
  for (uint32_t i = 0; i < n; ++i) d[i] = s[i] + scalar;
  emu_detail::count_vector_op();
}

template <typename T>
void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count) {
  const uint32_t n = emu_detail::check_count(count, "Duplicate");
  if (n == 0) return;
  T* d = dst.emu_span(n, "Duplicate");
  for (uint32_t i = 0; i < n; ++i) d[i] = scalarValue;
  emu_detail::count_vector_op();
}

// half -> float (exact, CAST_NONE) and float -> half (round to nearest even:
// CAST_RINT, or CAST_NONE, which means RINT for a lossy conversion).
// Overflow follows IEEE (to infinity), like NumPy; see the module notes.
template <typename D, typename S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& roundMode, const uint32_t count) {
  constexpr bool up = std::is_same<D, float>::value && std::is_same<S, half>::value;
  constexpr bool down = std::is_same<D, half>::value && std::is_same<S, float>::value;
  static_assert(up || down, "only half <-> float casts are emulated");
  if constexpr (up) {
    if (roundMode != RoundMode::CAST_NONE) emu_detail::fault("Cast half->float supports CAST_NONE only");
  } else {
    if (roundMode != RoundMode::CAST_NONE && roundMode != RoundMode::CAST_RINT)
      emu_detail::fault("Cast float->half: only CAST_NONE/CAST_RINT are emulated");
  }
  if (count == 0) return;
  emu_detail::check_overlap(dst, count, src, count, "Cast");
  D* d = dst.emu_span(count, "Cast");
  const S* s = src.emu_span(count, "Cast");
  for (uint32_t i = 0; i < count; ++i) d[i] = static_cast<D>(s[i]);  // GCC: IEEE, round to nearest even
  emu_detail::count_vector_op();
}

// ------------------------------------------------------- LayerNormGradBeta

namespace emu_detail {

struct GradBetaParams {
  uint32_t bshCurLength = 0;
  uint32_t bsCurLength = 0;
  uint32_t hCurLength = 0;
  LocalTensor<float> gammaTemp;
  LocalTensor<float> betaTemp;
  LocalTensor<float> inputDyTmp;
  LocalTensor<float> resForGammaTmp;
};

// dst (H) = sum of the first `rows` rows of src (row stride h), in row
// order; with `clear` the first row initialises dst (as src + 0).
inline void reduce_rows(const LocalTensor<float>& dst, const LocalTensor<float>& src, uint32_t rows, uint32_t h,
                        bool clear) {
  uint32_t r = 0;
  if (clear) {
    Adds(dst, src, 0.0f, int32_t(h));
    r = 1;
  }
  for (; r < rows; ++r) Add(dst, src[r * h], dst, int32_t(h));
}

inline void compute_chunk(const LocalTensor<float>& res, const LocalTensor<float>& dy,
                          const LocalTensor<float>& pdGamma, const LocalTensor<float>& pdBeta, const GradBetaParams& p,
                          bool clear) {
  Mul(p.resForGammaTmp, dy, res, int32_t(p.bshCurLength));  // fp32 products
  reduce_rows(pdGamma, p.resForGammaTmp, p.bsCurLength, p.hCurLength, clear);
  reduce_rows(pdBeta, dy, p.bsCurLength, p.hCurLength, clear);
}

inline void compute_chunk(const LocalTensor<half>& res, const LocalTensor<half>& dy, const LocalTensor<half>& pdGamma,
                          const LocalTensor<half>& pdBeta, const GradBetaParams& p, bool clear) {
  // Up-cast both inputs, reduce in fp32 into the scratch accumulators, and
  // round the running sums back to half.
  Cast(p.inputDyTmp, dy, RoundMode::CAST_NONE, p.bshCurLength);
  Cast(p.resForGammaTmp, res, RoundMode::CAST_NONE, p.bshCurLength);
  compute_chunk(p.resForGammaTmp, p.inputDyTmp, p.gammaTemp, p.betaTemp, p, clear);
  Cast(pdGamma, p.gammaTemp, RoundMode::CAST_NONE, p.hCurLength);
  Cast(pdBeta, p.betaTemp, RoundMode::CAST_NONE, p.hCurLength);
}

// fp32 -> half as the 3510 implementation stores it: round to nearest even
// with saturation (CastTrait SatMode::SAT): a finite sum beyond the half
// range becomes +-65504. NaN and infinities pass through unchanged (the
// emulation's assumption: the headers do not say).
inline half saturate_to_half(float v) {
  constexpr float kMax = 65504.0f;
  if (v != v || v == __builtin_inff() || v == -__builtin_inff()) return static_cast<half>(v);
  const half h = static_cast<half>(v);
  if (static_cast<float>(h) > kMax) return static_cast<half>(kMax);
  if (static_cast<float>(h) < -kMax) return static_cast<half>(-kMax);
  return h;
}

template <typename T>
void grad_beta_3510(const LocalTensor<T>& pdGamma, const LocalTensor<T>& pdBeta, const LocalTensor<T>& res,
                    const LocalTensor<T>& dy, const LayerNormGradBetaTiling& tiling) {
  const uint32_t h = tiling.hLength;
  const uint32_t rows = tiling.bsLength;
  if ((uint64_t(h) * sizeof(T)) % kUbAlign != 0)
    fault("LayerNormGradBeta (3510): hLength * sizeof(T) must be a multiple of 32; got hLength = " + std::to_string(h));
  if (rows > 65535)
    fault("LayerNormGradBeta (3510): bsLength = " + std::to_string(rows) +
          " rows, but this implementation counts rows in a uint16_t: a call with more than 65535 rows "
          "never ends");
  const uint64_t n = uint64_t(rows) * h;
  const T* r = res.emu_span(n, "LayerNormGradBeta (3510) resForGamma");
  const T* d = dy.emu_span(n, "LayerNormGradBeta (3510) inputDy");
  T* g = pdGamma.emu_span(h, "LayerNormGradBeta (3510) outputPdGamma");
  T* b = pdBeta.emu_span(h, "LayerNormGradBeta (3510) outputPdBeta");
  constexpr uint32_t kLanes = 64;  // GetVecLen() / sizeof(float): 256-byte registers
  for (uint32_t c0 = 0; c0 < h; c0 += kLanes) {
    const uint32_t lanes = h - c0 < kLanes ? h - c0 : kLanes;
    float acc_g[kLanes], acc_b[kLanes], prod[kLanes];
    for (uint32_t i = 0; i < lanes; ++i) acc_g[i] = acc_b[i] = 0.0f;  // Duplicate(0)
    for (uint16_t j = 0; j < rows; ++j) {
      const T* rr = r + uint64_t(j) * h + c0;
      const T* dr = d + uint64_t(j) * h + c0;
      for (uint32_t i = 0; i < lanes; ++i) prod[i] = static_cast<float>(dr[i]) * static_cast<float>(rr[i]);
      for (uint32_t i = 0; i < lanes; ++i) acc_g[i] = acc_g[i] + prod[i];
      for (uint32_t i = 0; i < lanes; ++i) acc_b[i] = acc_b[i] + static_cast<float>(dr[i]);
    }
    for (uint32_t i = 0; i < lanes; ++i) {
      if constexpr (std::is_same<T, half>::value) {
        g[c0 + i] = saturate_to_half(acc_g[i]);
        b[c0 + i] = saturate_to_half(acc_b[i]);
      } else {
        g[c0 + i] = acc_g[i];
        b[c0 + i] = acc_b[i];
      }
    }
    if (core().stats) core().stats->vector_ops += 2 + 3 * uint64_t(rows) + 2;
  }
}

}  // namespace emu_detail

template <typename T, bool isReuseSource = false>
void LayerNormGradBeta(const LocalTensor<T>& outputPdGamma, const LocalTensor<T>& outputPdBeta,
                       const LocalTensor<T>& resForGamma, const LocalTensor<T>& inputDy,
                       const LocalTensor<uint8_t>& sharedTmpBuffer, const LayerNormGradBetaTiling& tiling) {
  using emu_detail::fault;
  static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value,
                "LayerNormGradBeta supports half and float");
  static_assert(!(isReuseSource && std::is_same<T, half>::value), "isReuseSource is not supported for half");
  auto& c = emu_detail::core();
  if (c.stats) ++c.stats->api_calls;
  if (c.device->npu_arch() == 3510) {
    emu_detail::grad_beta_3510(outputPdGamma, outputPdBeta, resForGamma, inputDy, tiling);
    return;
  }
  if (tiling.oneCalSize == 0) fault("LayerNormGradBeta: tiling.oneCalSize must be > 0");

  const LocalTensor<float> stack = sharedTmpBuffer.template ReinterpretCast<float>();
  if (stack.GetSize() < tiling.stackBufferSize)
    fault("LayerNormGradBeta: sharedTmpBuffer holds " + std::to_string(stack.GetSize()) +
          " fp32 slots, the tiling needs stackBufferSize = " + std::to_string(tiling.stackBufferSize));

  emu_detail::GradBetaParams p;
  p.bshCurLength = tiling.bshCurLength;
  p.bsCurLength = tiling.bsCurLength;
  p.hCurLength = tiling.originalHLength;  // CANN: mask and row stride are the original H
  const bool uses_stack = std::is_same<T, half>::value || !isReuseSource;
  if (uses_stack && uint64_t(tiling.resForGammaTmpTensorPos) + tiling.oneCalSize > tiling.stackBufferSize)
    fault("LayerNormGradBeta: resForGammaTmpTensorPos + oneCalSize = " +
          std::to_string(uint64_t(tiling.resForGammaTmpTensorPos) + tiling.oneCalSize) +
          " exceeds stackBufferSize = " + std::to_string(tiling.stackBufferSize));
  if constexpr (std::is_same<T, half>::value) {
    p.gammaTemp = stack[tiling.gammaTempTensorPos];
    p.betaTemp = stack[tiling.betaTempTensorPos];
    p.inputDyTmp = stack[tiling.inputDyTmpTensorPos];
    p.resForGammaTmp = stack[tiling.resForGammaTmpTensorPos];
  } else if constexpr (isReuseSource) {
    p.resForGammaTmp = resForGamma;  // products overwrite the source from its start
  } else {
    p.resForGammaTmp = stack[tiling.resForGammaTmpTensorPos];
  }

  emu_detail::compute_chunk(resForGamma, inputDy, outputPdGamma, outputPdBeta, p, true);
  uint32_t offset = tiling.oneCalSize;
  for (uint32_t i = 1; i < tiling.loopRound; ++i) {
    emu_detail::compute_chunk(resForGamma[offset], inputDy[offset], outputPdGamma, outputPdBeta, p, false);
    offset += tiling.oneCalSize;
  }
  if (tiling.inputTailSize > 0) {
    p.bshCurLength = tiling.inputTailSize;
    p.bsCurLength = tiling.bsTailSize;
    emu_detail::compute_chunk(resForGamma[tiling.inputTailPos], inputDy[tiling.inputTailPos], outputPdGamma,
                              outputPdBeta, p, false);
  }
}

}  // namespace AscendC

// LayerNorm, LayerNormGrad and RmsNorm (the [B, S, H] forms).
#include "ascend/emu/emu_norm_apis.h"
