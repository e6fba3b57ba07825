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

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
