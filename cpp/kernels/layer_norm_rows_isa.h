// ISA-specific bodies of the LayerNorm row kernels (see layer_norm_rows.h
// for the math); included only by layer_norm_rows_isa.cc, which is compiled
// once per instruction set. Every sum over a row goes through row_sums
// (lanes.h), whose association is fixed by H alone; the row walking,
// stores and grouping are norm_rows_common.h's, shared with RMSNorm.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "base/lanes.h"
#include "base/prefetch.h"
#include "layer_norm_rows.h"
#include "norm_rows_common.h"
#include "reduce_step.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

// The value a row's mean is taken relative to: its first element (widened),
// or 0 when that is not finite (or the row is empty), which keeps the
// unshifted sum and its Inf/NaN propagation. mean = ref + sum(x - ref) / H
// is the mean of a shifted row, shifted back: for a row at offset c with
// spread s, x - ref is exact while |c| >> s (Sterbenz), so the sum rounds at
// the scale of s, not c, and the mean comes out within about half a float32
// ulp of the true mean (the naive sum's partial sums of size H * c round at
// the scale of H * c, several ulps of the mean for long rows). A function of
// the row alone: the same bits on every ISA and thread count.
template <typename T>
inline float shift_of(const T* row, int64_t H) {
  if (H == 0) return 0.0f;
  const float r = to_float(row[0]);
  return std::isfinite(r) ? r : 0.0f;
}

// kGroup rows at a time: each pass runs over the group's rows before the
// next pass starts. A short row is mostly one serial chain (row sum, lane
// tree, mean, second sum, tree, square root and division, output), and the
// out-of-order core hides one chain behind another only if they are close
// together in the instruction stream; groups of 16 also add their lanes
// together (group_row_sums). Every row's arithmetic is the same, in the
// same order, whatever kGroup: the same bits.
// kScratch: a 16-bit row is widened once, on the first pass, into the row
// scratch; otherwise every pass reads (and widens) the input row.
// kBias: false for a LayerNorm without beta (beta == nullptr): y = xhat *
// gamma with no add at all, rather than the add of a zero bias read from
// memory (which would also turn a -0 product into +0).
template <typename T, bool kScratch, int kGroup, bool kBias = true>
void forward_rows_impl(const T* x, int64_t rows, int64_t H, const float* gamma, const float* beta, float eps,
                       bool stream, T* y, float* mean, float* variance) {
  const float fh = float(H);
  float* xs = kScratch ? row_scratch(kGroup * H) : nullptr;
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    const int n = int(rows - r0 < kGroup ? rows - r0 : kGroup);
    // Row k of the group for the passes after the first.
    auto row = [&](int k, int64_t c, int64_t w) {
      if constexpr (kScratch) {
        return load_n(xs + k * H + c, w);
      } else {
        return load_n(x + (r0 + k) * H + c, w);
      }
    };
    // The mean is taken relative to the row's first element (shift_of):
    // rows far from zero then sum small, exactly representable differences
    // instead of large values whose partial sums round.
    float ref[kGroup];
    for (int k = 0; k < n; ++k) ref[k] = shift_of(x + (r0 + k) * H, H);
    float m[1][kGroup];
    group_row_sums<4, 1, kGroup>(
        n, H,
        [&](int k, int64_t c, int64_t w, Lanes* t) {
          const T* xr = x + (r0 + k) * H;
          prefetch_ahead(xr + c);
          const Lanes xv = load_n(xr + c, w);
          if constexpr (kScratch) store_n(xs + k * H + c, xv, w);
          t[0] = xv - Lanes::splat(ref[k]);
        },
        m);
    for (int k = 0; k < n; ++k) m[0][k] = ref[k] + m[0][k] / fh;
    // The second pass sums d^2 and d for d = x - m: the variance about m,
    // and sum(d) / H = (true mean - m), which refines m (a correction far
    // below m's ulp for rows far from zero, where m is already rounded
    // right; the rounding of the shifted sum, |ref - mean| * H large, for
    // rows near zero). Two accumulators per sum: four chains, as before.
    float v[2][kGroup];
    group_row_sums<2, 2, kGroup>(
        n, H,
        [&](int k, int64_t c, int64_t w, Lanes* t) {
          const Lanes d = row(k, c, w) - Lanes::splat(m[0][k]);
          t[0] = d * d;
          t[1] = d;
        },
        v);
    for (int k = 0; k < n; ++k) {
      m[0][k] = m[0][k] + v[1][k] / fh;
      v[0][k] = v[0][k] / fh;
    }
    for (int k = 0; k < n; ++k) {
      T* yr = y + (r0 + k) * H;
      const Lanes mv = Lanes::splat(m[0][k]);
      const Lanes rv = Lanes::splat(1.0f / std::sqrt(v[0][k] + eps));
      with_stream(stream && stream_ok(yr), [&](auto nt) {
        constexpr bool kNt = decltype(nt)::value;
        auto out = [&](int64_t c, int64_t w) {
          const Lanes xhat = (row(k, c, w) - mv) * rv;
          if constexpr (kBias) {
            return xhat * load_n(gamma + c, w) + load_n(beta + c, w);
          } else {
            return xhat * load_n(gamma + c, w);
          }
        };
        for_block_pairs(
            H, [&](int64_t c) { store2<kNt>(yr + c, out(c, kLanes), out(c + kLanes, kLanes)); },
            [&](int64_t c, int64_t w) { put<kNt>(yr + c, out(c, w), w); });
      });
      mean[r0 + k] = m[0][k];
      variance[r0 + k] = v[0][k];
    }
  }
}

template <typename T, bool kBias>
void forward_rows_bias(const T* x, int64_t rows, int64_t H, const float* gamma, const float* beta, float eps,
                       bool stream, T* y, float* mean, float* variance) {
  if (kWiden<T> && scratch_rows(H, 1)) {
    forward_rows_impl<T, true, 1, kBias>(x, rows, H, gamma, beta, eps, stream, y, mean, variance);
  } else if (H * int64_t(sizeof(T)) <= kGroupMaxRowBytes) {
    forward_rows_impl<T, false, 16, kBias>(x, rows, H, gamma, beta, eps, stream, y, mean, variance);
  } else {
    forward_rows_impl<T, false, 1, kBias>(x, rows, H, gamma, beta, eps, stream, y, mean, variance);
  }
}

// beta == nullptr: no bias (see kBias above).
template <typename T>
void forward_rows(const T* x, int64_t rows, int64_t H, const float* gamma, const float* beta, float eps, bool stream,
                  T* y, float* mean, float* variance) {
  if (beta != nullptr) {
    forward_rows_bias<T, true>(x, rows, H, gamma, beta, eps, stream, y, mean, variance);
  } else {
    forward_rows_bias<T, false>(x, rows, H, gamma, beta, eps, stream, y, mean, variance);
  }
}

// LayerNormGrad's arithmetic, shared by the row loops below (which differ
// only in where x2 and x1 come from and which columns they cover).
//
// The first pass's per-column terms: x1 * x2, x1 and x2.
[[gnu::always_inline]] inline void grad_terms(const Lanes& x1, const Lanes& x2, Lanes* t) {
  t[0] = x1 * x2;
  t[1] = x1;
  t[2] = x2;
}

// A row's constants between the passes: x2 = x - mean,
// pd_x = a * x2 + b + x1 * rstd and res_for_gamma = x2 * rstd, with
// a = pd_var * (2/H) and b = pd_mean * (1/H).
struct GradRowCoeffs {
  float mean, rstd, a, b;
};

// The row's constants from the sums of those terms.
[[gnu::always_inline]] inline GradRowCoeffs grad_coeffs(const float* s, float variance, float mean, int64_t H,
                                                        float eps) {
  const float fh = float(H);
  const float inv_h = 1.0f / fh, two_h = 2.0f / fh;
  const float rs = 1.0f / std::sqrt(variance + eps);
  const float pd_var = (-0.5f * (rs * rs * rs)) * s[0];
  const float pd_mean = (-rs) * s[1] + (pd_var * inv_h) * (-2.0f * s[2]);
  return {mean, rs, pd_var * two_h, pd_mean * inv_h};
}

// The constants in every lane, and the second pass's two outputs.
struct GradLanes {
  Lanes a, b, rstd;
  GradLanes() = default;
  explicit GradLanes(const GradRowCoeffs& k) : a(Lanes::splat(k.a)), b(Lanes::splat(k.b)), rstd(Lanes::splat(k.rstd)) {}
  Lanes pd_x(const Lanes& x2, const Lanes& x1) const { return (a * x2 + b) + x1 * rstd; }
  Lanes res(const Lanes& x2) const { return x2 * rstd; }
};

// The first pass over one row of x and dy (read from memory, requested
// ahead): the row's sums and from them its constants. kKeepX2 / kKeepX1:
// x2 = x - mean / x1 = dy * gamma are also stored, in float32, at x2_row /
// x1_row for the second pass.
template <typename T, bool kKeepX2, bool kKeepX1>
inline GradRowCoeffs grad_first_pass(const T* dr, const T* xr, float variance, float mean, const float* gamma,
                                     int64_t H, float eps, float* x2_row, float* x1_row) {
  const Lanes mv = Lanes::splat(mean);
  float s[3];  // sum(x1 * x2), sum(x1), sum(x2)
  row_sums<2, 3>(
      H,
      [&](int64_t c, int64_t w, Lanes* t) {
        prefetch_ahead(xr + c);
        prefetch_ahead(dr + c);
        const Lanes x2 = load_n(xr + c, w) - mv;
        const Lanes x1 = load_n(dr + c, w) * load_n(gamma + c, w);
        if constexpr (kKeepX2) store_n(x2_row + c, x2, w);
        if constexpr (kKeepX1) store_n(x1_row + c, x1, w);
        grad_terms(x1, x2, t);
      },
      s);
  return grad_coeffs(s, variance, mean, H, eps);
}

// The same, as a function of its own for the fused rows' loop: inlined
// there, GCC kept row_sums' accumulators on the stack (a store and a reload
// per add; 25-40% slower).
template <typename T, bool kKeepX2>
[[gnu::noinline]] GradRowCoeffs grad_first_pass_outlined(const T* dr, const T* xr, float variance, float mean,
                                                         const float* gamma, int64_t H, float eps, float* x2_row) {
  return grad_first_pass<T, kKeepX2, false>(dr, xr, variance, mean, gamma, H, eps, x2_row, nullptr);
}

// The constants of n (<= 16) short rows from row 0 of dy / x / variance /
// mean on: grad_first_pass's sums and constants for each row, the same bits,
// with the rows' lanes added 16 rows at a time (group_row_sums). A function
// of its own for the reason above.
template <typename T>
[[gnu::noinline]] void grad_first_pass_16(const T* dy, const T* x, const float* variance, const float* mean,
                                          const float* gamma, int n, int64_t H, float eps, GradRowCoeffs* coeffs) {
  float s[3][16];  // per row: sum(x1 * x2), sum(x1), sum(x2)
  group_row_sums<2, 3, 16>(
      n, H,
      [&](int k, int64_t c, int64_t w, Lanes* t) {
        const T* xr = x + k * H;
        const T* dr = dy + k * H;
        prefetch_ahead(xr + c);
        prefetch_ahead(dr + c);
        const Lanes x2 = load_n(xr + c, w) - Lanes::splat(mean[k]);
        const Lanes x1 = load_n(dr + c, w) * load_n(gamma + c, w);
        grad_terms(x1, x2, t);
      },
      s);
  for (int k = 0; k < n; ++k) {
    const float sk[3] = {s[0][k], s[1][k], s[2][k]};
    coeffs[k] = grad_coeffs(sk, variance[k], mean[k], H, eps);
  }
}

// kScratch: the first pass keeps x2 = x - mean and x1 = dy * gamma in the
// row scratch for the second; otherwise the second pass recomputes them.
// kGroup rows at a time, each pass over the group's rows before the next
// (short rows, 16 at a time as in forward_rows_impl: their first passes
// through grad_first_pass_16); the same arithmetic per row whatever kGroup.
template <typename T, bool kScratch, int kGroup>
void grad_rows_impl(const T* dy, const T* x, const float* variance, const float* mean, const float* gamma, int64_t rows,
                    int64_t H, float eps, bool stream, T* pd_x, T* res) {
  static_assert(!kScratch || kGroup == 1, "the row scratch holds one row");
  float* x2s = kScratch ? row_scratch(2 * H) : nullptr;
  float* x1s = kScratch ? x2s + H : nullptr;
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    const int n = int(rows - r0 < kGroup ? rows - r0 : kGroup);
    GradRowCoeffs coeffs[kGroup];
    if constexpr (kGroup == 16) {
      grad_first_pass_16(dy + r0 * H, x + r0 * H, variance + r0, mean + r0, gamma, n, H, eps, coeffs);
    } else {
      for (int g = 0; g < n; ++g) {
        const int64_t r = r0 + g;
        coeffs[g] = grad_first_pass<T, kScratch, kScratch>(dy + r * H, x + r * H, variance[r], mean[r], gamma, H, eps,
                                                           x2s, x1s);
      }
    }
    for (int g = 0; g < n; ++g) {
      const int64_t r = r0 + g;
      const T* dr = dy + r * H;
      const T* xr = x + r * H;
      T* out = pd_x + r * H;
      T* rr = res + r * H;
      const Lanes mv = Lanes::splat(coeffs[g].mean);
      const GradLanes k(coeffs[g]);
      // x2 and x1 of the row, again: from the scratch or recomputed.
      auto x2_at = [&](int64_t c, int64_t w) {
        if constexpr (kScratch) {
          return load_n(x2s + c, w);
        } else {
          return load_n(xr + c, w) - mv;
        }
      };
      auto x1_at = [&](int64_t c, int64_t w) {
        if constexpr (kScratch) {
          return load_n(x1s + c, w);
        } else {
          return load_n(dr + c, w) * load_n(gamma + c, w);
        }
      };
      const bool nt = stream && stream_ok(out) && stream_ok(rr);
      with_stream(nt, [&](auto ntc) {
        constexpr bool kNt = decltype(ntc)::value;
        auto dx = [&](int64_t c, int64_t w) { return k.pd_x(x2_at(c, w), x1_at(c, w)); };
        auto rg = [&](int64_t c, int64_t w) { return k.res(x2_at(c, w)); };
        for_block_pairs(
            H,
            [&](int64_t c) {
              store2<kNt>(out + c, dx(c, kLanes), dx(c + kLanes, kLanes));
              store2<kNt>(rr + c, rg(c, kLanes), rg(c + kLanes, kLanes));
            },
            [&](int64_t c, int64_t w) {
              put<kNt>(out + c, dx(c, w), w);
              put<kNt>(rr + c, rg(c, w), w);
            });
      });
    }
  }
}

// The public LayerNormGrad: pd_x and res_for_gamma to memory. The first
// pass keeps x2 = x - mean and x1 = dy * gamma of the row in a float32 row
// scratch (L1/L2) when the row suits it (scratch_rows), so the second pass
// neither reloads nor reconverts x, dy and gamma. Short rows go 16 at a
// time (kGroupMaxRowBytes, as in the forward).
template <typename T>
void grad_rows(const T* dy, const T* x, const float* variance, const float* mean, const float* gamma, int64_t rows,
               int64_t H, float eps, bool stream, T* pd_x, T* res) {
  if (scratch_rows(H, 2)) {
    grad_rows_impl<T, true, 1>(dy, x, variance, mean, gamma, rows, H, eps, stream, pd_x, res);
  } else if (H * int64_t(sizeof(T)) <= kGroupMaxRowBytes) {
    grad_rows_impl<T, false, 16>(dy, x, variance, mean, gamma, rows, H, eps, stream, pd_x, res);
  } else {
    grad_rows_impl<T, false, 1>(dy, x, variance, mean, gamma, rows, H, eps, stream, pd_x, res);
  }
}

// The fused backward's rows (GradReduceFn), kTile rows at a time (see
// grad_reduce_rows): the first pass of each row as in grad_rows_impl, then
// one sweep over the columns of all the tile's rows that writes each row's
// pd_x and hands res_for_gamma = x2 * rstd, still in registers, to
// reduce_step. The accumulators are loaded and stored once per tile and
// column block, as in reduce_rows' blocked loop, and each column adds the
// tile's rows in order: reduce_rows' bits, without res_for_gamma's round
// trip through a scratch.
// The sweep reads dy again from the input rows (in L1/L2 since the first
// pass; widening it again cost less than storing a float32 copy).
// kScratch: the first pass leaves x2 = x - mean of the tile's rows in a
// float32 scratch; otherwise (rows under 256 or over 16384 columns, see
// scratch_rows) the sweep recomputes it from x. kTile: rows per tile, at
// most kReduceRowBlock (fewer rows per load and store of the accumulators
// add in the same order: the same bits). kGroup: kTile, or 16 for short
// rows, whose first passes go 16 rows at a time (grad_first_pass_16) ahead
// of their four tiles' sweeps.
// kBeta: false for a LayerNorm without beta (acc_b == nullptr): the step's
// beta accumulator is then a register that is never loaded nor stored, so
// its adds are dead code the compiler drops (as in RMSNorm's fused
// backward); pd_gamma's arithmetic and order are unchanged.
template <typename T, bool kScratch, int kTile, int kGroup, bool kBeta = true>
void grad_reduce_rows_impl(const T* dy, const T* x, const float* variance, const float* mean, const float* gamma,
                           int64_t rows, int64_t H, float eps, bool stream, T* pd_x, float* acc_g, float* acc_b) {
  static_assert(kTile >= 1 && kTile <= kReduceRowBlock && kReduceRowBlock == 4,
                "the sweep's dispatch below covers tiles of 1 to 4 rows");
  static_assert(kGroup == kTile || (kGroup == 16 && 16 % kTile == 0 && !kScratch),
                "first passes row by row for each tile, or 16 short rows at a time");
  float* x2s = kScratch ? row_scratch(kTile * H) : nullptr;
  GradRowCoeffs group_coeffs[kGroup];
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int n = int(rows - r0 < kTile ? rows - r0 : kTile);
    // The tile's constants: from each row's first pass, or for short rows
    // from their group's, formed at the group's first tile.
    const GradRowCoeffs* coeffs = group_coeffs;
    if constexpr (kGroup == 16) {
      const int64_t t = r0 % kGroup;
      if (t == 0) {
        const int gn = int(rows - r0 < kGroup ? rows - r0 : kGroup);
        grad_first_pass_16(dy + r0 * H, x + r0 * H, variance + r0, mean + r0, gamma, gn, H, eps, group_coeffs);
      }
      coeffs += t;
    } else {
      for (int k = 0; k < n; ++k) {
        const int64_t r = r0 + k;
        group_coeffs[k] = grad_first_pass_outlined<T, kScratch>(dy + r * H, x + r * H, variance[r], mean[r], gamma, H,
                                                                eps, kScratch ? x2s + k * H : nullptr);
      }
    }
    // The sweep, for the tile's kN rows (a constant, so it unrolls).
    auto sweep = [&](auto rows_c) {
      constexpr int kN = decltype(rows_c)::value;
      GradLanes k[kN];
      Lanes mv[kN];
      T* out[kN];
      bool nt = stream;
      for (int i = 0; i < kN; ++i) {
        k[i] = GradLanes(coeffs[i]);
        mv[i] = Lanes::splat(coeffs[i].mean);
        out[i] = pd_x + (r0 + i) * H;
        nt = nt && stream_ok(out[i]);
      }
      // Row i's x2 and dy at columns c .. c+w-1.
      auto x2_at = [&](int i, int64_t c, int64_t w) {
        if constexpr (kScratch) {
          return load_n(x2s + i * H + c, w);
        } else {
          return load_n(x + (r0 + i) * H + c, w) - mv[i];
        }
      };
      auto dy_at = [&](int i, int64_t c, int64_t w) { return load_n(dy + (r0 + i) * H + c, w); };
      with_stream(nt, [&](auto ntc) {
        constexpr bool kNt = decltype(ntc)::value;
        for_block_pairs(
            H,
            [&](int64_t c) {
              if constexpr (kScratch && std::is_same_v<T, float>) {
                // The next tile's x and dy at these 32 columns (two lines a
                // row), requested while this sweep computes: float32 rows
                // with the scratch took 6-18% less time from memory (C++
                // driver, two cores, [65536, 768] to [1024, 16384], same
                // bits). Not for the 16-bit formats (no gain) nor for rows
                // without the scratch (short rows: a loss).
                if (r0 + 2 * kTile <= rows) {
#pragma GCC unroll 4
                  for (int i = 0; i < kN; ++i) {
                    const int64_t next = (r0 + kTile + i) * H + c;
                    prefetch_line(x + next);
                    prefetch_line(x + next + kLanes);
                    prefetch_line(dy + next);
                    prefetch_line(dy + next + kLanes);
                  }
                }
              }
              Lanes g0 = load_n(acc_g + c, kLanes), g1 = load_n(acc_g + c + kLanes, kLanes);
              Lanes b0 = Lanes::zero(), b1 = Lanes::zero();
              if constexpr (kBeta) {
                b0 = load_n(acc_b + c, kLanes);
                b1 = load_n(acc_b + c + kLanes, kLanes);
              }
              const Lanes gm0 = load_n(gamma + c, kLanes), gm1 = load_n(gamma + c + kLanes, kLanes);
#pragma GCC unroll 4
              for (int i = 0; i < kN; ++i) {
                const Lanes x20 = x2_at(i, c, kLanes), x21 = x2_at(i, c + kLanes, kLanes);
                const Lanes d0 = dy_at(i, c, kLanes), d1 = dy_at(i, c + kLanes, kLanes);
                store2<kNt>(out[i] + c, k[i].pd_x(x20, d0 * gm0), k[i].pd_x(x21, d1 * gm1));
                reduce_step(g0, b0, k[i].res(x20), d0);
                reduce_step(g1, b1, k[i].res(x21), d1);
              }
              store_n(acc_g + c, g0, kLanes);
              store_n(acc_g + c + kLanes, g1, kLanes);
              if constexpr (kBeta) {
                store_n(acc_b + c, b0, kLanes);
                store_n(acc_b + c + kLanes, b1, kLanes);
              }
            },
            [&](int64_t c, int64_t w) {
              Lanes g = load_n(acc_g + c, w);
              Lanes b = kBeta ? load_n(acc_b + c, w) : Lanes::zero();
              const Lanes gm = load_n(gamma + c, w);
#pragma GCC unroll 4
              for (int i = 0; i < kN; ++i) {
                const Lanes x2 = x2_at(i, c, w), d = dy_at(i, c, w);
                put<kNt>(out[i] + c, k[i].pd_x(x2, d * gm), w);
                reduce_step(g, b, k[i].res(x2), d);
              }
              store_n(acc_g + c, g, w);
              if constexpr (kBeta) store_n(acc_b + c, b, w);
            });
      });
    };
    for_tile_rows<kTile>(n, sweep);
  }
}

// The tile's scratch (a float32 row per row) is used where scratch_rows
// allows it: it stays within L2 with room to spare. Rows too long for it
// go two at a time: the sweep reads the tile's x and dy a second time, and
// four such rows no longer stay in L2 (measured on two cores, same bits:
// 9-18% less time at [512, 32768] and [64, 262144], 0-10% at [256, 65536]
// and [128, 131072], than four at a time, although the accumulators are
// then loaded and stored twice as often).
template <typename T, bool kBeta>
void grad_reduce_rows_beta(const T* dy, const T* x, const float* variance, const float* mean, const float* gamma,
                           int64_t rows, int64_t H, float eps, bool stream, T* pd_x, float* acc_g, float* acc_b) {
  if (scratch_rows(H, kReduceRowBlock)) {
    grad_reduce_rows_impl<T, true, 4, 4, kBeta>(dy, x, variance, mean, gamma, rows, H, eps, stream, pd_x, acc_g, acc_b);
  } else if (H < kScratchMinCols) {
    grad_reduce_rows_impl<T, false, 4, 16, kBeta>(dy, x, variance, mean, gamma, rows, H, eps, stream, pd_x, acc_g,
                                                  acc_b);
  } else {
    grad_reduce_rows_impl<T, false, 2, 2, kBeta>(dy, x, variance, mean, gamma, rows, H, eps, stream, pd_x, acc_g,
                                                 acc_b);
  }
}

// acc_b == nullptr: no beta, no sum of dy (see kBeta above).
template <typename T>
void grad_reduce_rows(const T* dy, const T* x, const float* variance, const float* mean, const float* gamma,
                      int64_t rows, int64_t H, float eps, bool stream, T* pd_x, float* acc_g, float* acc_b) {
  if (acc_b != nullptr) {
    grad_reduce_rows_beta<T, true>(dy, x, variance, mean, gamma, rows, H, eps, stream, pd_x, acc_g, acc_b);
  } else {
    grad_reduce_rows_beta<T, false>(dy, x, variance, mean, gamma, rows, H, eps, stream, pd_x, acc_g, acc_b);
  }
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
