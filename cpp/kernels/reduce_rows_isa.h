// ISA-specific body of the gamma/beta reduction; included only by
// reduce_rows_isa.cc, which is compiled once per instruction set.
#pragma once

#include <cstdint>

#include "base/lanes.h"
#include "base/prefetch.h"
#include "base/simd.h"
#include "reduce_step.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

// Adds columns c0 .. cols-1 of one row into the accumulators: whole
// vectors, then one column at a time.
template <typename T>
inline void add_row(const T* x, const T* d, int64_t c0, int64_t cols, float* acc_g, float* acc_b) {
  constexpr int W = VecF::kWidth;
  int64_t c = c0;
  for (; c + W <= cols; c += W) {
    VecF g = VecF::load(acc_g + c), b = VecF::load(acc_b + c);
    reduce_step(g, b, VecF::load(x + c), VecF::load(d + c));
    g.store(acc_g + c);
    b.store(acc_b + c);
  }
  for (; c < cols; ++c) reduce_step(acc_g[c], acc_b[c], to_float(x[c]), to_float(d[c]));
}

// Register blocking: kRows rows are added into one pair of accumulators per
// column vector before they go back to memory, so the accumulators cost one
// load and one store per kRows rows; kCols vectors side by side give
// independent add chains. The row order of the additions is unchanged.
// kPrefetch (ReduceLoop::kBlockedPrefetch): each of the kRows rows is
// requested ahead (prefetch.h), once per cache line. The rows are often
// column chunks of longer rows (few rows, many columns), so near a chunk's
// end the request goes to the same columns of the next kRows rows, the
// ones read next: continuing into the columns past the chunk fetched data
// another task reads (with 4096-column 16-bit chunks, a third of the memory
// traffic was such waste).
// kRows is a template argument because the best block differs by dtype and
// loop (reduce_rows_isa.cc picks it); it changes how often the accumulators
// go to L1, never the order of the additions, so every kRows gives the same
// bits.
template <typename T, bool kPrefetch = false, int kRows = kReduceRowBlock>
void reduce_rows_impl(const T* res, const T* dy, int64_t rows, int64_t cols, int64_t ld_res, int64_t ld_dy,
                      float* acc_g, float* acc_b) {
  static_assert(kRows >= 1, "a block has at least one row");
  constexpr int W = VecF::kWidth;
  constexpr int kCols = 2;
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    const T* x = res + r * ld_res;
    const T* d = dy + r * ld_dy;
    int64_t c = 0;
    for (; c + kCols * W <= cols; c += kCols * W) {
      if constexpr (kPrefetch) {
        // A step reads kStepBytes of each row: two 64-byte lines (float32
        // with AVX-512), one, or half of one (16-bit with 8-lane vectors,
        // requested every other step): one request per line.
        constexpr int64_t kStepBytes = kCols * W * int64_t(sizeof(T));
        constexpr int kLines = kStepBytes >= 64 ? int(kStepBytes / 64) : 1;
        constexpr int64_t kLineElems = 64 / int64_t(sizeof(T));
        if (kStepBytes >= 64 || (c & (kLineElems - 1)) == 0) {
          for (int k = 0; k < kRows; ++k) {
            for (int l = 0; l < kLines; ++l) {
              prefetch_ahead_in(x + k * ld_res, c + l * kLineElems, cols, kRows * ld_res);
              prefetch_ahead_in(d + k * ld_dy, c + l * kLineElems, cols, kRows * ld_dy);
            }
          }
        }
      }
      VecF g[kCols], b[kCols];
      for (int j = 0; j < kCols; ++j) {
        g[j] = VecF::load(acc_g + c + j * W);
        b[j] = VecF::load(acc_b + c + j * W);
      }
      for (int k = 0; k < kRows; ++k) {
        for (int j = 0; j < kCols; ++j) {
          reduce_step(g[j], b[j], VecF::load(x + k * ld_res + c + j * W), VecF::load(d + k * ld_dy + c + j * W));
        }
      }
      for (int j = 0; j < kCols; ++j) {
        g[j].store(acc_g + c + j * W);
        b[j].store(acc_b + c + j * W);
      }
    }
    for (; c + W <= cols; c += W) {
      VecF g = VecF::load(acc_g + c), b = VecF::load(acc_b + c);
      for (int k = 0; k < kRows; ++k) reduce_step(g, b, VecF::load(x + k * ld_res + c), VecF::load(d + k * ld_dy + c));
      g.store(acc_g + c);
      b.store(acc_b + c);
    }
    for (; c < cols; ++c) {
      float g = acc_g[c], b = acc_b[c];
      for (int k = 0; k < kRows; ++k) reduce_step(g, b, to_float(x[k * ld_res + c]), to_float(d[k * ld_dy + c]));
      acc_g[c] = g;
      acc_b[c] = b;
    }
  }
  for (; r < rows; ++r) add_row(res + r * ld_res, dy + r * ld_dy, 0, cols, acc_g, acc_b);
}

// The same sums one row at a time (ReduceLoop::kRowwise), kCols vectors per
// step. The accumulators then cost a load and a store per row (from L1), but
// the memory system sees just two sequential streams. 16-bit rows prefetch
// ahead like the blocked loop. The per-column order of the additions is row
// order, as above: both loops give the same bits.
template <typename T>
void reduce_rows_rowwise_impl(const T* res, const T* dy, int64_t rows, int64_t cols, int64_t ld_res, int64_t ld_dy,
                              float* acc_g, float* acc_b) {
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
          prefetch_ahead(reinterpret_cast<const char*>(x + c) + 64 * l);
          prefetch_ahead(reinterpret_cast<const char*>(d + c) + 64 * l);
        }
      }
      VecF g[kCols], b[kCols];
      for (int j = 0; j < kCols; ++j) {
        g[j] = VecF::load(acc_g + c + j * W);
        b[j] = VecF::load(acc_b + c + j * W);
        reduce_step(g[j], b[j], VecF::load(x + c + j * W), VecF::load(d + c + j * W));
      }
      for (int j = 0; j < kCols; ++j) {
        g[j].store(acc_g + c + j * W);
        b[j].store(acc_b + c + j * W);
      }
    }
    add_row(x, d, c, cols, acc_g, acc_b);
  }
}

// store_sums_fn's kernel: sixteen sums at a time through Lanes (whose
// narrowing stores round exactly as from_float), the tail one by one.
template <typename T>
void store_sums_impl(const float* src, T* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) canonical_nan(Lanes::load(src + i)).store(dst + i);
  for (; i < n; ++i) dst[i] = from_float<T>(jax_lngb::canonical_nan(src[i]));
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
