#include "tiling/grad_beta_kernel_plan.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace jax_lngb::tiling {
namespace {

constexpr const char* kApi = "plan_layer_norm_grad_beta_kernel";
constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();

uint64_t align32(uint64_t v) { return (v + 31) / 32 * 32; }
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

[[noreturn]] void fail(const std::string& what) { throw TilingError(std::string(kApi) + ": " + what); }

// sharedTmpBuffer bytes for a tile of `r` rows (the API is always run on fp32
// data: half tiles are cast to fp32 first).
uint64_t stack_bytes_for(const GradBetaPlanRequest& q, uint64_t r, bool reuse) {
  const uint64_t h = uint64_t(q.h);
  const uint64_t min_b = 2 * h * 4;  // float rule: 2 * H * 4
  switch (q.tmp_policy) {
    case TmpBufferPolicy::kMin:
      return min_b;
    case TmpBufferPolicy::kMax:
      return 2 * r * h * 4;
    case TmpBufferPolicy::kBytes:
      return uint64_t(q.tmp_bytes);
    case TmpBufferPolicy::kAuto:
    default:
      // Reused source: the products overwrite it and the buffer is only
      // checked for size; the 3510 implementation never reads it.
      // Otherwise one tile of fp32 products makes LayerNormGradBeta finish
      // in one pass (loop_round == 1).
      if (reuse || npu_arch_defaults(q.npu_arch).grad_beta_3510) return min_b;
      return std::max(min_b, r * h * 4);
  }
}

}  // namespace

NpuArchDefaults npu_arch_defaults(NpuArch arch) {
  // UB sizes: TOTAL_UB_SIZE of asc-devkit's kernel_utils_constants.h; on
  // dav-3510 less the 8 KiB GetRuntimeUBSize() reserves on vector cores.
  // Core counts: dav-2201 an Atlas A2 with 20 AI cores (40 vector cores);
  // dav-2002 the Atlas 300I Pro/Duo chip's 8 AI cores (AICORE kernels);
  // dav-3510 keeps 40. More blocks than cores still run, fewer leave cores
  // idle; results never depend on it.
  switch (arch) {
    case NpuArch::kDav2002:
      return {262144, 8, "AI cores", false};
    case NpuArch::kDav3510:
      return {245760, 40, "vector cores", true};
    case NpuArch::kDav2201:
    default:
      return {196608, 40, "vector cores", false};
  }
}

uint64_t partials_ub_bytes(uint64_t tile_rows, uint64_t h, uint64_t in_type_size, uint64_t stack_bytes,
                           uint64_t buffer_num) {
  // One term per InitBuffer of GradBetaPartials::Init, in its order.
  const uint64_t tile = align32(tile_rows * h * in_type_size);
  uint64_t total = 2 * buffer_num * tile;                          // res_for_gamma and dy queues
  if (in_type_size == 2) total += 2 * align32(tile_rows * h * 4);  // their fp32 copies
  total += align32(stack_bytes);                                   // sharedTmpBuffer
  total += 2 * align32(h * 4);                                     // one call's pd_gamma, pd_beta
  total += buffer_num * align32(2 * h * 4);                        // group accumulators (out queue)
  return total;
}

uint64_t combine_ub_bytes(uint64_t chunk_cols, uint64_t out_type_size, uint64_t buffer_num) {
  // One term per InitBuffer of GradBetaCombine::Init, in its order.
  uint64_t total = buffer_num * align32(2 * chunk_cols * 4);      // group partials in
  if (out_type_size == 2) total += align32(2 * chunk_cols * 4);   // fp32 sums (float sums in place)
  total += buffer_num * align32(2 * chunk_cols * out_type_size);  // results out
  return total;
}

TmpBufferPolicy parse_tmp_policy(const std::string& name) {
  if (name == "auto") return TmpBufferPolicy::kAuto;
  if (name == "min") return TmpBufferPolicy::kMin;
  if (name == "max") return TmpBufferPolicy::kMax;
  fail("tmp_buffer must be 'auto', 'min', 'max' or a byte count; got '" + name + "'");
}

std::vector<uint8_t> GradBetaKernelPlan::pack() const {
  uint32_t w[jax_lngb_ascend::kGradBetaTilingWords];
  std::memcpy(w, &tiling, sizeof w);
  return pack_words(w, jax_lngb_ascend::kGradBetaTilingWords);
}

GradBetaKernelPlan plan_grad_beta_kernel(const GradBetaPlanRequest& q) {
  const uint32_t in_ts = check_type_size(q.in_type_size, kApi);
  const uint32_t out_ts = check_type_size(q.out_type_size, kApi);
  if (q.rows < 1 || uint64_t(q.rows) > kU32Max) fail("rows must be in [1, 2^32 - 1]; got " + std::to_string(q.rows));
  if (q.h < 1 || uint64_t(q.h) > kU32Max) fail("h must be in [1, 2^32 - 1]; got " + std::to_string(q.h));
  const int64_t orig_h = q.original_h == 0 ? q.h : q.original_h;
  if (orig_h < 1 || orig_h > q.h)
    fail("original_h must be in [1, h = " + std::to_string(q.h) + "]; got " + std::to_string(orig_h));
  if ((q.h * in_ts) % 32 != 0 || (q.h * out_ts) % 32 != 0)
    fail(
        "h * type_size must be a multiple of 32 bytes for the input and the output (pad H with "
        "zeros); got h = " +
        std::to_string(q.h) + " with type sizes " + std::to_string(in_ts) + " and " + std::to_string(out_ts));
  if (q.num_cores < 1 || q.num_cores > 65535)
    fail("num_cores must be in [1, 65535]; got " + std::to_string(q.num_cores));
  if (q.ub_bytes < 1024 || uint64_t(q.ub_bytes) > kU32Max)
    fail("ub_bytes must be in [1024, 2^32 - 1]; got " + std::to_string(q.ub_bytes));
  if (q.is_reuse_source && in_ts == 2)
    fail("is_reuse_source is only supported for float inputs (AscendC rejects it for half)");
  if (q.tmp_policy == TmpBufferPolicy::kBytes && (q.tmp_bytes < 0 || uint64_t(q.tmp_bytes) > kU32Max))
    fail("tmp_bytes must be in [0, 2^32 - 1]; got " + std::to_string(q.tmp_bytes));

  const uint64_t rows = uint64_t(q.rows), h = uint64_t(q.h), ub = uint64_t(q.ub_bytes);
  // Rows one LayerNormGradBeta call may get (see npu_arch_defaults).
  const uint64_t max_call_rows = npu_arch_defaults(q.npu_arch).grad_beta_3510 ? kMaxRowsPerCall3510 : kU32Max;
  // Half tiles are cast to fp32 copies the kernel owns, so the API may
  // always overwrite them.
  const bool api_reuse = in_ts == 2 || q.is_reuse_source;

  // Largest tile that fits, double-buffered if possible. The footprint
  // grows with the tile (the stack rule is non-decreasing in it), so a
  // bisection finds the exact fit.
  uint64_t tile_rows = 0, buffer_num = 0;
  for (uint64_t bn : {2u, 1u}) {
    auto fits = [&](uint64_t r) { return partials_ub_bytes(r, h, in_ts, stack_bytes_for(q, r, api_reuse), bn) <= ub; };
    if (!fits(1)) continue;
    const uint64_t per_row = partials_ub_bytes(1, h, in_ts, 0, bn) - partials_ub_bytes(0, h, in_ts, 0, bn);
    uint64_t lo = 1, hi = std::min<uint64_t>({rows, ub / per_row + 1, max_call_rows});  // fits(lo), hi a bound
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (fits(mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    tile_rows = lo;
    buffer_num = bn;
    break;
  }
  if (tile_rows == 0) {
    const uint64_t need = partials_ub_bytes(1, h, in_ts, stack_bytes_for(q, 1, api_reuse), 1);
    fail("a unified buffer of " + std::to_string(ub) + " bytes cannot hold one row of H = " + std::to_string(h) +
         " (LayerNormGradBeta never splits H): needs at least " + std::to_string(need) + " bytes");
  }

  GradBetaKernelPlan p;
  auto& t = p.tiling;
  const uint64_t stack = stack_bytes_for(q, tile_rows, api_reuse);
  t.rows = uint32_t(rows);
  t.h_length = uint32_t(h);
  t.tile_rows = uint32_t(tile_rows);
  t.num_tiles = uint32_t(ceil_div(rows, tile_rows));
  t.last_tile_rows = uint32_t(rows - uint64_t(t.num_tiles - 1) * tile_rows);
  const uint64_t want_groups = std::min<uint64_t>(t.num_tiles, jax_lngb_ascend::kMaxGroups);
  t.tiles_per_group = uint32_t(ceil_div(t.num_tiles, want_groups));
  t.num_groups = uint32_t(ceil_div(t.num_tiles, t.tiles_per_group));
  t.buffer_num = uint32_t(buffer_num);
  t.is_reuse_source = q.is_reuse_source ? 1 : 0;
  t.stack_buffer_bytes = uint32_t(stack);

  // Both API tilings are for fp32 data ({1, r, H, H}: hLength ==
  // originalHLength, so the zero padding is summed like real columns and
  // sliced off by the caller).
  const int64_t hh = int64_t(h);
  try {
    p.api_tile = layer_norm_grad_beta_nd_tiling_info({1, int64_t(tile_rows), hh, hh}, int64_t(stack), 4, api_reuse);
    p.api_last =
        layer_norm_grad_beta_nd_tiling_info({1, int64_t(t.last_tile_rows), hh, hh}, int64_t(stack), 4, api_reuse);
  } catch (const TilingError& e) {
    fail(std::string("the sharedTmpBuffer does not suit LayerNormGradBeta: ") + e.what());
  }
  // What both implementations rely on: rows strided by the padded H
  // (common: originalHLength, 3510: hLength) and, for 3510, a row count its
  // uint16_t counter reaches.
  for (const LayerNormGradBetaTiling* a : {&p.api_tile, &p.api_last}) {
    if (a->h_length != h || a->original_h_length != h || a->bs_length > max_call_rows)
      fail("internal error: a LayerNormGradBeta call of " + std::to_string(a->bs_length) + " rows with hLength " +
           std::to_string(a->h_length) + " / originalHLength " + std::to_string(a->original_h_length) +
           " for storage H " + std::to_string(h));
  }
  const auto wt = p.api_tile.words(), wl = p.api_last.words();
  std::copy(wt.begin(), wt.end(), t.api_tile);
  std::copy(wl.begin(), wl.end(), t.api_last);

  // Combine: H split into 32-byte aligned column ranges, one per core.
  const uint64_t col_align = out_ts == 2 ? 16 : 8;
  const uint64_t col_units = ceil_div(h, col_align);
  const uint64_t cols_per_core = ceil_div(col_units, uint64_t(q.num_cores)) * col_align;
  const uint64_t per_col = combine_ub_bytes(col_align, out_ts, 2) / col_align;
  uint64_t chunk = std::min(cols_per_core, std::max<uint64_t>(col_align, ub / per_col / col_align * col_align));
  while (chunk > col_align && combine_ub_bytes(chunk, out_ts, 2) > ub) chunk -= col_align;
  t.combine_cols_per_core = uint32_t(cols_per_core);
  t.combine_chunk_cols = uint32_t(chunk);

  p.block_dim = uint32_t(std::min<uint64_t>(uint64_t(q.num_cores), t.num_groups));
  p.combine_block_dim = uint32_t(ceil_div(h, cols_per_core));
  p.workspace_bytes = uint64_t(t.num_groups) * 2 * h * 4;
  p.ub_bytes_used = partials_ub_bytes(tile_rows, h, in_ts, stack, buffer_num);
  p.combine_ub_bytes_used = combine_ub_bytes(chunk, out_ts, 2);
  return p;
}

}  // namespace jax_lngb::tiling
