// The AscendC calls the RMSNorm kernels (ascend/rms_norm_kernel.asc) make
// beyond what kernel_operator.h emulates: Muls, Sqrt and Div (count forms,
// float), and the high-level Sum (per-row sums of an [outter, inner]
// tensor). Included after kernel_operator.h by the RMSNorm launcher.
//
// Sum follows CANN's dav-2002/dav-2201 implementation
// (impl/adv_api/detail/reduce/sum/sum_common_impl.h): per row, a count-mode
// RepeatReduceSum of the row's n elements (one 64-lane binary tree per
// 64-element repeat, partials to sharedTmpBuffer), then the same on the
// partials until one value is left, written to dstTensor[row]. A row of at
// most 64 elements goes straight to dstTensor[row] and leaves
// sharedTmpBuffer untouched. dav-3510's Sum is another implementation and
// is not emulated: a call faults there, as the other high-level APIs do.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace AscendC {

// adv_api/reduce/sum_utils.h
struct SumParams {
  uint32_t outter = 1;
  uint32_t inner;  // n rounded up to a 32-byte block of T
  uint32_t n;      // elements of a row
};

namespace emu_detail {

template <typename T>
void unary_f32(const LocalTensor<T>& dst, const LocalTensor<T>& src, int64_t count, const char* op, T (*f)(T)) {
  static_assert(std::is_same<T, float>::value, "only float vector arithmetic is emulated");
  const uint32_t n = check_count(count, op);
  if (n == 0) return;
  check_overlap(dst, n, src, n, op);
  T* d = dst.emu_span(n, op);
  const T* s = src.emu_span(n, op);
  for (uint32_t i = 0; i < n; ++i) d[i] = f(s[i]);
  count_vector_op();
}

}  // namespace emu_detail

template <typename T, bool isSetMask = true>
void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count) {
  static_assert(std::is_same<T, float>::value, "only float vector arithmetic is emulated");
  const uint32_t n = emu_detail::check_count(count, "Muls");
  if (n == 0) return;
  emu_detail::check_overlap(dst, n, src, n, "Muls");
  T* d = dst.emu_span(n, "Muls");
  const T* s = src.emu_span(n, "Muls");
  for (uint32_t i = 0; i < n; ++i) d[i] = s[i] * scalarValue;
  emu_detail::count_vector_op();
}

// IEEE sqrtf and '/', as the emulated RmsNorm and LayerNorm take them.
template <typename T>
void Sqrt(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count) {
  emu_detail::unary_f32<T>(dst, src, count, "Sqrt", [](T x) { return std::sqrt(x); });
}

template <typename T>
void Div(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count) {
  emu_detail::binary<T>(dst, src0, src1, count, "Div", [](T x, T y) { return x / y; });
}

template <typename T, int32_t reduceDim = -1, bool isReuseSource = false, bool isBasicBlock = false>
void Sum(const LocalTensor<T>& dstTensor, const LocalTensor<T>& srcTensor, const LocalTensor<uint8_t>& sharedTmpBuffer,
         const SumParams& sumParams) {
  static_assert(std::is_same<T, float>::value, "only the float Sum is emulated");
  using emu_detail::fault;
  using emu_detail::num;
  const std::string api = "Sum";
  emu_detail::check_norm_arch(api);
  emu_detail::count_api_call();
  const SumParams& p = sumParams;
  constexpr uint32_t kPerBlock = 32 / sizeof(T), kLanes = emu_detail::kRepeatLanes;
  if (p.n < 1 || p.n > p.inner || p.inner != (p.n + kPerBlock - 1) / kPerBlock * kPerBlock)
    fault(api + ": sumParams.inner = " + num(p.inner) + " must be n = " + num(p.n) +
          " rounded up to a 32-byte block (and n >= 1)");
  if (p.outter < 1) fault(api + ": sumParams.outter is 0");
  const uint64_t src_elems = uint64_t(p.outter) * p.inner;
  const T* src = emu_detail::api_span(api, "srcTensor", srcTensor, src_elems);
  T* dst = emu_detail::api_span(api, "dstTensor", dstTensor, p.outter);
  const uint64_t tmp_bytes = sharedTmpBuffer.GetSize();
  // GetSumMaxMinTmpSize: the first pass's partials, rounded up to a block.
  const uint64_t repeats = (p.n + kLanes - 1) / kLanes;
  const uint64_t need = (repeats + kPerBlock - 1) / kPerBlock * kPerBlock * sizeof(T);
  T* tmp = nullptr;
  if (repeats > 1) {
    if (tmp_bytes < need)
      fault(api + ": sharedTmpBuffer of " + num(tmp_bytes) + " bytes is below GetSumMaxMinTmpSize's " + num(need) +
            " bytes for n = " + num(p.n));
    tmp = reinterpret_cast<T*>(emu_detail::api_span(api, "sharedTmpBuffer", sharedTmpBuffer, tmp_bytes));
  }
  const auto rd = emu_detail::ub_range("dstTensor", dstTensor, p.outter);
  const auto rs = emu_detail::ub_range("srcTensor", srcTensor, src_elems);
  emu_detail::check_disjoint(api, rd, rs);
  if (tmp) {
    const auto rt = emu_detail::ub_range("sharedTmpBuffer", sharedTmpBuffer, tmp_bytes);
    emu_detail::check_disjoint(api, rt, rd);
    emu_detail::check_disjoint(api, rt, rs);
  }
  for (uint32_t row = 0; row < p.outter; ++row) {
    const T* in = src + uint64_t(row) * p.inner;
    if (repeats == 1) {
      dst[row] = emu_detail::repeat_sum(in, p.n);
      continue;
    }
    uint64_t total = p.n;
    const T* from = in;
    while (total > 1) {
      const uint64_t parts = (total + kLanes - 1) / kLanes;
      T* out = parts == 1 ? dst + row : tmp;
      for (uint64_t m = 0; m < parts; ++m) {
        const uint64_t len = total - m * kLanes < kLanes ? total - m * kLanes : kLanes;
        out[m] = emu_detail::repeat_sum(from + m * kLanes, uint32_t(len));
      }
      from = tmp;
      total = parts;
    }
  }
}

}  // namespace AscendC
