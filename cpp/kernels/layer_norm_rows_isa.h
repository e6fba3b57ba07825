// ISA-specific bodies of the LayerNorm row kernels (see layer_norm_rows.h
// for the math); included only by layer_norm_rows_isa.cc, which is compiled
// once per instruction set. Every sum over a row goes through row_sums
// (lanes.h), whose association is fixed by H alone.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "lanes.h"
#include "layer_norm_rows.h"
#include "prefetch.h"

namespace jax_lngb {
namespace JAX_LNGB_ISA_NS {

// Walks a row of n columns in 16-column blocks, full blocks in pairs where
// possible: f2(c) for columns c .. c+31, then f(c, w) for what is left (a
// full block, w = 16, and/or the partial one at the end). Once inlined, the
// full-block calls see a constant width.
template <class F2, class F>
inline void for_block_pairs(int64_t n, F2&& f2, F&& f) {
  int64_t c = 0;
  for (; c + 2 * kLanes <= n; c += 2 * kLanes) f2(c);
  for (; c + kLanes <= n; c += kLanes) f(c, int64_t(kLanes));
  if (c < n) f(c, n - c);
}

// Stores w (<= 16) lanes; kStream: non-temporally when the block is whole.
template <bool kStream, typename T>
inline void put(T* p, const Lanes& v, int64_t w) {
  if (w != kLanes) return store_n(p, v, w);
  if (kStream) {
    v.stream(p);
  } else {
    v.store(p);
  }
}

// Calls f(std::true_type{}) or f(std::false_type{}): the loop body is
// compiled for both kinds of store, the choice made once per row.
template <class F>
inline void with_stream(bool nt, F&& f) {
  if (nt) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

// Non-temporal stores of whole 16-element blocks need the row start aligned
// to 16 elements.
template <typename T>
inline bool stream_ok(const T* row) {
  return (reinterpret_cast<uintptr_t>(row) % (kLanes * sizeof(T))) == 0;
}

// Per-thread float32 scratch for a row's intermediate values (see
// scratch_rows), grown on demand and kept.
inline float* row_scratch(int64_t floats) {
  thread_local std::vector<float> buf;
  if (int64_t(buf.size()) < floats) buf.resize(size_t(floats));
  return buf.data();
}

template <typename T>
inline constexpr bool kWiden = !std::is_same_v<T, float>;

// A row's first pass is the only one that reads memory; the later passes
// and the reduction run from cache. The first pass therefore calls
// prefetch_ahead (prefetch.h) for each block it reads: rows are contiguous,
// so that requests the next row or two. One request per block, which for
// the 16-bit formats is two per 64-byte line: measured faster than skipping
// every other block.

// Whether a row's first pass should leave float32 copies in the row
// scratch for the later passes: not for short rows, where the later passes
// would reload blocks still in flight in the store buffer, nor for rows whose
// copies would not stay in L2 (re-reading the input is then cheaper).
inline bool scratch_rows(int64_t H, int64_t floats_per_col) {
  const int64_t bytes = H * floats_per_col * int64_t(sizeof(float));
  return H >= 256 && bytes <= (int64_t(256) << 10);
}

// kGroup rows at a time: each pass runs over the group's rows before the
// next pass starts. A short row is mostly one serial chain (row sum, lane
// tree, mean, second sum, tree, square root and division, output), and the
// out-of-order core hides one chain behind another only if they are close
// together in the instruction stream. Every row's arithmetic is the same,
// in the same order, whatever kGroup: the same bits.
// kScratch: a 16-bit row is widened once, on the first pass, into the row
// scratch; otherwise every pass reads (and widens) the input row.
template <typename T, bool kScratch, int kGroup>
void forward_rows_impl(const T* x, int64_t rows, int64_t H, const float* gamma, const float* beta,
                       float eps, bool stream, T* y, float* mean, float* variance) {
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
    float m[kGroup], v[kGroup];
    for (int k = 0; k < n; ++k) {
      const T* xr = x + (r0 + k) * H;
      float s;
      row_sums<4, 1>(
          H,
          [&](int64_t c, int64_t w, Lanes* t) {
            prefetch_ahead(xr + c);
            t[0] = load_n(xr + c, w);
            if constexpr (kScratch) store_n(xs + k * H + c, t[0], w);
          },
          &s);
      m[k] = s / fh;
    }
    for (int k = 0; k < n; ++k) {
      const Lanes mv = Lanes::splat(m[k]);
      float q;
      row_sums<4, 1>(
          H,
          [&](int64_t c, int64_t w, Lanes* t) {
            const Lanes d = row(k, c, w) - mv;
            t[0] = d * d;
          },
          &q);
      v[k] = q / fh;
    }
    for (int k = 0; k < n; ++k) {
      T* yr = y + (r0 + k) * H;
      const Lanes mv = Lanes::splat(m[k]);
      const Lanes rv = Lanes::splat(1.0f / std::sqrt(v[k] + eps));
      with_stream(stream && stream_ok(yr), [&](auto nt) {
        constexpr bool kNt = decltype(nt)::value;
        auto out = [&](int64_t c, int64_t w) {
          const Lanes xhat = (row(k, c, w) - mv) * rv;
          return xhat * load_n(gamma + c, w) + load_n(beta + c, w);
        };
        for_block_pairs(
            H, [&](int64_t c) { store2<kNt>(yr + c, out(c, kLanes), out(c + kLanes, kLanes)); },
            [&](int64_t c, int64_t w) { put<kNt>(yr + c, out(c, w), w); });
      });
      mean[r0 + k] = m[k];
      variance[r0 + k] = v[k];
    }
  }
}

// Rows of at most this many bytes go four at a time (forward_rows_impl).
inline constexpr int64_t kGroupMaxRowBytes = 512;

template <typename T>
void forward_rows(const T* x, int64_t rows, int64_t H, const float* gamma, const float* beta,
                  float eps, bool stream, T* y, float* mean, float* variance) {
  if (kWiden<T> && scratch_rows(H, 1)) {
    forward_rows_impl<T, true, 1>(x, rows, H, gamma, beta, eps, stream, y, mean, variance);
  } else if (H * int64_t(sizeof(T)) <= kGroupMaxRowBytes) {
    forward_rows_impl<T, false, 4>(x, rows, H, gamma, beta, eps, stream, y, mean, variance);
  } else {
    forward_rows_impl<T, false, 1>(x, rows, H, gamma, beta, eps, stream, y, mean, variance);
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

// The row's constants from the sums of those terms.
[[gnu::always_inline]] inline GradRowCoeffs grad_coeffs(const float* s, float variance, float mean, int64_t H, float eps) {
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
  explicit GradLanes(const GradRowCoeffs& k)
      : a(Lanes::splat(k.a)), b(Lanes::splat(k.b)), rstd(Lanes::splat(k.rstd)) {}
  Lanes pd_x(const Lanes& x2, const Lanes& x1) const { return (a * x2 + b) + x1 * rstd; }
  Lanes res(const Lanes& x2) const { return x2 * rstd; }
};

// kScratch: the first pass keeps x2 = x - mean and x1 = dy * gamma in the
// row scratch for the second; otherwise the second pass recomputes them.
// kGroup rows at a time, each pass over the group's rows before the next
// (short rows, as in forward_rows_impl: one row's serial chain of sums,
// square root and division hides behind the next row's); the same
// arithmetic per row whatever kGroup.
template <typename T, typename TRes, bool kResIsOutput, bool kScratch, int kGroup>
void grad_rows_impl(const T* dy, const T* x, const float* variance, const float* mean,
                    const float* gamma, int64_t rows, int64_t H, float eps, bool stream, T* pd_x,
                    TRes* res) {
  static_assert(!kScratch || kGroup == 1, "the row scratch holds one row");
  float* x2s = kScratch ? row_scratch(2 * H) : nullptr;
  float* x1s = kScratch ? x2s + H : nullptr;
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    const int n = int(rows - r0 < kGroup ? rows - r0 : kGroup);
    GradRowCoeffs coeffs[kGroup];
    for (int g = 0; g < n; ++g) {
      const int64_t r = r0 + g;
      const T* dr = dy + r * H;
      const T* xr = x + r * H;
      const Lanes mv = Lanes::splat(mean[r]);
      float s[3];  // sum(x1 * x2), sum(x1), sum(x2)
      row_sums<2, 3>(
          H,
          [&](int64_t c, int64_t w, Lanes* t) {
            prefetch_ahead(xr + c);
            prefetch_ahead(dr + c);
            const Lanes x2 = load_n(xr + c, w) - mv;
            const Lanes x1 = load_n(dr + c, w) * load_n(gamma + c, w);
            if constexpr (kScratch) {
              store_n(x2s + c, x2, w);
              store_n(x1s + c, x1, w);
            }
            grad_terms(x1, x2, t);
          },
          s);
      coeffs[g] = grad_coeffs(s, variance[r], mean[r], H, eps);
    }
    for (int g = 0; g < n; ++g) {
      const int64_t r = r0 + g;
      const T* dr = dy + r * H;
      const T* xr = x + r * H;
      T* out = pd_x + r * H;
      TRes* rr = res + r * H;
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
      // res_for_gamma is streamed with pd_x only when it is an output.
      const bool nt = stream && stream_ok(out) && (!kResIsOutput || stream_ok(rr));
      with_stream(nt, [&](auto ntc) {
        constexpr bool kNt = decltype(ntc)::value;
        auto dx = [&](int64_t c, int64_t w) { return k.pd_x(x2_at(c, w), x1_at(c, w)); };
        auto rg = [&](int64_t c, int64_t w) { return k.res(x2_at(c, w)); };
        for_block_pairs(
            H,
            [&](int64_t c) {
              store2<kNt>(out + c, dx(c, kLanes), dx(c + kLanes, kLanes));
              store2<kNt && kResIsOutput>(rr + c, rg(c, kLanes), rg(c + kLanes, kLanes));
            },
            [&](int64_t c, int64_t w) {
              put<kNt>(out + c, dx(c, w), w);
              put<kNt && kResIsOutput>(rr + c, rg(c, w), w);
            });
      });
    }
  }
}

// kResIsOutput: res_for_gamma goes to memory (the public LayerNormGrad) and
// may be streamed; otherwise it is scratch that must stay in cache. The
// first pass keeps x2 = x - mean and x1 = dy * gamma of the row in a float32
// row scratch (L1/L2) when the row suits it (scratch_rows), so the second
// pass neither reloads nor reconverts x, dy and gamma. Short rows go
// kGroup at a time (kGroupMaxRowBytes, as in the forward).
template <typename T, typename TRes, bool kResIsOutput>
void grad_rows(const T* dy, const T* x, const float* variance, const float* mean,
               const float* gamma, int64_t rows, int64_t H, float eps, bool stream, T* pd_x,
               TRes* res) {
  if (scratch_rows(H, 2)) {
    grad_rows_impl<T, TRes, kResIsOutput, true, 1>(dy, x, variance, mean, gamma, rows, H, eps,
                                                   stream, pd_x, res);
  } else if (H * int64_t(sizeof(T)) <= kGroupMaxRowBytes) {
    grad_rows_impl<T, TRes, kResIsOutput, false, 4>(dy, x, variance, mean, gamma, rows, H, eps,
                                                    stream, pd_x, res);
  } else {
    grad_rows_impl<T, TRes, kResIsOutput, false, 1>(dy, x, variance, mean, gamma, rows, H, eps,
                                                    stream, pd_x, res);
  }
}

// The fused backward's path for long rows (layer_norm_backward.cc): the
// first pass of `rows` rows, leaving each row's constants in coeffs ...
template <typename T>
void grad_coeffs_rows(const T* dy, const T* x, const float* variance, const float* mean,
                      const float* gamma, int64_t rows, int64_t H, float eps,
                      GradRowCoeffs* coeffs) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* dr = dy + r * H;
    const T* xr = x + r * H;
    const Lanes mv = Lanes::splat(mean[r]);
    float s[3];
    row_sums<2, 3>(
        H,
        [&](int64_t c, int64_t w, Lanes* t) {
          prefetch_ahead(xr + c);
          prefetch_ahead(dr + c);
          grad_terms(load_n(dr + c, w) * load_n(gamma + c, w), load_n(xr + c, w) - mv, t);
        },
        s);
    coeffs[r] = grad_coeffs(s, variance[r], mean[r], H, eps);
  }
}

// ... then the second pass over columns [c0, c1) of the same rows (c0 a
// multiple of 16), x and dy read again from cache: pd_x to its place in
// memory, float32 res_for_gamma to res, row r's columns at res + r * ld_res.
template <typename T>
void grad_cols_rows(const T* dy, const T* x, const GradRowCoeffs* coeffs, const float* gamma,
                    int64_t rows, int64_t H, int64_t c0, int64_t c1, bool stream, T* pd_x,
                    float* res, int64_t ld_res) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* dr = dy + r * H;
    const T* xr = x + r * H;
    T* out = pd_x + r * H;
    float* rr = res + r * ld_res;
    const Lanes mv = Lanes::splat(coeffs[r].mean);
    const GradLanes k(coeffs[r]);
    with_stream(stream && stream_ok(out), [&](auto ntc) {
      constexpr bool kNt = decltype(ntc)::value;
      auto x2_at = [&](int64_t c, int64_t w) { return load_n(xr + c, w) - mv; };
      auto dx = [&](int64_t c, int64_t w) {
        return k.pd_x(x2_at(c, w), load_n(dr + c, w) * load_n(gamma + c, w));
      };
      for_block_pairs(
          c1 - c0,
          [&](int64_t j) {
            store2<kNt>(out + c0 + j, dx(c0 + j, kLanes), dx(c0 + j + kLanes, kLanes));
            store2<false>(rr + j, k.res(x2_at(c0 + j, kLanes)), k.res(x2_at(c0 + j + kLanes, kLanes)));
          },
          [&](int64_t j, int64_t w) {
            put<kNt>(out + c0 + j, dx(c0 + j, w), w);
            put<false>(rr + j, k.res(x2_at(c0 + j, w)), w);
          });
    });
  }
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
