#include "tiling/layer_norm_kernel_plan.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

namespace jax_lngb::tiling {
namespace {

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();

uint64_t align32(uint64_t v) { return (v + 31) / 32 * 32; }
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t ceil8(uint64_t v) { return (v + 7) / 8 * 8; }

[[noreturn]] void fail(const char* api, const std::string& what) { throw TilingError(std::string(api) + ": " + what); }

struct Checked {
  uint64_t rows, h, orig_h, ts, out_ts, ub, cores;
};

Checked check_request(const LayerNormKernelRequest& q, const char* api, bool check_out) {
  const uint32_t ts = check_type_size(q.type_size, api);
  const uint32_t out_ts = check_out ? check_type_size(q.out_type_size, api) : ts;
  if (q.rows < 1 || uint64_t(q.rows) > kU32Max)
    fail(api, "rows must be in [1, 2^32 - 1]; got " + std::to_string(q.rows));
  if (q.h < 1 || uint64_t(q.h) > kU32Max) fail(api, "h must be in [1, 2^32 - 1]; got " + std::to_string(q.h));
  const int64_t orig_h = q.original_h == 0 ? q.h : q.original_h;
  if (orig_h < 1 || orig_h > q.h)
    fail(api, "original_h must be in [1, h = " + std::to_string(q.h) + "]; got " + std::to_string(orig_h));
  if ((q.h * ts) % 32 != 0 || (q.h * out_ts) % 32 != 0)
    fail(api, "h * type_size must be a multiple of 32 bytes (pad H with zeros); got h = " + std::to_string(q.h) +
                  " with type sizes " + std::to_string(ts) + " and " + std::to_string(out_ts));
  if (uint64_t(q.rows) * uint64_t(q.h) > kU32Max)
    fail(api, "rows * h = " + std::to_string(uint64_t(q.rows) * uint64_t(q.h)) +
                  " exceeds the uint32 sizes of CANN's tilings; split the rows");
  if (q.num_cores < 1 || q.num_cores > 65535)
    fail(api, "num_cores must be in [1, 65535]; got " + std::to_string(q.num_cores));
  if (q.ub_bytes < 1024 || uint64_t(q.ub_bytes) > kU32Max)
    fail(api, "ub_bytes must be in [1024, 2^32 - 1]; got " + std::to_string(q.ub_bytes));
  if (!(q.epsilon >= 0.0) || !(q.epsilon < 1e30)) fail(api, "epsilon must be a finite value >= 0");
  return {uint64_t(q.rows), uint64_t(q.h), uint64_t(orig_h), ts, out_ts, uint64_t(q.ub_bytes), uint64_t(q.num_cores)};
}

// Largest tile (double-buffered if possible) whose footprint fits `ub`;
// the footprint must be non-decreasing in the tile rows. Returns
// {tile_rows, buffer_num}, or {0, 0} when not even one row fits.
std::pair<uint64_t, uint64_t> fit_tile(uint64_t rows, uint64_t cap, uint64_t ub,
                                       const std::function<uint64_t(uint64_t, uint64_t)>& footprint) {
  for (uint64_t bn : {2u, 1u}) {
    if (footprint(1, bn) > ub) continue;
    uint64_t lo = 1, hi = std::min(rows, cap);
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (footprint(mid, bn) <= ub)
        lo = mid;
      else
        hi = mid - 1;
    }
    return {lo, bn};
  }
  return {0, 0};
}

// Rows a single API call may get: the UB bounds them far below this
// anyway; dav-3510's LayerNormGradBeta counts its rows in a uint16_t.
uint64_t max_call_rows(NpuArch arch) { return npu_arch_defaults(arch).grad_beta_3510 ? kMaxRowsPerCall3510 : kU32Max; }

// LayerNorm's buffer for a whole tile in one pass (float32, no source reuse:
// a padded tile is normalized twice from the same x).
uint64_t forward_tmp_bytes(uint64_t r, uint64_t h, uint64_t orig_h) {
  return layer_norm_max_min_tmp_size({1, int64_t(r), int64_t(h), int64_t(orig_h)}, 4, false).max_bytes;
}

// The buffer LayerNormGrad (float32, isReuseSource) and then
// LayerNormGradBeta share. On dav-2002/2201 LayerNormGrad rounds its rows
// per pass up to 8, so its four temporaries need 8 rows' worth even for a
// smaller tile (CANN's documented minimum is not enough there).
uint64_t backward_tmp_bytes(uint64_t r, uint64_t h, uint64_t orig_h, NpuArch arch) {
  const uint64_t gb_min = 2 * h * 4;
  uint64_t lng;
  if (arch == NpuArch::kDav3510) {
    lng = layer_norm_grad_max_min_tmp_size({1, int64_t(r), int64_t(h), int64_t(orig_h)}, 4, true, arch).max_bytes;
  } else {
    lng = 4 * ceil8(r) * h * 4;
  }
  return std::max(lng, gb_min);
}

void check_grad_regions(const LayerNormGradTiling& t, uint64_t tmp_bytes, const char* api) {
  // What the emulation checks and the device silently overruns: every
  // temporary inside the buffer.
  const uint64_t slots = tmp_bytes / 4;
  const std::pair<uint32_t, uint32_t> regions[] = {{t.tmp_tensor_bsh_pos, t.tmp_tensor_bsh_size},
                                                   {t.pd_var_tensor_pos, t.pd_var_tensor_size},
                                                   {t.pd_mean_tensor_pos, t.pd_mean_tensor_size},
                                                   {t.x3_tensor_pos, t.x3_tensor_size}};
  for (const auto& [pos, size] : regions)
    if (uint64_t(pos) + size > slots)
      fail(api, "internal error: a LayerNormGrad temporary ends at fp32 slot " + std::to_string(uint64_t(pos) + size) +
                    ", past the " + std::to_string(slots) + " slots of its buffer");
}

}  // namespace

uint64_t layer_norm_forward_ub_bytes(uint64_t r, uint64_t h, uint64_t ts, bool padded, uint64_t tmp_bytes,
                                     uint64_t bn) {
  // One term per InitBuffer of LayerNormForwardKernel::Init, in its order.
  const uint64_t s = ceil8(r);
  uint64_t total = 2 * bn * align32(r * h * ts);             // x in, y out
  total += bn * align32(2 * s * 4);                          // mean and variance out
  if (ts == 2) total += 2 * align32(r * h * 4);              // float32 x and y
  total += 2 * align32(h * 4);                               // gamma, beta
  if (padded) total += align32(h * 4) + align32(2 * s * 4);  // column mask, first pass's statistics
  total += align32(tmp_bytes);
  return total;
}

uint64_t layer_norm_backward_ub_bytes(uint64_t r, uint64_t h, uint64_t ts, bool padded, bool fused, uint64_t tmp_bytes,
                                      uint64_t bn) {
  // One term per InitBuffer of LayerNormBackwardKernel::Init, in its order.
  const uint64_t s = ceil8(r);
  const uint64_t tile = align32(r * h * ts), tile32 = align32(r * h * 4);
  uint64_t total = 3 * bn * tile;                        // dy, x in; pd_x out
  total += bn * align32(2 * s * 4);                      // mean and variance in
  total += fused ? tile32 : bn * tile;                   // res_for_gamma (UB only when fused)
  if (fused || ts == 2) total += tile32;                 // LayerNormGrad's float32 dy (it overwrites it)
  if (ts == 2) total += 2 * tile32 + tile32;             // float32 x, pd_x; res_for_gamma or dy for LayerNormGradBeta
  total += align32(h * 4);                               // gamma
  if (padded) total += align32(h * 4) + align32(s * 4);  // column mask, zero means
  total += align32(tmp_bytes);
  if (fused) total += 2 * align32(h * 4) + bn * align32(2 * h * 4);  // one call's sums, group accumulators
  return total;
}

std::vector<uint8_t> LayerNormForwardKernelPlan::pack() const {
  uint32_t w[jax_lngb_ascend::kLayerNormForwardTilingWords];
  std::memcpy(w, &tiling, sizeof w);
  return pack_words(w, jax_lngb_ascend::kLayerNormForwardTilingWords);
}

std::vector<uint8_t> LayerNormBackwardKernelPlan::pack() const {
  uint32_t w[jax_lngb_ascend::kLayerNormBackwardTilingWords];
  std::memcpy(w, &tiling, sizeof w);
  return pack_words(w, jax_lngb_ascend::kLayerNormBackwardTilingWords);
}

LayerNormForwardKernelPlan plan_layer_norm_forward_kernel(const LayerNormKernelRequest& q) {
  constexpr const char* kApi = "plan_layer_norm_forward_kernel";
  const Checked c = check_request(q, kApi, false);
  const bool padded = c.orig_h != c.h;
  const auto [tile_rows, bn] = fit_tile(c.rows, max_call_rows(q.npu_arch), c.ub, [&](uint64_t r, uint64_t b) {
    return layer_norm_forward_ub_bytes(r, c.h, c.ts, padded, forward_tmp_bytes(r, c.h, c.orig_h), b);
  });
  if (tile_rows == 0)
    fail(kApi,
         "a unified buffer of " + std::to_string(c.ub) + " bytes cannot hold one row of H = " + std::to_string(c.h) +
             " (LayerNorm never splits H): needs " +
             std::to_string(layer_norm_forward_ub_bytes(1, c.h, c.ts, padded, forward_tmp_bytes(1, c.h, c.orig_h), 1)) +
             " bytes");
  LayerNormForwardKernelPlan p;
  auto& t = p.tiling;
  t.rows = uint32_t(c.rows);
  t.h_length = uint32_t(c.h);
  t.original_h_length = uint32_t(c.orig_h);
  t.tile_rows = uint32_t(tile_rows);
  t.num_tiles = uint32_t(ceil_div(c.rows, tile_rows));
  t.last_tile_rows = uint32_t(c.rows - uint64_t(t.num_tiles - 1) * tile_rows);
  t.stat_stride = uint32_t(ceil8(tile_rows));
  t.buffer_num = uint32_t(bn);
  const uint64_t tmp = forward_tmp_bytes(tile_rows, c.h, c.orig_h);
  t.tmp_bytes = uint32_t(tmp);
  t.epsilon_bits = f32_bits(float(q.epsilon));
  const int64_t hh = int64_t(c.h), oh = int64_t(c.orig_h);
  p.api_tile = layer_norm_nd_tiling_info({1, int64_t(tile_rows), hh, oh}, int64_t(tmp), 4, false);
  p.api_last = layer_norm_nd_tiling_info({1, int64_t(t.last_tile_rows), hh, oh}, int64_t(tmp), 4, false);
  const auto wt = p.api_tile.words(), wl = p.api_last.words();
  std::copy(wt.begin(), wt.end(), t.api_tile);
  std::copy(wl.begin(), wl.end(), t.api_last);
  p.block_dim = uint32_t(std::min<uint64_t>(c.cores, t.num_tiles));
  p.ub_bytes_used = layer_norm_forward_ub_bytes(tile_rows, c.h, c.ts, padded, tmp, bn);
  return p;
}

LayerNormBackwardKernelPlan plan_layer_norm_backward_kernel(const LayerNormKernelRequest& q, bool fused) {
  const char* kApi = fused ? "plan_layer_norm_backward_kernel" : "plan_layer_norm_grad_kernel";
  const Checked c = check_request(q, kApi, fused);
  const bool padded = c.orig_h != c.h;
  const auto [tile_rows, bn] = fit_tile(c.rows, max_call_rows(q.npu_arch), c.ub, [&](uint64_t r, uint64_t b) {
    return layer_norm_backward_ub_bytes(r, c.h, c.ts, padded, fused, backward_tmp_bytes(r, c.h, c.orig_h, q.npu_arch),
                                        b);
  });
  if (tile_rows == 0)
    fail(kApi, "a unified buffer of " + std::to_string(c.ub) + " bytes cannot hold one row of H = " +
                   std::to_string(c.h) + " (LayerNormGrad never splits H and keeps 8 rows of temporaries): needs " +
                   std::to_string(layer_norm_backward_ub_bytes(1, c.h, c.ts, padded, fused,
                                                               backward_tmp_bytes(1, c.h, c.orig_h, q.npu_arch), 1)) +
                   " bytes");
  LayerNormBackwardKernelPlan p;
  auto& t = p.tiling;
  auto& g = t.gb;
  g.rows = uint32_t(c.rows);
  g.h_length = uint32_t(c.h);
  g.tile_rows = uint32_t(tile_rows);
  g.num_tiles = uint32_t(ceil_div(c.rows, tile_rows));
  g.last_tile_rows = uint32_t(c.rows - uint64_t(g.num_tiles - 1) * tile_rows);
  // The group split of grad_beta_kernel_plan.cc: fixed by the problem and
  // the UB, never by the core count.
  const uint64_t want_groups = std::min<uint64_t>(g.num_tiles, jax_lngb_ascend::kMaxGroups);
  g.tiles_per_group = uint32_t(ceil_div(g.num_tiles, want_groups));
  g.num_groups = uint32_t(ceil_div(g.num_tiles, g.tiles_per_group));
  g.buffer_num = uint32_t(bn);
  g.is_reuse_source = 1;
  const uint64_t tmp = backward_tmp_bytes(tile_rows, c.h, c.orig_h, q.npu_arch);
  g.stack_buffer_bytes = uint32_t(tmp);
  t.original_h_length = uint32_t(c.orig_h);
  t.stat_stride = uint32_t(ceil8(tile_rows));
  t.tmp_bytes = uint32_t(tmp);
  t.epsilon_bits = f32_bits(float(q.epsilon));
  t.fused = fused ? 1 : 0;

  const int64_t hh = int64_t(c.h), oh = int64_t(c.orig_h);
  p.lng_tile = layer_norm_grad_nd_tiling_info({1, int64_t(tile_rows), hh, oh}, int64_t(tmp), 4, true, q.npu_arch);
  p.lng_last =
      layer_norm_grad_nd_tiling_info({1, int64_t(g.last_tile_rows), hh, oh}, int64_t(tmp), 4, true, q.npu_arch);
  if (q.npu_arch != NpuArch::kDav3510) {
    check_grad_regions(p.lng_tile, tmp, kApi);
    check_grad_regions(p.lng_last, tmp, kApi);
  }
  // LayerNormGradBeta sums the padded columns too (they are zero there):
  // hLength == originalHLength, as both of its implementations need.
  p.gb_tile = layer_norm_grad_beta_nd_tiling_info({1, int64_t(tile_rows), hh, hh}, int64_t(tmp), 4, true);
  p.gb_last = layer_norm_grad_beta_nd_tiling_info({1, int64_t(g.last_tile_rows), hh, hh}, int64_t(tmp), 4, true);
  const auto a = p.lng_tile.words(), b = p.lng_last.words();
  const auto d = p.gb_tile.words(), e = p.gb_last.words();
  std::copy(a.begin(), a.end(), t.lng_tile);
  std::copy(b.begin(), b.end(), t.lng_last);
  std::copy(d.begin(), d.end(), g.api_tile);
  std::copy(e.begin(), e.end(), g.api_last);

  if (fused) {
    // Combine: H split into 32-byte aligned column ranges, one per core (as
    // grad_beta_kernel_plan.cc does for the same kernel).
    const uint64_t col_align = c.out_ts == 2 ? 16 : 8;
    const uint64_t cols_per_core = ceil_div(ceil_div(c.h, col_align), c.cores) * col_align;
    const uint64_t per_col = combine_ub_bytes(col_align, c.out_ts, 2) / col_align;
    uint64_t chunk = std::min(cols_per_core, std::max<uint64_t>(col_align, c.ub / per_col / col_align * col_align));
    while (chunk > col_align && combine_ub_bytes(chunk, c.out_ts, 2) > c.ub) chunk -= col_align;
    g.combine_cols_per_core = uint32_t(cols_per_core);
    g.combine_chunk_cols = uint32_t(chunk);
    p.block_dim = uint32_t(std::min<uint64_t>(c.cores, g.num_groups));
    p.combine_block_dim = uint32_t(ceil_div(c.h, cols_per_core));
    p.workspace_bytes = uint64_t(g.num_groups) * 2 * c.h * 4;
    p.combine_ub_bytes_used = combine_ub_bytes(chunk, c.out_ts, 2);
  } else {
    p.block_dim = uint32_t(std::min<uint64_t>(c.cores, g.num_tiles));
  }
  p.ub_bytes_used = layer_norm_backward_ub_bytes(tile_rows, c.h, c.ts, padded, fused, tmp, bn);
  return p;
}

}  // namespace jax_lngb::tiling
