// AscendC's LayerNorm, LayerNormGrad and RmsNorm ([B, S, H] forms) in the
// emulation, computed as CANN's dav-2002/dav-2201 implementations compute
// them (asc-devkit impl/adv_api/detail/normalization/{layernorm,
// layernormgrad,rmsnorm}/*_common_impl.h): the same fp32 steps in the same
// order, on the same buffers (the tiling's positions in sharedTmpBuffer,
// isReuseSource's reuse of the inputs, the caller's output tensors as
// scratch), so what CANN rounds, reuses or overwrites the emulation does too.
//
// Hardware facts the emulation takes as given: reductions of one 64-lane
// fp32 repeat (WholeReduceSum, RepeatReduceSum) add adjacent pairs in a
// binary tree, masked lanes counting as 0 (CANN documents the tree for
// ReduceRepeat); Sqrt, Div, Ln and Exp round like IEEE sqrtf, '/', logf and
// expf; half <-> float casts are exact up and round to nearest even down.
//
// Each call first checks what CANN's CPU-debug build asserts or a device
// would get wrong, and raises KernelFault naming the API and the rule:
// operands in TPosition VECIN/VECOUT/VECCALC at 32-byte aligned UB
// addresses, H padded to 32 bytes, a sharedTmpBuffer of at least CANN's
// documented minimum and of the tiling's size, temporaries inside it,
// tiling fields consistent with [B, S, H], operands in bounds and not
// sharing memory where the API forbids it. dav-3510 has other
// implementations (and tilings) that are not emulated: calls fault there.
//
// Included at the end of kernel_operator.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

// kernel_tiling.h's structs, as CANN generates them from
// include/adv_api/normalization/*_tilingdata.h: in AscendC::tiling and, by
// using-declarations, at global scope.
namespace AscendC {
namespace tiling {

struct LayerNormTiling {
  uint32_t bLength = 0;
  uint32_t sLength = 0;
  uint32_t hLength = 0;
  uint32_t originalHLength = 0;
  uint32_t inputXSize = 0;
  uint32_t meanVarSize = 0;
  uint32_t numberOfTmpBuf = 0;
  uint32_t meanTmpTensorPos = 0;
  uint32_t meanTmpTensorSize = 0;
  uint32_t varianceTmpTensorPos = 0;
  uint32_t varianceTmpTensorSize = 0;
  uint32_t tmpBufSize = 0;
  uint32_t oneTmpSize = 0;
  uint32_t firstTmpStartPos = 0;
  uint32_t secondTmpStartPos = 0;
  uint32_t thirdTmpStartPos = 0;
  uint32_t loopRound = 0;
  uint32_t inputRoundSize = 0;
  uint32_t inputTailSize = 0;
  uint32_t inputTailPos = 0;
  uint32_t meanVarRoundSize = 0;
  uint32_t meanVarTailSize = 0;
  uint32_t meanVarTailPos = 0;
  uint32_t bshCurLength = 0;
  uint32_t bsCurLength = 0;
  float lastDimValueBack = 0;
};

struct LayerNormGradTiling {
  uint32_t stackBufferSize = 0;
  uint32_t bLength = 0;
  uint32_t sLength = 0;
  uint32_t hLength = 0;
  uint32_t originalHLength = 0;
  uint32_t oneCalSize = 0;
  uint32_t nohCalSize = 0;
  uint32_t loopNum = 0;
  uint32_t tailSize = 0;
  uint32_t nohTailSize = 0;
  uint32_t tmpTensorBSHPos = 0;
  uint32_t tmpTensorBSHSize = 0;
  uint32_t pdVarTensorPos = 0;
  uint32_t pdVarTensorSize = 0;
  uint32_t pdMeanTensorPos = 0;
  uint32_t pdMeanTensorSize = 0;
  uint32_t x1TensorPos = 0;
  uint32_t x1TensorSize = 0;
  uint32_t x2TensorPos = 0;
  uint32_t x2TensorSize = 0;
  uint32_t x3TensorPos = 0;
  uint32_t x3TensorSize = 0;
  uint32_t tmpTensorPos = 0;
  uint32_t tmpTensorSize = 0;
  uint32_t tmpTensor1Pos = 0;
  uint32_t tmpTensor1Size = 0;
  uint32_t tmpTensor2Pos = 0;
  uint32_t tmpTensor2Size = 0;
  uint32_t lastDimValueBack = 0;        // the bits of the float 1 / originalHLength
  uint32_t lastDimValueBackMulTwo = 0;  // the bits of the float 2 / originalHLength
};

struct RmsNormTiling {
  uint32_t bLength = 0;
  uint32_t sLength = 0;
  uint32_t hLength = 0;
  uint32_t originalHLength = 0;
  float reciprocalOfHLength = 0;
  uint32_t mainBshLength = 0;
  uint32_t mainBsLength = 0;
  uint32_t mainBsLengthAlign = 0;
  uint32_t loopRound = 0;
  uint32_t inputTailPos = 0;
  uint32_t tailBshLength = 0;
  uint32_t tailBsLength = 0;
};

}  // namespace tiling
}  // namespace AscendC

using AscendC::tiling::LayerNormGradTiling;
using AscendC::tiling::LayerNormTiling;
using AscendC::tiling::RmsNormTiling;

static_assert(sizeof(LayerNormTiling) == 26 * 4, "CANN's LayerNormTiling is 26 32-bit fields");
static_assert(sizeof(LayerNormGradTiling) == 30 * 4, "CANN's LayerNormGradTiling is 30 32-bit fields");
static_assert(sizeof(RmsNormTiling) == 12 * 4, "CANN's RmsNormTiling is 12 32-bit fields");

namespace AscendC {

// layernormgrad_utils.h
struct LayerNormGradShapeInfo {
  DataFormat dataFormat = DataFormat::ND;
};

namespace emu_detail {

constexpr uint32_t kRepeatLanes = 64;  // fp32 lanes of one 256-byte vector repeat
constexpr uint32_t kMaxRepeats = 255;  // the 8-bit repeat count of a vector instruction

inline std::string num(uint64_t v) { return std::to_string(v); }

// ------------------------------------------------------------------ checks

inline void check_norm_arch(const std::string& api) {
  if (core().device->npu_arch() == 3510)
    fault(api + ": the dav-3510 implementation (and its tiling) is not emulated; emulate dav-2201 or dav-2002");
}

// One tensor operand: the rules of CANN's CPU-debug API checks (TPosition
// VECIN/VECOUT/VECCALC, 32-byte aligned start), then the emulation's (a live
// buffer, `count` elements in bounds). Returns the checked elements.
template <typename T>
T* api_span(const std::string& api, const char* name, const LocalTensor<T>& t, uint64_t count) {
  if (!t.emu_bound()) fault(api + ": " + name + " does not refer to a buffer");
  if (!is_ub_position(t.emu_position()))
    fault(api + ": " + name + " is in TPosition::" + position_name(t.emu_position()) +
          "; the API takes unified-buffer tensors only (TPosition VECIN/VECOUT/VECCALC)");
  if (t.emu_offset() % kUbAlign != 0)
    fault(api + ": " + name + " starts at unified-buffer address " + num(t.emu_offset()) +
          ", which is not 32-byte aligned");
  return t.emu_span(count, (api + " " + name).c_str());
}

// The part of the unified buffer an operand uses, for the sharing rules.
struct UbRange {
  const char* name;
  uint64_t lo, hi;  // bytes
};

template <typename T>
UbRange ub_range(const char* name, const LocalTensor<T>& t, uint64_t count) {
  return {name, t.emu_offset(), t.emu_offset() + count * sizeof(T)};
}

// `may_coincide`: the API lets the two be the very same tensor (in place).
inline void check_disjoint(const std::string& api, const UbRange& a, const UbRange& b, bool may_coincide = false) {
  if (a.lo >= b.hi || b.lo >= a.hi) return;
  if (may_coincide && a.lo == b.lo && a.hi == b.hi) return;
  fault(api + ": " + a.name + " (UB bytes " + num(a.lo) + ".." + num(a.hi) + ") and " + b.name + " (UB bytes " +
        num(b.lo) + ".." + num(b.hi) + ") overlap; " +
        (may_coincide ? "they may be the same tensor, but not partially overlap"
                      : "the API does not allow them to share memory"));
}

template <typename T>
void check_padded_h(const std::string& api, uint32_t h, uint32_t original_h) {
  if (h == 0) fault(api + ": tiling.hLength is 0");
  if ((uint64_t(h) * sizeof(T)) % kUbAlign != 0)
    fault(api + ": tiling.hLength = " + num(h) + " " + type_name<T>() + " elements is " + num(uint64_t(h) * sizeof(T)) +
          " bytes, not a multiple of 32: the last axis must be padded (with zeros) to 32 bytes");
  if (original_h == 0 || original_h > h)
    fault(api + ": tiling.originalHLength = " + num(original_h) + " must be in [1, hLength = " + num(h) + "]");
}

inline void check_field(const std::string& api, bool ok, const std::string& rule) {
  if (!ok) fault(api + ": inconsistent tiling: " + rule);
}

// A temporary of `size` fp32 slots at slot `pos` of sharedTmpBuffer.
inline void check_tmp_region(const std::string& api, const char* name, uint64_t pos, uint64_t size,
                             uint64_t tmp_slots) {
  if (pos + size > tmp_slots)
    fault(api + ": the tiling puts " + name + " at fp32 slots " + num(pos) + ".." + num(pos + size) +
          ", past the end of sharedTmpBuffer (" + num(tmp_slots) +
          " fp32 slots): on the device it would overwrite whatever follows in the unified buffer");
}

inline void check_tmp_minimum(const std::string& api, uint64_t have, uint64_t min_bytes, const std::string& shape) {
  if (have < min_bytes)
    fault(api + ": sharedTmpBuffer has " + num(have) + " bytes, less than the " + num(min_bytes) + " bytes Get" + api +
          "MaxMinTmpSize gives as the minimum for " + shape);
}

// The temporary space the framework hands an API called without a
// sharedTmpBuffer (CANN's PopStackBuffer): the unified buffer after TPipe's
// buffers, up to its end (dav-2201 keeps its last 128 bytes, KfcMsg's slot).
struct FrameworkTmp {
  Slot slot;
  LocalTensor<uint8_t> tensor;
  explicit FrameworkTmp(const std::string& api) {
    auto& c = core();
    if (!c.pipe_live)
      fault(api +
            " without sharedTmpBuffer needs a live TPipe (its temporary space is the UB after TPipe's "
            "buffers)");
    const uint64_t end = c.ub.size() - (c.device->npu_arch() == 2201 ? 128 : 0);
    if (end <= c.ub_used)
      fault(api + " without sharedTmpBuffer: no unified buffer is left for its temporary space (TPipe's buffers use " +
            num(c.ub_used) + " of " + num(end) + " bytes)");
    slot.offset = uint32_t(c.ub_used);
    slot.len = uint32_t(end - c.ub_used);
    slot.state = Slot::kFixed;
    tensor = LocalTensor<uint8_t>::emu_make(&slot, TPosition::LCM, slot.offset, slot.len);
  }
};

// --------------------------------------------------------------- arithmetic

template <typename T>
inline float to_f32(T v) {
  return static_cast<float>(v);
}

// float -> T as Cast(..., CAST_NONE) stores it: round to nearest even.
template <typename T>
inline T from_f32(float v) {
  return static_cast<T>(v);
}

// One repeat of n <= 64 fp32 values summed by WholeReduceSum or
// RepeatReduceSum: a binary tree of adjacent pairs over the 64 lanes.
inline float repeat_sum(const float* v, uint32_t n) {
  float lane[kRepeatLanes];
  for (uint32_t i = 0; i < kRepeatLanes; ++i) lane[i] = i < n ? v[i] : 0.0f;
  for (uint32_t w = kRepeatLanes / 2; w >= 1; w /= 2)
    for (uint32_t i = 0; i < w; ++i) lane[i] = lane[2 * i] + lane[2 * i + 1];
  return lane[0];
}

inline void count_api_call() {
  auto& c = core();
  if (c.stats) ++c.stats->api_calls;
}

// ---------------------------------------------------------------- LayerNorm

// LayerNormReduceSumImpl: each row of `src` (h apart) is first folded onto
// its first 64 lanes (64-column blocks added in order, then the partial
// last block), then reduced by one repeat; the sum goes to dstMV[r] and to
// dst[r * h]. `src` is destroyed.
inline void ln_reduce_rows(float* dstMV, float* dst, float* src, uint32_t rows, uint32_t h) {
  for (uint32_t r = 0; r < rows; ++r) {
    float* s = src + uint64_t(r) * h;
    if (h > kRepeatLanes) {
      const uint32_t full = h / kRepeatLanes, tail = h % kRepeatLanes;
      for (uint32_t k = 1; k < full; ++k)
        for (uint32_t j = 0; j < kRepeatLanes; ++j) s[j] = s[k * kRepeatLanes + j] + s[j];
      for (uint32_t j = 0; j < tail; ++j) s[j] = s[full * kRepeatLanes + j] + s[j];
    }
  }
  const uint32_t n = h < kRepeatLanes ? h : kRepeatLanes;
  for (uint32_t r0 = 0; r0 < rows; r0 += kMaxRepeats) {  // WholeReduceSum takes <= 255 rows at a time
    const uint32_t r1 = rows - r0 < kMaxRepeats ? rows : r0 + kMaxRepeats;
    for (uint32_t r = r0; r < r1; ++r) dstMV[r] = repeat_sum(src + uint64_t(r) * h, n);
    for (uint32_t r = r0; r < r1; ++r) dst[uint64_t(r) * h] = repeat_sum(src + uint64_t(r) * h, n);
  }
}

// BroadcastLastDim: dst row r = src[r * h]. The instruction sequence zeroes
// the first h/2 floats of src after reading row 0's value (it builds an
// all-zero select mask there).
inline void ln_broadcast_rows(float* dst, float* src, uint32_t rows, uint32_t h) {
  for (uint32_t r = 0; r < rows; ++r) {
    const float v = src[uint64_t(r) * h];
    if (r == 0) std::memset(src, 0, size_t(h / 2) * sizeof(float));
    for (uint32_t j = 0; j < h; ++j) dst[uint64_t(r) * h + j] = v;
  }
}

template <typename T, bool isReuseSource>
void layer_norm(const LocalTensor<T>& output, const LocalTensor<T>& outputMean, const LocalTensor<T>& outputVariance,
                const LocalTensor<T>& inputX, const LocalTensor<T>& gamma, const LocalTensor<T>& beta,
                const LocalTensor<uint8_t>& sharedTmpBuffer, const T epsilon, LayerNormTiling& tiling) {
  constexpr bool kHalf = std::is_same<T, half>::value;
  constexpr bool kReuse = isReuseSource && !kHalf;
  const std::string api = "LayerNorm";
  check_norm_arch(api);
  count_api_call();
  LayerNormTiling& t = tiling;
  check_padded_h<T>(api, t.hLength, t.originalHLength);
  const uint64_t H = t.hLength, BS = uint64_t(t.bLength) * t.sLength, BSH = BS * H;
  check_field(api, BS > 0, "bLength * sLength is 0");
  check_field(api, t.inputXSize == BSH,
              "inputXSize = " + num(t.inputXSize) + " is not bLength * sLength * hLength = " + num(BSH));
  check_field(api, t.meanVarSize == BS,
              "meanVarSize = " + num(t.meanVarSize) + " is not bLength * sLength = " + num(BS));
  check_field(api, t.oneTmpSize > 0 && t.oneTmpSize % H == 0 && t.oneTmpSize <= BSH,
              "oneTmpSize = " + num(t.oneTmpSize) + " must be a positive multiple of hLength, at most inputXSize");
  check_field(api, t.inputRoundSize == t.oneTmpSize && uint64_t(t.meanVarRoundSize) * H == t.inputRoundSize,
              "inputRoundSize / meanVarRoundSize do not describe oneTmpSize / hLength rows");
  check_field(api,
              uint64_t(t.loopRound) * t.inputRoundSize + t.inputTailSize == BSH && t.inputTailSize < t.oneTmpSize &&
                  t.inputTailPos == BSH - t.inputTailSize,
              "loopRound * inputRoundSize + inputTailSize is not inputXSize (or the tail is misplaced)");
  check_field(api, uint64_t(t.meanVarTailSize) * H == t.inputTailSize && t.meanVarTailPos == BS - t.meanVarTailSize,
              "meanVarTailSize / meanVarTailPos do not describe the tail rows");
  if (t.bshCurLength != t.inputRoundSize || t.bsCurLength != t.meanVarRoundSize)
    fault(api + ": tiling.bshCurLength / bsCurLength = " + num(t.bshCurLength) + " / " + num(t.bsCurLength) +
          " are not inputRoundSize / meanVarRoundSize = " + num(t.inputRoundSize) + " / " + num(t.meanVarRoundSize) +
          " (LayerNorm writes a tail chunk's lengths into the tiling it is given by reference: a second call needs "
          "a fresh copy of the tiling)");
  if (H / kRepeatLanes > kMaxRepeats + 1)
    fault(api + ": hLength = " + num(H) + " folds " + num(H / kRepeatLanes - 1) +
          " 64-lane blocks in one Add, more than its 8-bit repeat count holds");

  T* x = api_span(api, "inputX", inputX, BSH);
  T* out = api_span(api, "output", output, BSH);
  T* mean = api_span(api, "outputMean", outputMean, BS);
  T* var = api_span(api, "outputVariance", outputVariance, BS);
  const T* g = api_span(api, "gamma", gamma, H);
  const T* b = api_span(api, "beta", beta, H);
  if ((uint64_t(gamma.GetSize()) * sizeof(T)) % kUbAlign != 0 || (uint64_t(beta.GetSize()) * sizeof(T)) % kUbAlign != 0)
    fault(api + ": gamma and beta must hold whole 32-byte blocks");
  const uint64_t tmp_bytes = sharedTmpBuffer.GetSize();
  float* stack = reinterpret_cast<float*>(api_span(api, "sharedTmpBuffer", sharedTmpBuffer, tmp_bytes));

  const auto align32 = [](uint64_t bytes) { return (bytes + kUbAlign - 1) / kUbAlign * kUbAlign; };
  check_tmp_minimum(api, tmp_bytes, (kReuse ? 2 : 3) * align32(H * 4) + 2 * align32(BS * 4),
                    "[B, S, H] = [" + num(t.bLength) + ", " + num(t.sLength) + ", " + num(H) + "]");
  if (tmp_bytes / 4 < t.tmpBufSize)
    fault(api + ": sharedTmpBuffer holds " + num(tmp_bytes / 4) + " fp32 slots, the tiling's tmpBufSize is " +
          num(t.tmpBufSize));
  const uint64_t slots = t.tmpBufSize;
  check_tmp_region(api, "the first temporary", t.firstTmpStartPos, t.oneTmpSize, slots);
  check_tmp_region(api, "the second temporary", t.secondTmpStartPos, t.oneTmpSize, slots);
  if (!kReuse) check_tmp_region(api, "the third temporary", t.thirdTmpStartPos, t.oneTmpSize, slots);
  if (kHalf) {
    check_tmp_region(api, "the fp32 means", t.meanTmpTensorPos, BS, slots);
    check_tmp_region(api, "the fp32 variances", t.varianceTmpTensorPos, BS, slots);
  }

  const UbRange rx = ub_range("inputX", inputX, BSH), ro = ub_range("output", output, BSH),
                rm = ub_range("outputMean", outputMean, BS), rv = ub_range("outputVariance", outputVariance, BS),
                rg = ub_range("gamma", gamma, H), rb = ub_range("beta", beta, H),
                rt = ub_range("sharedTmpBuffer", sharedTmpBuffer, tmp_bytes);
  check_disjoint(api, ro, rx, /*may_coincide=*/true);  // documented: output may be inputX
  for (const UbRange* o : {&rm, &rv})
    for (const UbRange* other : {&ro, &rx, &rg, &rb}) check_disjoint(api, *o, *other);
  check_disjoint(api, rm, rv);
  for (const UbRange* other : {&ro, &rx, &rm, &rv, &rg, &rb}) check_disjoint(api, rt, *other);
  check_disjoint(api, ro, rg);
  check_disjoint(api, ro, rb);
  if (kReuse) {  // inputX becomes scratch
    check_disjoint(api, rx, rg);
    check_disjoint(api, rx, rb);
  }

  // The buffers of GetLayerNormNDTensorInfo: three fp32 temporaries of
  // oneTmpSize (float with isReuseSource: inputX's start is the first), and
  // the fp32 means / variances (float: the outputs themselves).
  float* A;
  float* B;
  float* C;
  if constexpr (kReuse) {
    A = reinterpret_cast<float*>(x);
    B = stack + t.firstTmpStartPos;
    C = stack + t.secondTmpStartPos;
  } else {
    A = stack + t.firstTmpStartPos;
    B = stack + t.secondTmpStartPos;
    C = stack + t.thirdTmpStartPos;
  }
  float* meanT;
  float* varT;
  if constexpr (kHalf) {
    meanT = stack + t.meanTmpTensorPos;
    varT = stack + t.varianceTmpTensorPos;
  } else {
    meanT = reinterpret_cast<float*>(mean);
    varT = reinterpret_cast<float*>(var);
  }
  const float inv_h = t.lastDimValueBack;
  const float eps = to_f32(epsilon);  // half: the half epsilon, widened

  const auto chunk = [&](uint64_t off, uint64_t mv) {
    const uint32_t rows = t.bsCurLength;
    const uint64_t n = t.bshCurLength;
    const float* xin;
    if constexpr (kHalf) {
      for (uint64_t k = 0; k < n; ++k) A[k] = to_f32(x[off + k]);
      xin = A;
    } else {
      xin = reinterpret_cast<const float*>(x) + off;
    }
    // mean = sum over the row of x * (1/H)
    for (uint64_t k = 0; k < n; ++k) C[k] = xin[k] * inv_h;
    ln_reduce_rows(meanT + mv, B, C, rows, uint32_t(H));
    // variance = sum over the row of (x - mean)^2 * (1/H); B keeps x - mean
    ln_broadcast_rows(C, B, rows, uint32_t(H));
    for (uint64_t k = 0; k < n; ++k) B[k] = xin[k] - C[k];
    for (uint64_t k = 0; k < n; ++k) C[k] = B[k] * B[k];
    for (uint64_t k = 0; k < n; ++k) A[k] = C[k] * inv_h;
    ln_reduce_rows(varT + mv, C, A, rows, uint32_t(H));
    // xhat = (x - mean) * (1 / sqrt(variance + eps))
    ln_broadcast_rows(A, C, rows, uint32_t(H));
    for (uint64_t k = 0; k < n; ++k) C[k] = A[k] + eps;
    for (uint64_t k = 0; k < n; ++k) A[k] = std::sqrt(C[k]);
    for (uint32_t k = 0; k < 8; ++k) C[k] = 1.0f;
    for (uint64_t k = 0; k < n; ++k) A[k] = 1.0f / A[k];
    for (uint64_t k = 0; k < n; ++k) C[k] = A[k] * B[k];
    // y = xhat * gamma + beta
    if constexpr (kHalf) {
      for (uint64_t j = 0; j < H; ++j) A[j] = to_f32(g[j]);
      for (uint32_t r = 0; r < rows; ++r)
        for (uint64_t j = 0; j < H; ++j) B[r * H + j] = C[r * H + j] * A[j];
      for (uint64_t j = 0; j < H; ++j) C[j] = to_f32(b[j]);
      for (uint32_t r = 0; r < rows; ++r)
        for (uint64_t j = 0; j < H; ++j) A[r * H + j] = B[r * H + j] + C[j];
      for (uint64_t k = 0; k < n; ++k) out[off + k] = from_f32<T>(A[k]);
    } else {
      const float* gf = reinterpret_cast<const float*>(g);
      const float* bf = reinterpret_cast<const float*>(b);
      float* of = reinterpret_cast<float*>(out) + off;
      for (uint32_t r = 0; r < rows; ++r)
        for (uint64_t j = 0; j < H; ++j) A[r * H + j] = C[r * H + j] * gf[j];
      for (uint32_t r = 0; r < rows; ++r)
        for (uint64_t j = 0; j < H; ++j) of[r * H + j] = A[r * H + j] + bf[j];
    }
  };

  uint64_t off = 0, mv = 0;
  for (uint32_t i = 0; i < t.loopRound; ++i) {
    chunk(off, mv);
    off += t.inputRoundSize;
    mv += t.meanVarRoundSize;
  }
  if (t.inputTailSize > 0) {
    // As CANN does, in the caller's tiling.
    t.bshCurLength = t.inputTailSize;
    t.bsCurLength = t.meanVarTailSize;
    chunk(t.inputTailPos, t.meanVarTailPos);
  }
  if constexpr (kHalf) {
    for (uint64_t r = 0; r < BS; ++r) mean[r] = from_f32<T>(meanT[r]);
    for (uint64_t r = 0; r < BS; ++r) var[r] = from_f32<T>(varT[r]);
  }
}

// ------------------------------------------------------------ LayerNormGrad

// ReduceSumImpl of layernormgrad: per row, repeated passes of 64-lane
// repeat sums (each pass writing its partials at dst[i*h ...], 255 repeats
// per instruction) until one value is left, which lands at dst[i].
inline void lng_reduce_rows(float* dst, const float* src, uint64_t cal, uint32_t h) {
  const uint64_t rows = cal / h;
  for (uint64_t i = 0; i < rows; ++i) {
    const uint64_t ih = i * h;
    uint64_t total = h;
    const float* sp = src;
    while (total > 1) {
      const uint64_t reps = total / kRepeatLanes, tail = total % kRepeatLanes;
      const uint64_t block_num = reps / kMaxRepeats, block_tail = reps % kMaxRepeats;
      for (uint64_t j = 0; j < block_num; ++j)
        for (uint64_t m = 0; m < kMaxRepeats; ++m)
          dst[ih + j * kMaxRepeats + m] = repeat_sum(sp + ih + (j * kMaxRepeats + m) * kRepeatLanes, kRepeatLanes);
      const uint64_t at = total == kRepeatLanes ? i : ih + block_num * kMaxRepeats;
      for (uint64_t m = 0; m < block_tail; ++m)
        dst[at + m] = repeat_sum(sp + ih + (block_num * kMaxRepeats + m) * kRepeatLanes, kRepeatLanes);
      if (tail > 0)
        dst[total < kRepeatLanes ? i : ih + reps] = repeat_sum(sp + ih + reps * kRepeatLanes, uint32_t(tail));
      total = (total + kRepeatLanes - 1) / kRepeatLanes;
      sp = dst;
    }
  }
}

// Brcb / Duplicate of one value per row over h columns.
inline void lng_broadcast_rows(float* dst, const float* src, uint64_t rows, uint32_t h) {
  for (uint64_t r = 0; r < rows; ++r)
    for (uint32_t j = 0; j < h; ++j) dst[r * h + j] = src[r];
}

// The fp32 buffers of LayerNormGradParams, resolved to addresses.
struct GradBuffers {
  float* tmpBSH = nullptr;
  float* pdVar = nullptr;
  float* pdMean = nullptr;
  float* x1 = nullptr;
  float* x2 = nullptr;
  float* x3 = nullptr;
  float* tmp = nullptr;
  float inv_h = 0, two_inv_h = 0;
  uint32_t h = 0;
};

// x1 = dy * gamma and x2 = x - mean for one chunk of `rows` rows (cal =
// rows * h), from fp32 views.
inline void lng_x1_x2(const float* dy, const float* x, const float* mean, const float* gamma, const GradBuffers& p,
                      uint64_t cal, uint64_t rows) {
  const uint32_t h = p.h;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint32_t j = 0; j < h; ++j) p.x1[r * h + j] = dy[r * h + j] * gamma[j];
  lng_broadcast_rows(p.tmpBSH, mean, rows, h);
  for (uint64_t k = 0; k < cal; ++k) p.x2[k] = x[k] - p.tmpBSH[k];
}

// The rest of the chunk, from x1, x2 and the fp32 variances: pdX and resG
// receive fp32 results.
inline void lng_after_x1_x2(const float* var, float eps, const GradBuffers& p, float* pdX, float* resG, uint64_t cal,
                            uint64_t rows) {
  const uint32_t h = p.h;
  // pd_var = sum(x2 * (var + eps)^-1.5 * x1 * -0.5), (var + eps)^-1.5 as 1 / sqrt((v + e) * (v + e) * (v + e))
  for (uint64_t i = 0; i < rows; ++i) p.tmp[i] = var[i] + eps;
  for (uint64_t i = 0; i < rows; ++i) p.tmpBSH[i] = p.tmp[i] * p.tmp[i];
  for (uint64_t i = 0; i < rows; ++i) p.tmp[i] = p.tmpBSH[i] * p.tmp[i];
  for (uint64_t i = 0; i < rows; ++i) p.tmp[i] = std::sqrt(p.tmp[i]);
  for (uint32_t k = 0; k < 8; ++k) p.tmpBSH[k] = 1.0f;
  for (uint64_t i = 0; i < rows; ++i) p.tmp[i] = 1.0f / p.tmp[i];
  lng_broadcast_rows(p.tmpBSH, p.tmp, rows, h);
  for (uint64_t k = 0; k < cal; ++k) p.tmpBSH[k] = p.x2[k] * p.tmpBSH[k];
  for (uint64_t k = 0; k < cal; ++k) p.tmpBSH[k] = p.x1[k] * p.tmpBSH[k];
  for (uint64_t k = 0; k < cal; ++k) p.tmpBSH[k] = p.tmpBSH[k] * -0.5f;
  lng_reduce_rows(p.pdVar, p.tmpBSH, cal, h);
  // rstd = 1 / sqrt(var + eps); res_for_gamma = x2 * rstd; x3 = x1 * rstd
  for (uint64_t i = 0; i < rows; ++i) p.tmp[i] = var[i] + eps;
  for (uint64_t i = 0; i < rows; ++i) p.tmp[i] = std::sqrt(p.tmp[i]);
  for (uint32_t k = 0; k < 8; ++k) p.tmpBSH[k] = 1.0f;
  for (uint64_t i = 0; i < rows; ++i) p.tmp[i] = 1.0f / p.tmp[i];
  lng_broadcast_rows(p.tmpBSH, p.tmp, rows, h);
  for (uint64_t k = 0; k < cal; ++k) resG[k] = p.x2[k] * p.tmpBSH[k];
  for (uint64_t k = 0; k < cal; ++k) p.x3[k] = p.x1[k] * p.tmpBSH[k];
  // pd_mean = sum(-x3) + pd_var * ((1/H) * sum(-2 * x2))
  for (uint64_t k = 0; k < cal; ++k) p.tmpBSH[k] = p.x3[k] * -1.0f;
  lng_reduce_rows(p.pdMean, p.tmpBSH, cal, h);
  for (uint64_t k = 0; k < cal; ++k) p.tmpBSH[k] = p.x2[k] * -2.0f;
  lng_reduce_rows(p.tmp, p.tmpBSH, cal, h);
  for (uint64_t i = 0; i < rows; ++i) p.tmp[i] = p.tmp[i] * p.inv_h;
  for (uint64_t i = 0; i < rows; ++i) p.tmp[i] = p.pdVar[i] * p.tmp[i];
  for (uint64_t i = 0; i < rows; ++i) p.pdMean[i] = p.pdMean[i] + p.tmp[i];
  // pd_x = (pd_var * (2/H)) * x2 + pd_mean * (1/H) + x3
  for (uint64_t i = 0; i < rows; ++i) p.pdVar[i] = p.pdVar[i] * p.two_inv_h;
  lng_broadcast_rows(p.tmpBSH, p.pdVar, rows, h);
  for (uint64_t k = 0; k < cal; ++k) p.x1[k] = p.tmpBSH[k] * p.x2[k];
  for (uint64_t i = 0; i < rows; ++i) p.pdMean[i] = p.pdMean[i] * p.inv_h;
  lng_broadcast_rows(p.tmpBSH, p.pdMean, rows, h);
  for (uint64_t k = 0; k < cal; ++k) p.x1[k] = p.x1[k] + p.tmpBSH[k];
  for (uint64_t k = 0; k < cal; ++k) pdX[k] = p.x1[k] + p.x3[k];
}

template <typename T, bool isReuseSource>
void layer_norm_grad(const LocalTensor<T>& outputPdX, const LocalTensor<T>& resForGamma, const LocalTensor<T>& inputDy,
                     const LocalTensor<T>& inputX, const LocalTensor<T>& inputVariance, const LocalTensor<T>& inputMean,
                     const LocalTensor<T>& inputGamma, const LocalTensor<uint8_t>& sharedTmpBuffer, T epsilon,
                     const LayerNormGradTiling& t, const LayerNormGradShapeInfo& shapeInfo) {
  constexpr bool kHalf = std::is_same<T, half>::value;
  constexpr bool kReuse = isReuseSource && !kHalf;
  const std::string api = "LayerNormGrad";
  check_norm_arch(api);
  count_api_call();
  if (shapeInfo.dataFormat != DataFormat::ND) fault(api + ": only DataFormat::ND is supported");
  check_padded_h<T>(api, t.hLength, t.originalHLength);
  const uint64_t H = t.hLength, BS = uint64_t(t.bLength) * t.sLength, BSH = BS * H;
  check_field(api, BS > 0, "bLength * sLength is 0");
  check_field(api, t.oneCalSize > 0 && uint64_t(t.nohCalSize) * H == t.oneCalSize,
              "oneCalSize = " + num(t.oneCalSize) + " is not a positive nohCalSize * hLength");
  check_field(api, t.nohCalSize % (kUbAlign / sizeof(T)) == 0,
              "nohCalSize = " + num(t.nohCalSize) + " rows is not a multiple of " + num(kUbAlign / sizeof(T)) +
                  " (each chunk's mean and variance must start 32-byte aligned)");
  check_field(api,
              uint64_t(t.loopNum) * t.oneCalSize + t.tailSize == BSH && t.tailSize < t.oneCalSize &&
                  uint64_t(t.nohTailSize) * H == t.tailSize,
              "loopNum * oneCalSize + tailSize is not bLength * sLength * hLength = " + num(BSH));

  T* dy = api_span(api, "inputDy", inputDy, BSH);
  T* x = api_span(api, "inputX", inputX, BSH);
  const T* var = api_span(api, "inputVariance", inputVariance, BS);
  const T* mean = api_span(api, "inputMean", inputMean, BS);
  const T* gamma = api_span(api, "inputGamma", inputGamma, H);
  if ((uint64_t(inputGamma.GetSize()) * sizeof(T)) % kUbAlign != 0)
    fault(api + ": inputGamma must hold whole 32-byte blocks");
  T* pdx = api_span(api, "outputPdX", outputPdX, BSH);
  T* resg = api_span(api, "resForGamma", resForGamma, BSH);
  const uint64_t tmp_bytes = sharedTmpBuffer.GetSize();
  float* stack = reinterpret_cast<float*>(api_span(api, "sharedTmpBuffer", sharedTmpBuffer, tmp_bytes));

  const uint64_t base = BSH < H * H ? BSH : H * H;
  check_tmp_minimum(api, tmp_bytes,
                    base *
                        (kHalf    ? 9
                         : kReuse ? 4
                                  : 6) *
                        sizeof(T),
                    "[B, S, H] = [" + num(t.bLength) + ", " + num(t.sLength) + ", " + num(H) + "]");
  if (tmp_bytes < t.stackBufferSize)
    fault(api + ": sharedTmpBuffer has " + num(tmp_bytes) + " bytes, the tiling's stackBufferSize is " +
          num(t.stackBufferSize));
  const uint64_t slots = tmp_bytes / 4, cal = t.oneCalSize;
  const auto region = [&](const char* name, uint32_t pos, uint32_t size) {
    check_field(api, size >= cal, std::string(name) + " holds " + num(size) + " fp32 values, fewer than oneCalSize");
    check_tmp_region(api, name, pos, size, slots);
    return stack + pos;
  };
  GradBuffers p;
  p.h = uint32_t(H);
  std::memcpy(&p.inv_h, &t.lastDimValueBack, sizeof(float));
  std::memcpy(&p.two_inv_h, &t.lastDimValueBackMulTwo, sizeof(float));
  p.tmpBSH = region("tmpTensorBSH", t.tmpTensorBSHPos, t.tmpTensorBSHSize);
  p.pdVar = region("pdVarTensor", t.pdVarTensorPos, t.pdVarTensorSize);
  p.pdMean = region("pdMeanTensor", t.pdMeanTensorPos, t.pdMeanTensorSize);
  p.x3 = region("x3Tensor", t.x3TensorPos, t.x3TensorSize);
  if (!kReuse) {
    p.x1 = region("x1Tensor", t.x1TensorPos, t.x1TensorSize);
    p.x2 = region("x2Tensor", t.x2TensorPos, t.x2TensorSize);
  }
  float* t1 = nullptr;
  float* t2 = nullptr;
  if (kHalf) {
    p.tmp = region("tmpTensor", t.tmpTensorPos, t.tmpTensorSize);
    t1 = region("tmpTensor1", t.tmpTensor1Pos, t.tmpTensor1Size);
    t2 = region("tmpTensor2", t.tmpTensor2Pos, t.tmpTensor2Size);
  }

  const UbRange rdy = ub_range("inputDy", inputDy, BSH), rx = ub_range("inputX", inputX, BSH),
                rv = ub_range("inputVariance", inputVariance, BS), rm = ub_range("inputMean", inputMean, BS),
                rg = ub_range("inputGamma", inputGamma, H), rp = ub_range("outputPdX", outputPdX, BSH),
                rr = ub_range("resForGamma", resForGamma, BSH),
                rt = ub_range("sharedTmpBuffer", sharedTmpBuffer, tmp_bytes);
  check_disjoint(api, rp, rr);
  for (const UbRange* o : {&rp, &rr}) {
    check_disjoint(api, *o, rdy, /*may_coincide=*/true);  // documented: outputs may reuse inputs
    check_disjoint(api, *o, rx, /*may_coincide=*/true);
    for (const UbRange* in : {&rv, &rm, &rg}) check_disjoint(api, *o, *in);
  }
  for (const UbRange* other : {&rdy, &rx, &rv, &rm, &rg, &rp, &rr}) check_disjoint(api, rt, *other);
  if (kReuse)  // inputDy and inputX become scratch
    for (const UbRange* in : {&rv, &rm, &rg}) {
      check_disjoint(api, rdy, *in);
      check_disjoint(api, rx, *in);
    }

  float eps = to_f32(epsilon);
  const auto chunk = [&](uint64_t off, uint64_t row0, uint64_t n, uint64_t rows) {
    if constexpr (kHalf) {
      // Casts into tmpTensor1/2 as CANN stages them; the fp32 results come
      // out of tmpTensor (pd_x) and tmpTensor2 (res_for_gamma).
      for (uint64_t k = 0; k < n; ++k) t1[k] = to_f32(dy[off + k]);
      for (uint64_t j = 0; j < H; ++j) t2[j] = to_f32(gamma[j]);
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t j = 0; j < H; ++j) p.x1[r * H + j] = t1[r * H + j] * t2[j];
      for (uint64_t k = 0; k < n; ++k) t1[k] = to_f32(x[off + k]);
      for (uint64_t r = 0; r < rows; ++r) t2[r] = to_f32(mean[row0 + r]);
      lng_broadcast_rows(p.tmpBSH, t2, rows, uint32_t(H));
      for (uint64_t k = 0; k < n; ++k) p.x2[k] = t1[k] - p.tmpBSH[k];
      for (uint64_t r = 0; r < rows; ++r) t1[r] = to_f32(var[row0 + r]);
      lng_after_x1_x2(t1, eps, p, p.tmp, t2, n, rows);
      for (uint64_t k = 0; k < n; ++k) pdx[off + k] = from_f32<T>(p.tmp[k]);
      for (uint64_t k = 0; k < n; ++k) resg[off + k] = from_f32<T>(t2[k]);
    } else {
      GradBuffers q = p;
      q.tmp = reinterpret_cast<float*>(pdx) + off;  // CANN's scratch for per-row values: the pd_x chunk
      if (kReuse) {
        q.x1 = reinterpret_cast<float*>(dy) + off;
        q.x2 = reinterpret_cast<float*>(x) + off;
      }
      lng_x1_x2(reinterpret_cast<const float*>(dy) + off, reinterpret_cast<const float*>(x) + off,
                reinterpret_cast<const float*>(mean) + row0, reinterpret_cast<const float*>(gamma), q, n, rows);
      lng_after_x1_x2(reinterpret_cast<const float*>(var) + row0, eps, q, q.tmp, reinterpret_cast<float*>(resg) + off,
                      n, rows);
    }
  };
  uint64_t off = 0, row0 = 0;
  for (uint32_t i = 0; i < t.loopNum; ++i) {
    chunk(off, row0, t.oneCalSize, t.nohCalSize);
    off += t.oneCalSize;
    row0 += t.nohCalSize;
  }
  if (t.tailSize != 0) chunk(off, row0, t.tailSize, t.nohTailSize);
}

// ------------------------------------------------------------------ RmsNorm

template <typename T, bool isBasicBlock>
void rms_norm(const LocalTensor<T>& dstLocal, const LocalTensor<T>& srcLocal, const LocalTensor<T>& gammaLocal,
              const LocalTensor<uint8_t>& sharedTmpBuffer, const T epsilon, const RmsNormTiling& t) {
  constexpr bool kHalf = std::is_same<T, half>::value;
  const std::string api = "RmsNorm";
  check_norm_arch(api);
  count_api_call();
  check_padded_h<T>(api, t.hLength, t.originalHLength);
  const uint64_t H = t.hLength, BS = uint64_t(t.bLength) * t.sLength, BSH = BS * H;
  check_field(api, BS > 0, "bLength * sLength is 0");
  check_field(api, t.mainBsLength > 0 && uint64_t(t.mainBsLength) * H == t.mainBshLength,
              "mainBshLength = " + num(t.mainBshLength) + " is not a positive mainBsLength * hLength");
  check_field(api, t.mainBsLengthAlign >= t.mainBsLength && t.mainBsLengthAlign % 8 == 0,
              "mainBsLengthAlign = " + num(t.mainBsLengthAlign) + " is not mainBsLength rounded up to 8");
  check_field(api,
              uint64_t(t.loopRound) * t.mainBshLength + t.tailBshLength == BSH &&
                  t.inputTailPos == uint64_t(t.loopRound) * t.mainBshLength &&
                  uint64_t(t.tailBsLength) * H == t.tailBshLength && t.tailBsLength <= t.mainBsLength,
              "loopRound * mainBshLength + tailBshLength is not bLength * sLength * hLength = " + num(BSH) +
                  " (or the tail is misplaced)");
  if (!isBasicBlock && t.originalHLength < 2)
    fault(api +
          ": originalHLength = 1: CANN's row reduction starts at two elements and never writes the sum of a "
          "one-element row (the result would be whatever the temporary held)");
  if (isBasicBlock && (H % kRepeatLanes != 0 || H >= 2048 || BS % 8 != 0))
    fault(api +
          ": isBasicBlock needs hLength a multiple of 64 below 2048 and bLength * sLength a multiple of 8; got "
          "hLength = " +
          num(H) + ", bLength * sLength = " + num(BS));
  // The row-broadcast multiply by gamma repeats once per row for H < 64,
  // and for a partial last 64-lane block when H/64 < rows.
  const auto repeats_per_row = [&](uint64_t rows) {
    return !isBasicBlock &&
           (H < kRepeatLanes || (H > kRepeatLanes && H % kRepeatLanes != 0 && H / kRepeatLanes < rows));
  };
  if (repeats_per_row(t.mainBsLength) && t.mainBsLength > kMaxRepeats)
    fault(api + ": mainBsLength = " + num(t.mainBsLength) + " rows with hLength = " + num(H) +
          " needs one repeat per row in one instruction, more than its 8-bit repeat count holds");

  T* dst = api_span(api, "dstLocal", dstLocal, BSH);
  T* src = api_span(api, "srcLocal", srcLocal, BSH);
  const T* gamma = api_span(api, "gammaLocal", gammaLocal, H);
  const uint64_t tmp_bytes = sharedTmpBuffer.GetSize();
  float* stack = reinterpret_cast<float*>(api_span(api, "sharedTmpBuffer", sharedTmpBuffer, tmp_bytes));
  const uint64_t coeff = kHalf ? 2 : 1;
  check_tmp_minimum(api, tmp_bytes, (H * coeff + 8) * 4,
                    "[B, S, H] = [" + num(t.bLength) + ", " + num(t.sLength) + ", " + num(H) + "]");
  check_tmp_region(api, "the row sums and the fp32 work buffer" /* reducedAddr, tmpAddr (, srcFp32Addr) */, 0,
                   t.mainBsLengthAlign + coeff * uint64_t(t.mainBshLength), tmp_bytes / 4);

  const UbRange rd = ub_range("dstLocal", dstLocal, BSH), rs = ub_range("srcLocal", srcLocal, BSH),
                rg = ub_range("gammaLocal", gammaLocal, H),
                rt = ub_range("sharedTmpBuffer", sharedTmpBuffer, tmp_bytes);
  check_disjoint(api, rd, rg);  // documented
  check_disjoint(api, rd, rs, /*may_coincide=*/true);
  for (const UbRange* other : {&rd, &rs, &rg}) check_disjoint(api, rt, *other);

  float* reduced = stack;
  float* work = stack + t.mainBsLengthAlign;
  float* srcF32 = kHalf ? stack + t.mainBsLengthAlign + t.mainBshLength : nullptr;
  const float eps = to_f32(epsilon);

  const auto chunk = [&](uint64_t off, uint64_t rows, uint64_t n) {
    const float* xf;
    if constexpr (kHalf) {
      for (uint64_t k = 0; k < n; ++k) srcF32[k] = to_f32(src[off + k]);
      xf = srcF32;
    } else {
      xf = reinterpret_cast<const float*>(src) + off;
    }
    for (uint64_t k = 0; k < n; ++k) work[k] = xf[k] * xf[k];
    if constexpr (isBasicBlock) {
      // 64-column blocks added onto block 0 in order, then one repeat per row
      for (uint64_t blk = 1; blk < H / kRepeatLanes; ++blk)
        for (uint64_t r = 0; r < rows; ++r)
          for (uint32_t j = 0; j < kRepeatLanes; ++j)
            work[r * H + j] = work[r * H + j] + work[r * H + blk * kRepeatLanes + j];
      for (uint64_t r = 0; r < rows; ++r) reduced[r] = repeat_sum(work + r * H, kRepeatLanes);
    } else {
      // repeat sums over the original H, in place, until one value is left
      for (uint64_t r = 0; r < rows; ++r) {
        float* row = work + r * H;
        uint64_t total = t.originalHLength;
        while (total > 1) {
          const uint64_t parts = (total + kRepeatLanes - 1) / kRepeatLanes;
          float* outp = total <= kRepeatLanes ? reduced + r : row;
          for (uint64_t m = 0; m < parts; ++m) {
            const uint64_t len = total - m * kRepeatLanes < kRepeatLanes ? total - m * kRepeatLanes : kRepeatLanes;
            outp[m] = repeat_sum(row + m * kRepeatLanes, uint32_t(len));
          }
          total = parts;
        }
      }
    }
    // rstd = exp(-0.5 * ln(sum * (1/H) + eps))
    for (uint64_t r = 0; r < rows; ++r) reduced[r] = reduced[r] * t.reciprocalOfHLength;
    for (uint64_t r = 0; r < rows; ++r) reduced[r] = reduced[r] + eps;
    for (uint64_t r = 0; r < rows; ++r) reduced[r] = std::log(reduced[r]);
    for (uint64_t r = 0; r < rows; ++r) reduced[r] = reduced[r] * -0.5f;
    for (uint64_t r = 0; r < rows; ++r) reduced[r] = std::exp(reduced[r]);
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t j = 0; j < H; ++j) work[r * H + j] = xf[r * H + j] * reduced[r];
    if constexpr (kHalf) {
      for (uint64_t j = 0; j < H; ++j) srcF32[j] = to_f32(gamma[j]);
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t j = 0; j < H; ++j) work[r * H + j] = work[r * H + j] * srcF32[j];
      for (uint64_t k = 0; k < n; ++k) dst[off + k] = from_f32<T>(work[k]);
    } else {
      const float* gf = reinterpret_cast<const float*>(gamma);
      float* df = reinterpret_cast<float*>(dst) + off;
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t j = 0; j < H; ++j) df[r * H + j] = work[r * H + j] * gf[j];
    }
  };
  for (uint32_t i = 0; i < t.loopRound; ++i) chunk(uint64_t(i) * t.mainBshLength, t.mainBsLength, t.mainBshLength);
  if (t.tailBsLength != 0) {
    if (repeats_per_row(t.tailBsLength) && t.tailBsLength > kMaxRepeats)
      fault(api + ": tailBsLength = " + num(t.tailBsLength) + " rows exceeds the 8-bit repeat count");
    chunk(t.inputTailPos, t.tailBsLength, t.tailBshLength);
  }
}

}  // namespace emu_detail

// -------------------------------------------------------------- the APIs

template <typename T, bool isReuseSource = false>
void LayerNorm(const LocalTensor<T>& output, const LocalTensor<T>& outputMean, const LocalTensor<T>& outputVariance,
               const LocalTensor<T>& inputX, const LocalTensor<T>& gamma, const LocalTensor<T>& beta,
               const LocalTensor<uint8_t>& sharedTmpBuffer, const T epsilon, LayerNormTiling& tiling) {
  static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "LayerNorm supports half and float");
  static_assert(!(isReuseSource && std::is_same<T, half>::value), "isReuseSource is not supported for half");
  emu_detail::layer_norm<T, isReuseSource>(output, outputMean, outputVariance, inputX, gamma, beta, sharedTmpBuffer,
                                           epsilon, tiling);
}

template <typename T, bool isReuseSource = false>
void LayerNorm(const LocalTensor<T>& output, const LocalTensor<T>& outputMean, const LocalTensor<T>& outputVariance,
               const LocalTensor<T>& inputX, const LocalTensor<T>& gamma, const LocalTensor<T>& beta, const T epsilon,
               LayerNormTiling& tiling) {
  emu_detail::FrameworkTmp tmp("LayerNorm");
  LayerNorm<T, isReuseSource>(output, outputMean, outputVariance, inputX, gamma, beta, tmp.tensor, epsilon, tiling);
}

template <typename T, bool isReuseSource = false>
void LayerNormGrad(const LocalTensor<T>& outputPdX, const LocalTensor<T>& resForGamma, const LocalTensor<T>& inputDy,
                   const LocalTensor<T>& inputX, const LocalTensor<T>& inputVariance, const LocalTensor<T>& inputMean,
                   const LocalTensor<T>& inputGamma, LocalTensor<uint8_t>& sharedTmpBuffer, T epsilon,
                   LayerNormGradTiling& tiling, const LayerNormGradShapeInfo& shapeInfo = {}) {
  static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "LayerNormGrad supports half and float");
  static_assert(!(isReuseSource && std::is_same<T, half>::value), "isReuseSource is not supported for half");
  emu_detail::layer_norm_grad<T, isReuseSource>(outputPdX, resForGamma, inputDy, inputX, inputVariance, inputMean,
                                                inputGamma, sharedTmpBuffer, epsilon, tiling, shapeInfo);
}

template <typename T, bool isReuseSource = false>
void LayerNormGrad(const LocalTensor<T>& outputPdX, const LocalTensor<T>& resForGamma, const LocalTensor<T>& inputDy,
                   const LocalTensor<T>& inputX, const LocalTensor<T>& inputVariance, const LocalTensor<T>& inputMean,
                   const LocalTensor<T>& inputGamma, T epsilon, LayerNormGradTiling& tiling,
                   const LayerNormGradShapeInfo& shapeInfo = {}) {
  emu_detail::FrameworkTmp tmp("LayerNormGrad");
  LayerNormGrad<T, isReuseSource>(outputPdX, resForGamma, inputDy, inputX, inputVariance, inputMean, inputGamma,
                                  tmp.tensor, epsilon, tiling, shapeInfo);
}

template <typename T, bool isBasicBlock = false>
void RmsNorm(const LocalTensor<T>& dstLocal, const LocalTensor<T>& srcLocal, const LocalTensor<T>& gammaLocal,
             const LocalTensor<uint8_t>& sharedTmpBuffer, const T epsilon, const RmsNormTiling& tiling) {
  static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "RmsNorm supports half and float");
  emu_detail::rms_norm<T, isBasicBlock>(dstLocal, srcLocal, gammaLocal, sharedTmpBuffer, epsilon, tiling);
}

template <typename T, bool isBasicBlock = false>
void RmsNorm(const LocalTensor<T>& dstLocal, const LocalTensor<T>& srcLocal, const LocalTensor<T>& gammaLocal,
             const T epsilon, const RmsNormTiling& tiling) {
  emu_detail::FrameworkTmp tmp("RmsNorm");
  RmsNorm<T, isBasicBlock>(dstLocal, srcLocal, gammaLocal, tmp.tensor, epsilon, tiling);
}

}  // namespace AscendC
