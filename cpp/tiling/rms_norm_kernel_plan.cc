#include "tiling/rms_norm_kernel_plan.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace jax_lngb::tiling {
namespace {

constexpr const char* kFwd = "plan_rms_norm_forward_kernel";
constexpr const char* kBwd = "plan_rms_norm_backward_kernel";
constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kMaxTileRows = jax_lngb_ascend::kRmsNormMaxTileRows;

uint64_t align32(uint64_t v) { return (v + 31) / 32 * 32; }
uint64_t align8(uint64_t v) { return (v + 7) / 8 * 8; }
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

[[noreturn]] void fail(const char* api, const std::string& what) { throw TilingError(std::string(api) + ": " + what); }

// RmsNorm<float>'s sharedTmpBuffer for a tile of r rows in one chunk: r
// rows of fp32 work and the 8-aligned row sums (GetRmsNormMaxMinTmpSize's
// maximum for {1, r, H}, float).
uint64_t rms_tmp_bytes(uint64_t r, uint64_t h) { return (r * h + align8(r)) * 4; }

// LayerNormGradBeta's sharedTmpBuffer: its minimum for float (2 * H * 4);
// the kernel always passes isReuseSource (res_for_gamma is its own buffer).
uint64_t grad_beta_tmp_bytes(uint64_t h) { return 2 * h * 4; }

void check_request(const RmsNormPlanRequest& q, const char* api, bool backward) {
  const uint32_t in_ts = check_type_size(q.in_type_size, api);
  const uint32_t out_ts = check_type_size(q.out_type_size, api);
  if (q.rows < 1 || uint64_t(q.rows) > kU32Max)
    fail(api, "rows must be in [1, 2^32 - 1]; got " + std::to_string(q.rows));
  if (q.h < 1 || uint64_t(q.h) > kU32Max) fail(api, "h must be in [1, 2^32 - 1]; got " + std::to_string(q.h));
  const int64_t orig_h = q.original_h == 0 ? q.h : q.original_h;
  if (orig_h < 2 || orig_h > q.h)
    fail(api, "original_h must be in [2, h = " + std::to_string(q.h) +
                  "] (CANN's RmsNorm reduction needs two "
                  "columns); got " +
                  std::to_string(orig_h));
  if ((q.h * in_ts) % 32 != 0 || (backward && (q.h * out_ts) % 32 != 0))
    fail(api, "h * type_size must be a multiple of 32 bytes (pad H with zeros); got h = " + std::to_string(q.h));
  if (uint64_t(q.rows) * uint64_t(q.h) > kU32Max)
    fail(api,
         "rows * h must be below 2^32 (CANN's tiling fields); got " + std::to_string(uint64_t(q.rows) * uint64_t(q.h)));
  if (q.num_cores < 1 || q.num_cores > 65535)
    fail(api, "num_cores must be in [1, 65535]; got " + std::to_string(q.num_cores));
  if (q.ub_bytes < 1024 || uint64_t(q.ub_bytes) > kU32Max)
    fail(api, "ub_bytes must be in [1024, 2^32 - 1]; got " + std::to_string(q.ub_bytes));
}

// The largest tile (at most kMaxTileRows and `rows` rows) whose footprint
// fits, double-buffered if possible; {0, 0} when not even one row fits.
template <class Footprint>
std::pair<uint64_t, uint64_t> fit_tile(uint64_t rows, uint64_t ub, Footprint&& footprint) {
  for (uint64_t bn : {2u, 1u}) {
    if (footprint(1, bn) > ub) continue;
    uint64_t lo = 1, hi = std::min(rows, kMaxTileRows);
    while (lo < hi) {  // the footprint grows with the tile
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

}  // namespace

uint64_t sum_tmp_bytes_f32(uint64_t n) { return align8(ceil_div(n, 64)) * 4; }

uint64_t rms_norm_forward_ub_bytes(uint64_t r, uint64_t h, uint64_t /*original_h*/, uint64_t ts, uint64_t bn) {
  // One term per InitBuffer of RmsNormForward::Init, in its order.
  const uint64_t stride = align8(r);
  uint64_t total = 2 * bn * align32(r * h * ts);  // x in, y out
  total += bn * align32(stride * 4);              // rstd out
  total += align32(h * 4);                        // gamma (float32)
  if (ts == 2) total += 2 * align32(r * h * 4);   // fp32 copies of x and y
  total += align32(rms_tmp_bytes(r, h));          // RmsNorm's sharedTmpBuffer
  total += align32(sum_tmp_bytes_f32(h));         // Sum's (over the storage H)
  total += 2 * align32(stride * 4);               // row sums, ones
  return total;
}

uint64_t rms_norm_backward_ub_bytes(uint64_t r, uint64_t h, uint64_t /*original_h*/, uint64_t ts, uint64_t bn) {
  // One term per InitBuffer of RmsNormBackwardPartials::Init, in its order.
  const uint64_t stride = align8(r);
  uint64_t total = 3 * bn * align32(r * h * ts);  // x, dy in; dx out
  total += bn * align32(stride * 4);              // rstd in
  total += align32(h * 4);                        // gamma (float32)
  if (ts == 2) total += 3 * align32(r * h * 4);   // fp32 copies of x, dy, dx
  total += align32(r * h * 4);                    // x1, then res_for_gamma
  total += align32(grad_beta_tmp_bytes(h));       // LayerNormGradBeta's sharedTmpBuffer
  total += align32(sum_tmp_bytes_f32(h));         // Sum's (over the storage H)
  total += 2 * align32(stride * 4);               // s, a
  total += 2 * align32(h * 4);                    // one call's pd_gamma, pd_beta
  total += bn * align32(2 * h * 4);               // group accumulators (out queue)
  return total;
}

std::vector<uint8_t> RmsNormForwardKernelPlan::pack() const {
  uint32_t w[jax_lngb_ascend::kRmsNormForwardTilingWords];
  std::memcpy(w, &tiling, sizeof w);
  return pack_words(w, jax_lngb_ascend::kRmsNormForwardTilingWords);
}

std::vector<uint8_t> RmsNormBackwardKernelPlan::pack() const {
  uint32_t w[jax_lngb_ascend::kRmsNormBackwardTilingWords];
  std::memcpy(w, &tiling, sizeof w);
  return pack_words(w, jax_lngb_ascend::kRmsNormBackwardTilingWords);
}

RmsNormForwardKernelPlan plan_rms_norm_forward_kernel(const RmsNormPlanRequest& q) {
  check_request(q, kFwd, false);
  const uint64_t rows = uint64_t(q.rows), h = uint64_t(q.h), ub = uint64_t(q.ub_bytes);
  const uint64_t h0 = q.original_h == 0 ? h : uint64_t(q.original_h);
  const uint64_t ts = uint64_t(q.in_type_size);
  const auto [tile_rows, bn] =
      fit_tile(rows, ub, [&](uint64_t r, uint64_t b) { return rms_norm_forward_ub_bytes(r, h, h0, ts, b); });
  if (tile_rows == 0)
    fail(kFwd, "a unified buffer of " + std::to_string(ub) + " bytes cannot hold one row of H = " + std::to_string(h) +
                   " (RmsNorm never splits H): needs at least " +
                   std::to_string(rms_norm_forward_ub_bytes(1, h, h0, ts, 1)) + " bytes");

  RmsNormForwardKernelPlan p;
  auto& t = p.tiling;
  t.rows = uint32_t(rows);
  t.h_length = uint32_t(h);
  t.original_h_length = uint32_t(h0);
  t.tile_rows = uint32_t(tile_rows);
  t.num_tiles = uint32_t(ceil_div(rows, tile_rows));
  t.last_tile_rows = uint32_t(rows - uint64_t(t.num_tiles - 1) * tile_rows);
  t.rstd_stride = uint32_t(align8(tile_rows));
  t.buffer_num = uint32_t(bn);
  t.epsilon_bits = f32_bits(static_cast<float>(q.epsilon));
  t.reciprocal_h_bits = f32_bits(1.0f / static_cast<float>(h0));  // formulas.inv_h
  t.rms_tmp_bytes = uint32_t(rms_tmp_bytes(tile_rows, h));
  t.sum_tmp_bytes = uint32_t(sum_tmp_bytes_f32(h));
  // RmsNorm runs on fp32 tiles (half is cast first): type size 4.
  const int64_t hh = int64_t(h), oh = int64_t(h0);
  p.api_tile = rms_norm_tiling_info({1, int64_t(tile_rows), hh}, {1, int64_t(tile_rows), oh}, t.rms_tmp_bytes, 4);
  p.api_last =
      rms_norm_tiling_info({1, int64_t(t.last_tile_rows), hh}, {1, int64_t(t.last_tile_rows), oh}, t.rms_tmp_bytes, 4);
  const auto wt = p.api_tile.words(), wl = p.api_last.words();
  std::copy(wt.begin(), wt.end(), t.api_tile);
  std::copy(wl.begin(), wl.end(), t.api_last);
  p.block_dim = uint32_t(std::min<uint64_t>(uint64_t(q.num_cores), t.num_tiles));
  p.rstd_elems = uint64_t(t.num_tiles) * t.rstd_stride;
  p.ub_bytes_used = rms_norm_forward_ub_bytes(tile_rows, h, h0, ts, bn);
  return p;
}

RmsNormBackwardKernelPlan plan_rms_norm_backward_kernel(const RmsNormPlanRequest& q) {
  check_request(q, kBwd, true);
  const uint64_t rows = uint64_t(q.rows), h = uint64_t(q.h), ub = uint64_t(q.ub_bytes);
  const uint64_t h0 = q.original_h == 0 ? h : uint64_t(q.original_h);
  const uint64_t ts = uint64_t(q.in_type_size);
  const auto [tile_rows, bn] =
      fit_tile(rows, ub, [&](uint64_t r, uint64_t b) { return rms_norm_backward_ub_bytes(r, h, h0, ts, b); });
  if (tile_rows == 0)
    fail(kBwd, "a unified buffer of " + std::to_string(ub) + " bytes cannot hold one row of H = " + std::to_string(h) +
                   " (the kernel never splits H): needs at least " +
                   std::to_string(rms_norm_backward_ub_bytes(1, h, h0, ts, 1)) + " bytes");

  // The combine split (and its checks) are LayerNormGradBeta's: take them
  // from that planner for the same H, output type, UB and cores.
  GradBetaPlanRequest gq;
  gq.rows = 1;
  gq.h = q.h;
  gq.original_h = q.h;
  gq.in_type_size = 4;
  gq.out_type_size = q.out_type_size;
  gq.ub_bytes = q.ub_bytes;
  gq.num_cores = q.num_cores;
  gq.npu_arch = q.npu_arch;
  GradBetaKernelPlan combine;
  try {
    combine = plan_grad_beta_kernel(gq);
  } catch (const TilingError& e) {
    fail(kBwd, std::string("the combine kernel cannot be planned: ") + e.what());
  }

  RmsNormBackwardKernelPlan p;
  auto& t = p.tiling;
  auto& gb = t.gb;
  gb.rows = uint32_t(rows);
  gb.h_length = uint32_t(h);
  gb.tile_rows = uint32_t(tile_rows);
  gb.num_tiles = uint32_t(ceil_div(rows, tile_rows));
  gb.last_tile_rows = uint32_t(rows - uint64_t(gb.num_tiles - 1) * tile_rows);
  const uint64_t want_groups = std::min<uint64_t>(gb.num_tiles, jax_lngb_ascend::kMaxGroups);
  gb.tiles_per_group = uint32_t(ceil_div(gb.num_tiles, want_groups));
  gb.num_groups = uint32_t(ceil_div(gb.num_tiles, gb.tiles_per_group));
  gb.buffer_num = uint32_t(bn);
  gb.is_reuse_source = 1;
  gb.stack_buffer_bytes = uint32_t(grad_beta_tmp_bytes(h));
  gb.combine_cols_per_core = combine.tiling.combine_cols_per_core;
  gb.combine_chunk_cols = combine.tiling.combine_chunk_cols;
  // LayerNormGradBeta on fp32 tiles {1, r, H, H}: hLength == originalHLength,
  // the padded columns are zeros (x * rstd and dy are 0 there). Tiles of at
  // most 255 rows suit the 3510 implementation's uint16_t row counter too.
  const int64_t hh = int64_t(h);
  p.api_tile = layer_norm_grad_beta_nd_tiling_info({1, int64_t(tile_rows), hh, hh}, gb.stack_buffer_bytes, 4, true);
  p.api_last =
      layer_norm_grad_beta_nd_tiling_info({1, int64_t(gb.last_tile_rows), hh, hh}, gb.stack_buffer_bytes, 4, true);
  const auto wt = p.api_tile.words(), wl = p.api_last.words();
  std::copy(wt.begin(), wt.end(), gb.api_tile);
  std::copy(wl.begin(), wl.end(), gb.api_last);
  t.original_h_length = uint32_t(h0);
  t.rstd_stride = uint32_t(align8(tile_rows));
  t.reciprocal_h_bits = f32_bits(1.0f / static_cast<float>(h0));
  t.sum_tmp_bytes = uint32_t(sum_tmp_bytes_f32(h));

  p.block_dim = uint32_t(std::min<uint64_t>(uint64_t(q.num_cores), gb.num_groups));
  p.combine_block_dim = combine.combine_block_dim;
  p.rstd_elems = uint64_t(gb.num_tiles) * t.rstd_stride;
  p.workspace_bytes = uint64_t(gb.num_groups) * 2 * h * 4;
  p.ub_bytes_used = rms_norm_backward_ub_bytes(tile_rows, h, h0, ts, bn);
  p.combine_ub_bytes_used = combine.combine_ub_bytes_used;
  return p;
}

}  // namespace jax_lngb::tiling
