// ISA-specific body of the gamma/beta reduction; included only by
// reduce_rows_isa.cc, which is compiled once per instruction set.
#pragma once

#include <cstdint>

#include "simd.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

// Register blocking: kRows rows are added into one pair of accumulators per
// column vector before they go back to memory, so the accumulators cost one
// load and one store per kRows rows; kCols vectors side by side give
// independent add chains. The row order of the additions is unchanged.
template <typename TRes, typename TDy>
void reduce_rows_impl(const TRes* res, const TDy* dy, int64_t rows, int64_t cols, int64_t ld_res,
                      int64_t ld_dy, float* acc_g, float* acc_b) {
  constexpr int W = VecF::kWidth;
  constexpr int kRows = 4;
  constexpr int kCols = 2;
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    const TRes* x = res + r * ld_res;
    const TDy* d = dy + r * ld_dy;
    int64_t c = 0;
    for (; c + kCols * W <= cols; c += kCols * W) {
      VecF g[kCols], b[kCols];
      for (int j = 0; j < kCols; ++j) {
        g[j] = VecF::load(acc_g + c + j * W);
        b[j] = VecF::load(acc_b + c + j * W);
      }
      for (int k = 0; k < kRows; ++k) {
        for (int j = 0; j < kCols; ++j) {
          const VecF dv = VecF::load(d + k * ld_dy + c + j * W);
          const VecF xv = VecF::load(x + k * ld_res + c + j * W);
          g[j] = g[j] + xv * dv;
          b[j] = b[j] + dv;
        }
      }
      for (int j = 0; j < kCols; ++j) {
        g[j].store(acc_g + c + j * W);
        b[j].store(acc_b + c + j * W);
      }
    }
    for (; c + W <= cols; c += W) {
      VecF g = VecF::load(acc_g + c), b = VecF::load(acc_b + c);
      for (int k = 0; k < kRows; ++k) {
        const VecF dv = VecF::load(d + k * ld_dy + c);
        g = g + VecF::load(x + k * ld_res + c) * dv;
        b = b + dv;
      }
      g.store(acc_g + c);
      b.store(acc_b + c);
    }
    for (; c < cols; ++c) {
      float g = acc_g[c], b = acc_b[c];
      for (int k = 0; k < kRows; ++k) {
        const float dv = to_float(d[k * ld_dy + c]);
        g = g + to_float(x[k * ld_res + c]) * dv;
        b = b + dv;
      }
      acc_g[c] = g;
      acc_b[c] = b;
    }
  }
  for (; r < rows; ++r) {
    const TRes* x = res + r * ld_res;
    const TDy* d = dy + r * ld_dy;
    int64_t c = 0;
    for (; c + W <= cols; c += W) {
      const VecF dv = VecF::load(d + c);
      (VecF::load(acc_g + c) + VecF::load(x + c) * dv).store(acc_g + c);
      (VecF::load(acc_b + c) + dv).store(acc_b + c);
    }
    for (; c < cols; ++c) {
      const float dv = to_float(d[c]);
      acc_g[c] = acc_g[c] + to_float(x[c]) * dv;
      acc_b[c] = acc_b[c] + dv;
    }
  }
}

// The same sums for inputs streamed from memory, in rows of medium length:
// one row at a time, kCols vectors per step. The accumulators then cost a
// load and a store per row (from L1), but the memory system sees just two
// sequential streams; the register-blocked loop above reads 2 * kRows short
// streams at once, which it serves well below its streaming rate when rows
// are a few cache lines to a few KiB long (measured 10% slower in float32,
// 30% in the 16-bit formats at H = 768). 16-bit rows also carry half the
// bytes per instruction, so they prefetch a fixed distance ahead of the read
// position: the hardware prefetchers stop at every 4 KiB page and leave the
// memory system idle meanwhile. The per-column order of the additions is row
// order, as above: both loops give the same bits.
inline constexpr int64_t kStreamPrefetchBytes = 4096;

template <typename T>
void reduce_rows_streamed_impl(const T* res, const T* dy, int64_t rows, int64_t cols, int64_t ld_res,
                               int64_t ld_dy, float* acc_g, float* acc_b) {
  constexpr int W = VecF::kWidth;
  constexpr int kCols = 4;
  constexpr int64_t kStep = kCols * W;
  constexpr bool kPrefetch = sizeof(T) == 2;
  // Prefetch requests per step: one per 64-byte line the step reads.
  constexpr int kLines = kStep * int64_t(sizeof(T)) >= 64 ? int(kStep * int64_t(sizeof(T)) / 64) : 1;
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = res + r * ld_res;
    const T* d = dy + r * ld_dy;
    int64_t c = 0;
    for (; c + kStep <= cols; c += kStep) {
      if constexpr (kPrefetch) {
        for (int l = 0; l < kLines; ++l) {
          // Formed as integers: the address may lie past the buffer (a
          // prefetch never faults).
          const uintptr_t ahead = uintptr_t(kStreamPrefetchBytes + 64 * l);
          // Low temporal locality (prefetcht2): into L2, where the row
          // kernels' prefetches also go; measured faster than into L1.
          __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(x + c) + ahead), 0, 1);
          __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(d + c) + ahead), 0, 1);
        }
      }
      VecF g[kCols], b[kCols];
      for (int j = 0; j < kCols; ++j) {
        const VecF dv = VecF::load(d + c + j * W);
        g[j] = VecF::load(acc_g + c + j * W) + VecF::load(x + c + j * W) * dv;
        b[j] = VecF::load(acc_b + c + j * W) + dv;
      }
      for (int j = 0; j < kCols; ++j) {
        g[j].store(acc_g + c + j * W);
        b[j].store(acc_b + c + j * W);
      }
    }
    for (; c + W <= cols; c += W) {
      const VecF dv = VecF::load(d + c);
      (VecF::load(acc_g + c) + VecF::load(x + c) * dv).store(acc_g + c);
      (VecF::load(acc_b + c) + dv).store(acc_b + c);
    }
    for (; c < cols; ++c) {
      const float dv = to_float(d[c]);
      acc_g[c] = acc_g[c] + to_float(x[c]) * dv;
      acc_b[c] = acc_b[c] + dv;
    }
  }
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
