// ISA-specific bodies of the RMSNorm row kernels (see rms_norm_rows.h for
// the math); included only by rms_norm_rows_isa.cc, which is compiled once
// per instruction set. The row-walking helpers (for_block_pairs, put,
// with_stream, stream_ok, group_row_sums, for_tile_rows) are
// norm_rows_common.h's, shared with the LayerNorm kernels, so both families
// store, stream and associate their sums alike.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "base/lanes.h"
#include "base/prefetch.h"
#include "norm_rows_common.h"
#include "reduce_step.h"
#include "rms_norm_rows.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

// 1/H in float32, as CANN's tiling passes it (reciprocalOfHLength); 1 for
// empty rows, whose sums are 0.
inline float rms_inv_h(int64_t H) { return 1.0f / float(H > 0 ? H : 1); }

// rstd of a row from its sum of squares.
[[gnu::always_inline]] inline float rms_rstd(float sum_sq, float inv_h, float eps) {
  return 1.0f / std::sqrt(sum_sq * inv_h + eps);
}

// kGroup rows at a time (16 for short rows, whose one serial chain per row
// the core overlaps only when the rows are close together, and whose lanes
// are added 16 rows at a time): the sums pass, then the output pass from
// cache. The same arithmetic per row whatever kGroup: the same bits.
template <typename T, int kGroup>
void rms_forward_rows_impl(const T* x, int64_t rows, int64_t H, const float* gamma, float eps, bool stream, T* y,
                           float* rstd) {
  const float inv_h = rms_inv_h(H);
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    const int n = int(rows - r0 < kGroup ? rows - r0 : kGroup);
    float s[1][kGroup];
    group_row_sums<4, 1, kGroup>(
        n, H,
        [&](int k, int64_t c, int64_t w, Lanes* t) {
          const T* xr = x + (r0 + k) * H;
          prefetch_ahead(xr + c);
          const Lanes v = load_n(xr + c, w);
          t[0] = v * v;
        },
        s);
    for (int k = 0; k < n; ++k) {
      const T* xr = x + (r0 + k) * H;
      T* yr = y + (r0 + k) * H;
      const float rs = rms_rstd(s[0][k], inv_h, eps);
      const Lanes rv = Lanes::splat(rs);
      with_stream(stream && stream_ok(yr), [&](auto nt) {
        constexpr bool kNt = decltype(nt)::value;
        auto out = [&](int64_t c, int64_t w) { return (load_n(xr + c, w) * rv) * load_n(gamma + c, w); };
        for_block_pairs(
            H, [&](int64_t c) { store2<kNt>(yr + c, out(c, kLanes), out(c + kLanes, kLanes)); },
            [&](int64_t c, int64_t w) { put<kNt>(yr + c, out(c, w), w); });
      });
      rstd[r0 + k] = rs;
    }
  }
}

template <typename T>
void rms_forward_rows(const T* x, int64_t rows, int64_t H, const float* gamma, float eps, bool stream, T* y,
                      float* rstd) {
  if (H * int64_t(sizeof(T)) <= kGroupMaxRowBytes) {
    rms_forward_rows_impl<T, 16>(x, rows, H, gamma, eps, stream, y, rstd);
  } else {
    rms_forward_rows_impl<T, 1>(x, rows, H, gamma, eps, stream, y, rstd);
  }
}

// A row's backward constants: dx = a * x + x1 * rstd, res = x * rstd.
struct RmsGradLanes {
  Lanes a, rstd;
  RmsGradLanes() = default;
  RmsGradLanes(float a_, float rstd_) : a(Lanes::splat(a_)), rstd(Lanes::splat(rstd_)) {}
  Lanes dx(const Lanes& x, const Lanes& x1) const { return a * x + x1 * rstd; }
  Lanes res(const Lanes& x) const { return x * rstd; }
};

// a = (-(rstd^3) * s) * (1/H) from the row's sum s = sum(x1 * x).
[[gnu::always_inline]] inline float rms_grad_a(float s, float rstd, float inv_h) {
  return (-(rstd * rstd * rstd) * s) * inv_h;
}

// The first pass's term: (dy * gamma) * x.
template <typename T>
[[gnu::always_inline]] inline Lanes rms_grad_term(const T* dr, const T* xr, const float* gamma, int64_t c, int64_t w) {
  prefetch_ahead(xr + c);
  prefetch_ahead(dr + c);
  return (load_n(dr + c, w) * load_n(gamma + c, w)) * load_n(xr + c, w);
}

// The first pass over one row, as a function of its own: inlined into the
// fused loop, GCC kept the accumulators of the LayerNorm equivalent on the
// stack (see grad_first_pass_outlined).
template <typename T>
[[gnu::noinline]] float rms_grad_sum(const T* dr, const T* xr, const float* gamma, int64_t H) {
  float s[1];
  row_sums<4, 1>(H, [&](int64_t c, int64_t w, Lanes* t) { t[0] = rms_grad_term(dr, xr, gamma, c, w); }, s);
  return s[0];
}

// The sums of n (<= 16) short rows, 16 rows' lanes added at once: the same
// bits as rms_grad_sum row by row.
template <typename T>
[[gnu::noinline]] void rms_grad_sum_16(const T* dy, const T* x, const float* gamma, int n, int64_t H, float* out) {
  float s[1][16];
  group_row_sums<4, 1, 16>(
      n, H, [&](int k, int64_t c, int64_t w, Lanes* t) { t[0] = rms_grad_term(dy + k * H, x + k * H, gamma, c, w); },
      s);
  for (int k = 0; k < n; ++k) out[k] = s[0][k];
}

// The chained backward's rows: dx and res_for_gamma to memory. kGroup rows'
// first passes, then their output passes (x and dy again from cache).
template <typename T, int kGroup>
void rms_grad_rows_impl(const T* dy, const T* x, const float* rstd, const float* gamma, int64_t rows, int64_t H,
                        bool stream, T* dx, T* res) {
  const float inv_h = rms_inv_h(H);
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    const int n = int(rows - r0 < kGroup ? rows - r0 : kGroup);
    float s[kGroup];
    if constexpr (kGroup == 16) {
      rms_grad_sum_16(dy + r0 * H, x + r0 * H, gamma, n, H, s);
    } else {
      for (int k = 0; k < n; ++k) s[k] = rms_grad_sum(dy + (r0 + k) * H, x + (r0 + k) * H, gamma, H);
    }
    for (int k = 0; k < n; ++k) {
      const int64_t r = r0 + k;
      const T* dr = dy + r * H;
      const T* xr = x + r * H;
      T* out = dx + r * H;
      T* rr = res + r * H;
      const RmsGradLanes kl(rms_grad_a(s[k], rstd[r], inv_h), rstd[r]);
      with_stream(stream && stream_ok(out) && stream_ok(rr), [&](auto ntc) {
        constexpr bool kNt = decltype(ntc)::value;
        auto d = [&](int64_t c, int64_t w) {
          return kl.dx(load_n(xr + c, w), load_n(dr + c, w) * load_n(gamma + c, w));
        };
        auto rg = [&](int64_t c, int64_t w) { return kl.res(load_n(xr + c, w)); };
        for_block_pairs(
            H,
            [&](int64_t c) {
              store2<kNt>(out + c, d(c, kLanes), d(c + kLanes, kLanes));
              store2<kNt>(rr + c, rg(c, kLanes), rg(c + kLanes, kLanes));
            },
            [&](int64_t c, int64_t w) {
              put<kNt>(out + c, d(c, w), w);
              put<kNt>(rr + c, rg(c, w), w);
            });
      });
    }
  }
}

template <typename T>
void rms_grad_rows(const T* dy, const T* x, const float* rstd, const float* gamma, int64_t rows, int64_t H, bool stream,
                   T* dx, T* res) {
  if (H * int64_t(sizeof(T)) <= kGroupMaxRowBytes) {
    rms_grad_rows_impl<T, 16>(dy, x, rstd, gamma, rows, H, stream, dx, res);
  } else {
    rms_grad_rows_impl<T, 1>(dy, x, rstd, gamma, rows, H, stream, dx, res);
  }
}

// The fused backward's rows, kTile rows at a time: each row's first pass,
// then one sweep over the columns of all the tile's rows that writes each
// row's dx and hands res_for_gamma = x * rstd, still in registers, with dy
// to reduce_step, LayerNormGradBeta's step. The gamma accumulators are
// loaded and stored once per tile and column block, and each column adds
// the tile's rows in order: reduce_rows' pd_gamma, bit for bit, without
// res_for_gamma's round trip through memory. RMSNorm has no beta: the
// step's beta accumulator is a register that is never stored, so its adds
// are dead code the compiler drops. The sweep reads x and dy again from
// the rows (in L1/L2 since the first pass). kGroup: kTile, or 16 for short
// rows, whose first passes go 16 at a time ahead of their four tiles'
// sweeps.
template <typename T, int kTile, int kGroup>
void rms_grad_reduce_rows_impl(const T* dy, const T* x, const float* rstd, const float* gamma, int64_t rows, int64_t H,
                               bool stream, T* dx, float* acc_g) {
  static_assert(kTile >= 1 && kTile <= kReduceRowBlock && kReduceRowBlock == 4,
                "the sweep's dispatch below covers tiles of 1 to 4 rows");
  static_assert(kGroup == kTile || (kGroup == 16 && 16 % kTile == 0), "tiles of a group of 16 short rows");
  const float inv_h = rms_inv_h(H);
  float group_s[kGroup];
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int n = int(rows - r0 < kTile ? rows - r0 : kTile);
    const float* s = group_s;
    if constexpr (kGroup == 16) {
      const int64_t t = r0 % kGroup;
      if (t == 0) {
        const int gn = int(rows - r0 < kGroup ? rows - r0 : kGroup);
        rms_grad_sum_16(dy + r0 * H, x + r0 * H, gamma, gn, H, group_s);
      }
      s += t;
    } else {
      for (int k = 0; k < n; ++k) group_s[k] = rms_grad_sum(dy + (r0 + k) * H, x + (r0 + k) * H, gamma, H);
    }
    auto sweep = [&](auto rows_c) {
      constexpr int kN = decltype(rows_c)::value;
      RmsGradLanes k[kN];
      T* out[kN];
      bool nt = stream;
      for (int i = 0; i < kN; ++i) {
        const float rs = rstd[r0 + i];
        k[i] = RmsGradLanes(rms_grad_a(s[i], rs, inv_h), rs);
        out[i] = dx + (r0 + i) * H;
        nt = nt && stream_ok(out[i]);
      }
      auto x_at = [&](int i, int64_t c, int64_t w) { return load_n(x + (r0 + i) * H + c, w); };
      auto dy_at = [&](int i, int64_t c, int64_t w) { return load_n(dy + (r0 + i) * H + c, w); };
      with_stream(nt, [&](auto ntc) {
        constexpr bool kNt = decltype(ntc)::value;
        for_block_pairs(
            H,
            [&](int64_t c) {
              Lanes g0 = load_n(acc_g + c, kLanes), g1 = load_n(acc_g + c + kLanes, kLanes);
              Lanes b0 = Lanes::zero(), b1 = Lanes::zero();  // no beta: never stored
              const Lanes gm0 = load_n(gamma + c, kLanes), gm1 = load_n(gamma + c + kLanes, kLanes);
#pragma GCC unroll 4
              for (int i = 0; i < kN; ++i) {
                const Lanes x0 = x_at(i, c, kLanes), x1 = x_at(i, c + kLanes, kLanes);
                const Lanes d0 = dy_at(i, c, kLanes), d1 = dy_at(i, c + kLanes, kLanes);
                store2<kNt>(out[i] + c, k[i].dx(x0, d0 * gm0), k[i].dx(x1, d1 * gm1));
                reduce_step(g0, b0, k[i].res(x0), d0);
                reduce_step(g1, b1, k[i].res(x1), d1);
              }
              store_n(acc_g + c, g0, kLanes);
              store_n(acc_g + c + kLanes, g1, kLanes);
            },
            [&](int64_t c, int64_t w) {
              Lanes g = load_n(acc_g + c, w);
              Lanes b = Lanes::zero();
              const Lanes gm = load_n(gamma + c, w);
#pragma GCC unroll 4
              for (int i = 0; i < kN; ++i) {
                const Lanes xv = x_at(i, c, w), d = dy_at(i, c, w);
                put<kNt>(out[i] + c, k[i].dx(xv, d * gm), w);
                reduce_step(g, b, k[i].res(xv), d);
              }
              store_n(acc_g + c, g, w);
            });
      });
    };
    for_tile_rows<kTile>(n, sweep);
  }
}

// Tiles of four rows while four rows of x and dy stay well within L2 for
// the sweep (up to 16384 float32 / 32768 16-bit columns); longer rows go two
// at a time, as the LayerNorm fused rows do.
template <typename T>
void rms_grad_reduce_rows(const T* dy, const T* x, const float* rstd, const float* gamma, int64_t rows, int64_t H,
                          bool stream, T* dx, float* acc_g) {
  const int64_t tile_bytes = int64_t(kReduceRowBlock) * 2 * H * int64_t(sizeof(T));
  if (H < kScratchMinCols) {
    rms_grad_reduce_rows_impl<T, 4, 16>(dy, x, rstd, gamma, rows, H, stream, dx, acc_g);
  } else if (tile_bytes <= (int64_t(512) << 10)) {
    rms_grad_reduce_rows_impl<T, 4, 4>(dy, x, rstd, gamma, rows, H, stream, dx, acc_g);
  } else {
    rms_grad_reduce_rows_impl<T, 2, 2>(dy, x, rstd, gamma, rows, H, stream, dx, acc_g);
  }
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
