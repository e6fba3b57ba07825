// Row-walking pieces shared by the LayerNorm ("centered": x - mean) and
// RMSNorm ("uncentered") row kernels: block iteration along a row, stores
// (plain or non-temporal), the per-thread row scratch, grouped row sums
// and the fused backwards' tile dispatch. Both families use these same
// templates, so they walk, store, stream and associate their sums alike.
// Included only by the *_rows_isa.h headers, compiled once per ISA.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/lanes.h"

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
inline constexpr int64_t kScratchMinCols = 256;
inline bool scratch_rows(int64_t H, int64_t floats_per_col) {
  const int64_t bytes = H * floats_per_col * int64_t(sizeof(float));
  return H >= kScratchMinCols && bytes <= (int64_t(256) << 10);
}

// The sums of kSums terms over each of a group's n (<= kGroup) rows:
// out[s][k] is sum s of row k, with row_sums' association. A group of 16
// adds its rows' lanes together (sum_lanes16): for short rows the lane
// additions and the chain behind them are much of the work. term(k, c, w, t)
// is row k's term.
template <int kAcc, int kSums, int kGroup, class Term>
inline void group_row_sums(int n, int64_t H, Term&& term, float (*out)[kGroup]) {
  if constexpr (kGroup == 16) {
    Lanes part[kSums][16];
    for (int k = 0; k < 16; ++k) {
      Lanes p[kSums];
      if (k < n) {
        row_partials<kAcc, kSums>(H, [&](int64_t c, int64_t w, Lanes* t) { term(k, c, w, t); }, p);
      } else {
        for (int i = 0; i < kSums; ++i) p[i] = Lanes::zero();
      }
      for (int i = 0; i < kSums; ++i) part[i][k] = p[i];
    }
    for (int i = 0; i < kSums; ++i) sum_lanes16(part[i], out[i]);
  } else {
    for (int k = 0; k < n; ++k) {
      float o[kSums];
      row_sums<kAcc, kSums>(H, [&](int64_t c, int64_t w, Lanes* t) { term(k, c, w, t); }, o);
      for (int i = 0; i < kSums; ++i) out[i][k] = o[i];
    }
  }
}

// Rows of at most this many bytes go sixteen at a time (the forward and
// grad rows of both norms).
inline constexpr int64_t kGroupMaxRowBytes = 512;

// Calls sweep(std::integral_constant<int, n>{}) for a tile of n (1 to
// kTile <= 4) rows: the fused backwards' column sweeps see their row count
// as a constant, so they unroll. Only the tile sizes that can occur are
// compiled.
template <int kTile, class Sweep>
inline void for_tile_rows(int n, Sweep&& sweep) {
  static_assert(kTile >= 1 && kTile <= 4, "tiles of 1 to 4 rows");
  switch (n) {
    case 4:
      if constexpr (kTile >= 4) sweep(std::integral_constant<int, 4>{});
      break;
    case 3:
      if constexpr (kTile >= 3) sweep(std::integral_constant<int, 3>{});
      break;
    case 2:
      if constexpr (kTile >= 2) sweep(std::integral_constant<int, 2>{});
      break;
    default:
      sweep(std::integral_constant<int, 1>{});
      break;
  }
}

}  // namespace JAX_LNGB_ISA_NS
}  // namespace jax_lngb
