// ISA-specific bodies of the residual add + norm row kernels (see
// add_norm_rows.h); included only by add_norm_rows_isa.cc, which is
// compiled once per instruction set.
//
// The norms' arithmetic is theirs: the row constants and lane types of
// layer_norm_rows_isa.h (grad_coeffs, GradLanes) and rms_norm_rows_isa.h
// (rms_rstd, rms_grad_a, RmsGradLanes), the row walking and grouped sums of
// norm_rows_common.h, LayerNormGradBeta's step. What is new is where the
// normalised row comes from (x + residual, rounded to residual's dtype) and
// where the backward's dx goes (added to dh, rounded once).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "base/lanes.h"
#include "base/prefetch.h"
#include "layer_norm_rows_isa.h"
#include "norm_rows_common.h"
#include "reduce_step.h"
#include "rms_norm_rows_isa.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

// v rounded to R and widened back: the float32 value of the h the forward
// stores (a store and reload through the stack, which the core forwards;
// the narrowing store is from_float's RNE). The identity for float32.
template <typename R>
[[gnu::always_inline]] inline Lanes round_to(const Lanes& v) {
  if constexpr (std::is_same_v<R, float>) {
    return v;
  } else {
    alignas(64) R tmp[kLanes];
    v.store(tmp);
    return Lanes::load(tmp);
  }
}

// h[0] of a row as the forward stores it, or 0 when that is not finite (or
// the row is empty): LayerNorm's shift (layer_norm_rows_isa.h, shift_of),
// taken of h.
template <typename X, typename R>
inline float h_shift(const X* x, const R* r, int64_t H) {
  if (H == 0) return 0.0f;
  const float h0 = to_float(from_float<R>(to_float(x[0]) + to_float(r[0])));
  return std::isfinite(h0) ? h0 : 0.0f;
}

// kGroup rows at a time, as the norms' forwards go (16 for short rows).
// The first pass, the only one that reads memory, forms h, stores it, keeps
// its float32 value in the row scratch and sums it; the statistics' second
// pass and the output pass run from the scratch. The sums are
// forward_rows_impl's (LayerNorm: shifted mean with 4 accumulators, then
// d^2 and d with 2) and rms_forward_rows_impl's (x^2 with 4), so the
// statistics and y are the norms' bits for this h.
template <typename X, typename R, bool kLayer, bool kBeta, int kGroup>
void add_forward_rows_impl(const X* x, const R* r, int64_t rows, int64_t H, const float* scale, const float* beta,
                           float eps, bool stream, X* y, R* h, float* stat0, float* stat1) {
  // max(H, 1): an empty row's statistics are 0, not 0 / 0.
  const float fh = float(H > 0 ? H : 1);
  const float inv_h = rms_inv_h(H);
  float* hs = row_scratch(kGroup * (H > 0 ? H : 1));
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    const int n = int(rows - r0 < kGroup ? rows - r0 : kGroup);
    float ref[kGroup];
    bool nt = stream;
    for (int k = 0; k < n; ++k) {
      ref[k] = kLayer ? h_shift(x + (r0 + k) * H, r + (r0 + k) * H, H) : 0.0f;
      nt = nt && stream_ok(h + (r0 + k) * H);
    }
    float m[1][kGroup];
    with_stream(nt, [&](auto ntc) {
      constexpr bool kNt = decltype(ntc)::value;
      group_row_sums<4, 1, kGroup>(
          n, H,
          [&](int k, int64_t c, int64_t w, Lanes* t) {
            const X* xr = x + (r0 + k) * H;
            const R* rr = r + (r0 + k) * H;
            prefetch_ahead(xr + c);
            prefetch_ahead(rr + c);
            const Lanes hv = round_to<R>(load_n(xr + c, w) + load_n(rr + c, w));
            put<kNt>(h + (r0 + k) * H + c, hv, w);
            store_n(hs + k * H + c, hv, w);
            if constexpr (kLayer) {
              t[0] = hv - Lanes::splat(ref[k]);
            } else {
              t[0] = hv * hv;
            }
          },
          m);
    });
    float v[2][kGroup];
    if constexpr (kLayer) {
      for (int k = 0; k < n; ++k) m[0][k] = ref[k] + m[0][k] / fh;
      group_row_sums<2, 2, kGroup>(
          n, H,
          [&](int k, int64_t c, int64_t w, Lanes* t) {
            const Lanes d = load_n(hs + k * H + c, w) - Lanes::splat(m[0][k]);
            t[0] = d * d;
            t[1] = d;
          },
          v);
      for (int k = 0; k < n; ++k) {
        m[0][k] = m[0][k] + v[1][k] / fh;
        v[0][k] = v[0][k] / fh;
      }
    }
    for (int k = 0; k < n; ++k) {
      X* yr = y + (r0 + k) * H;
      const float* hk = hs + k * H;
      float rs;
      if constexpr (kLayer) {
        rs = 1.0f / std::sqrt(v[0][k] + eps);
      } else {
        rs = rms_rstd(m[0][k], inv_h, eps);
      }
      const Lanes mv = Lanes::splat(kLayer ? m[0][k] : 0.0f);
      const Lanes rv = Lanes::splat(rs);
      with_stream(stream && stream_ok(yr), [&](auto ntc) {
        constexpr bool kNt = decltype(ntc)::value;
        auto out = [&](int64_t c, int64_t w) {
          if constexpr (kLayer) {
            const Lanes xhat = (load_n(hk + c, w) - mv) * rv;
            if constexpr (kBeta) {
              return xhat * load_n(scale + c, w) + load_n(beta + c, w);
            } else {
              return xhat * load_n(scale + c, w);
            }
          } else {
            return (load_n(hk + c, w) * rv) * load_n(scale + c, w);
          }
        };
        for_block_pairs(
            H, [&](int64_t c) { store2<kNt>(yr + c, out(c, kLanes), out(c + kLanes, kLanes)); },
            [&](int64_t c, int64_t w) { put<kNt>(yr + c, out(c, w), w); });
      });
      if constexpr (kLayer) {
        stat0[r0 + k] = m[0][k];
        stat1[r0 + k] = v[0][k];
      } else {
        stat0[r0 + k] = rs;
      }
    }
  }
}

// Rows of at most 128 columns (512 bytes of float32 scratch) go sixteen at
// a time, as the norms' short rows do.
template <typename X, typename R, bool kLayer, bool kBeta>
void add_forward_rows(const X* x, const R* r, int64_t rows, int64_t H, const float* scale, const float* beta, float eps,
                      bool stream, X* y, R* h, float* stat0, float* stat1) {
  if (H * int64_t(sizeof(float)) <= kGroupMaxRowBytes) {
    add_forward_rows_impl<X, R, kLayer, kBeta, 16>(x, r, rows, H, scale, beta, eps, stream, y, h, stat0, stat1);
  } else {
    add_forward_rows_impl<X, R, kLayer, kBeta, 1>(x, r, rows, H, scale, beta, eps, stream, y, h, stat0, stat1);
  }
}

// The backward's first pass over one row of dy and h (read from memory;
// dh, which only the sweep reads, requested ahead along with them): the
// row's constants. LayerNorm: grad_first_pass's sums (x1 * x2, x1, x2 with
// 2 accumulators) and grad_coeffs; RMSNorm: rms_grad_sum's (x1 * h with 4)
// and rms_grad_a. A function of its own, as the norms' first passes are:
// inlined into the sweep's loop, GCC kept the accumulators on the stack.
template <typename D, typename R>
[[gnu::noinline]] GradRowCoeffs layer_first_pass(const D* dr, const R* hr, const R* dhr, float variance, float mean,
                                                 const float* scale, int64_t H, float eps) {
  const Lanes mv = Lanes::splat(mean);
  float s[3];
  row_sums<2, 3>(
      H,
      [&](int64_t c, int64_t w, Lanes* t) {
        prefetch_ahead(hr + c);
        prefetch_ahead(dr + c);
        prefetch_ahead(dhr + c);
        const Lanes x2 = load_n(hr + c, w) - mv;
        const Lanes x1 = load_n(dr + c, w) * load_n(scale + c, w);
        grad_terms(x1, x2, t);
      },
      s);
  return grad_coeffs(s, variance, mean, H, eps);
}

template <typename D, typename R>
[[gnu::noinline]] float rms_first_pass(const D* dr, const R* hr, const R* dhr, const float* scale, int64_t H) {
  float s[1];
  row_sums<4, 1>(
      H,
      [&](int64_t c, int64_t w, Lanes* t) {
        prefetch_ahead(hr + c);
        prefetch_ahead(dr + c);
        prefetch_ahead(dhr + c);
        t[0] = (load_n(dr + c, w) * load_n(scale + c, w)) * load_n(hr + c, w);
      },
      s);
  return s[0];
}

// kTile rows at a time: each row's first pass, then one sweep over the
// columns of the tile's rows that writes d_sum = dx + dh (rounded once to
// R) and hands x_hat, still in registers, with dy to reduce_step, as the
// norms' fused backwards do (grad_reduce_rows_impl,
// rms_grad_reduce_rows_impl): each column adds the tile's rows in order,
// one load and store of the accumulators per tile. The sweep reads dy and h
// again from L1/L2 and dh for the first time (requested by the first
// passes). Without beta the beta accumulators are registers never stored,
// whose adds the compiler drops.
template <typename D, typename R, bool kLayer, bool kBeta, int kTile>
void add_backward_rows_impl(const D* dy, const R* dh, const R* h, const float* stat0, const float* stat1,
                            const float* scale, int64_t rows, int64_t H, float eps, bool stream, R* d_sum, float* acc_g,
                            float* acc_b) {
  static_assert(kTile >= 1 && kTile <= kReduceRowBlock && kReduceRowBlock == 4,
                "the sweep's dispatch covers tiles of 1 to 4 rows");
  const float inv_h = rms_inv_h(H);
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int n = int(rows - r0 < kTile ? rows - r0 : kTile);
    GradRowCoeffs lc[kTile];
    float rs_a[kTile];
    for (int k = 0; k < n; ++k) {
      const int64_t rr = r0 + k;
      if constexpr (kLayer) {
        lc[k] = layer_first_pass(dy + rr * H, h + rr * H, dh + rr * H, stat1[rr], stat0[rr], scale, H, eps);
      } else {
        rs_a[k] = rms_grad_a(rms_first_pass(dy + rr * H, h + rr * H, dh + rr * H, scale, H), stat0[rr], inv_h);
      }
    }
    auto sweep = [&](auto rows_c) {
      constexpr int kN = decltype(rows_c)::value;
      using K = std::conditional_t<kLayer, GradLanes, RmsGradLanes>;
      K k[kN];
      Lanes mv[kN];
      R* out[kN];
      bool nt = stream;
      for (int i = 0; i < kN; ++i) {
        if constexpr (kLayer) {
          k[i] = GradLanes(lc[i]);
          mv[i] = Lanes::splat(lc[i].mean);
        } else {
          k[i] = RmsGradLanes(rs_a[i], stat0[r0 + i]);
          mv[i] = Lanes::zero();
        }
        out[i] = d_sum + (r0 + i) * H;
        nt = nt && stream_ok(out[i]);
      }
      // Row i's dx and x_hat at columns c .. c+w-1 (gm: the scale there).
      auto step = [&](int i, int64_t c, int64_t w, const Lanes& gm, Lanes& g, Lanes& b) {
        const Lanes d = load_n(dy + (r0 + i) * H + c, w);
        const Lanes hv = load_n(h + (r0 + i) * H + c, w);
        Lanes dx;
        if constexpr (kLayer) {
          const Lanes x2 = hv - mv[i];
          dx = k[i].pd_x(x2, d * gm);
          reduce_step(g, b, k[i].res(x2), d);
        } else {
          dx = k[i].dx(hv, d * gm);
          reduce_step(g, b, k[i].res(hv), d);
        }
        return dx + load_n(dh + (r0 + i) * H + c, w);
      };
      with_stream(nt, [&](auto ntc) {
        constexpr bool kNt = decltype(ntc)::value;
        for_block_pairs(
            H,
            [&](int64_t c) {
              Lanes g0 = load_n(acc_g + c, kLanes), g1 = load_n(acc_g + c + kLanes, kLanes);
              Lanes b0 = Lanes::zero(), b1 = Lanes::zero();
              if constexpr (kBeta) b0 = load_n(acc_b + c, kLanes), b1 = load_n(acc_b + c + kLanes, kLanes);
              const Lanes gm0 = load_n(scale + c, kLanes), gm1 = load_n(scale + c + kLanes, kLanes);
#pragma GCC unroll 4
              for (int i = 0; i < kN; ++i) {
                const Lanes o0 = step(i, c, kLanes, gm0, g0, b0);
                const Lanes o1 = step(i, c + kLanes, kLanes, gm1, g1, b1);
                store2<kNt>(out[i] + c, o0, o1);
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
              const Lanes gm = load_n(scale + c, w);
#pragma GCC unroll 4
              for (int i = 0; i < kN; ++i) put<kNt>(out[i] + c, step(i, c, w, gm, g, b), w);
              store_n(acc_g + c, g, w);
              if constexpr (kBeta) store_n(acc_b + c, b, w);
            });
      });
    };
    for_tile_rows<kTile>(n, sweep);
  }
}

// Four rows a tile while their dy, h and dh stay well within L2 for the
// sweep (512 KiB); longer rows two at a time, as the norms' fused
// backwards do. Fewer rows a tile add each column's rows in the same order:
// the same bits.
template <typename D, typename R, bool kLayer, bool kBeta>
void add_backward_rows(const D* dy, const R* dh, const R* h, const float* stat0, const float* stat1, const float* scale,
                       int64_t rows, int64_t H, float eps, bool stream, R* d_sum, float* acc_g, float* acc_b) {
  const int64_t tile_bytes = int64_t(kReduceRowBlock) * H * int64_t(sizeof(D) + 2 * sizeof(R));
  if (tile_bytes <= (int64_t(512) << 10)) {
    add_backward_rows_impl<D, R, kLayer, kBeta, 4>(dy, dh, h, stat0, stat1, scale, rows, H, eps, stream, d_sum, acc_g,
                                                   acc_b);
  } else {
    add_backward_rows_impl<D, R, kLayer, kBeta, 2>(dy, dh, h, stat0, stat1, scale, rows, H, eps, stream, d_sum, acc_g,
                                                   acc_b);
  }
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
