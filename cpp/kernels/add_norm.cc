// Residual add + norm drivers (add_norm.h): a fixed partition of the rows
// into blocks (partition.h), one task per block; the row kernels
// (add_norm_rows.h, vectorised per ISA) do the work.
//
// The row kernels keep LayerNorm's and RMSNorm's formulas and their row
// sums' association (layer_norm_rows.h, rms_norm_rows.h, and the jax.numpy
// forms in jax_lngb/_ops/add_norm/formulas.py) on the float32 value of the
// stored h, so y and the statistics are the bits `layer_norm` / `rms_norm`
// give for that h, on every ISA variant and thread count.
#include "add_norm.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "add_norm_rows.h"
#include "base/partition.h"
#include "base/row_segments.h"
#include "base/workspace.h"
#include "layer_norm.h"  // kStreamOutputBytes
#include "reduce_rows.h"

namespace jax_lngb {
namespace {

// The scale the row kernels multiply by: gamma itself, or 1 + gamma formed
// in float32 (zero_centered), once per call rather than once per row.
struct Scale {
  std::vector<float> owned;
  const float* ptr;
  Scale(const float* gamma, int64_t param_rows, int64_t cols, bool zero_centered) : ptr(gamma) {
    if (!zero_centered) return;
    owned.resize(size_t(std::max<int64_t>(param_rows * cols, 1)));
    for (int64_t i = 0; i < param_rows * cols; ++i) owned[size_t(i)] = gamma[i] + 1.0f;
    ptr = owned.data();
  }
};

}  // namespace

const char* add_norm_forward(const AddNormForwardProblem& p, const CpuExecutor& ex) {
  if (p.groups < 0 || p.rows < 0 || p.cols < 0) return "negative extent";
  if (p.param_stride != 0 && p.param_stride != p.cols) return "parameter stride must be 0 or cols";
  if (!is_valid_dtype(p.x_dtype) || !is_valid_dtype(p.r_dtype)) return "unsupported dtype";
  if (p.kind != AddNormKind::kLayer && p.kind != AddNormKind::kRms) return "unknown norm kind";
  if (p.kind == AddNormKind::kRms && p.beta) return "RMSNorm takes no beta";
  const int64_t N = p.groups * p.rows, H = p.cols;
  if (N == 0) return nullptr;
  const int64_t row_bytes = H * (2 * dtype_size(p.x_dtype) + 2 * dtype_size(p.r_dtype));
  const RowPartition part = make_row_partition(N, row_bytes);
  const AddNormRowsTable& rows = add_norm_rows();
  const bool layer = p.kind == AddNormKind::kLayer;
  const AddNormForwardRowsFn fn = rows.forward[int(p.kind)][int(p.x_dtype)][int(p.r_dtype)];
  const Scale scale(p.gamma, p.param_stride != 0 ? p.groups : 1, H, p.zero_centered);
  const int64_t xs = dtype_size(p.x_dtype), rs = dtype_size(p.r_dtype);
  const char* x = static_cast<const char*>(p.x);
  const char* r = static_cast<const char*>(p.residual);
  char* y = static_cast<char*>(p.y);
  char* h = static_cast<char*>(p.h);
  // y and h bypass the caches when they are far larger than them.
  const bool stream = N * H * (xs + rs) >= kStreamOutputBytes;
  ex.run(part.num_blocks, N * row_bytes, [&](int64_t b) {
    for_group_segments(part.begin(b), part.end(b), p.rows, [&](int64_t g, int64_t r0, int64_t r1) {
      const float* beta = p.beta ? p.beta + g * p.param_stride : nullptr;
      fn(x + r0 * H * xs, r + r0 * H * rs, r1 - r0, H, scale.ptr + g * p.param_stride, beta, p.epsilon, stream,
         y + r0 * H * xs, h + r0 * H * rs, layer ? p.mean + r0 : p.rstd + r0, layer ? p.variance + r0 : nullptr);
    });
    if (stream) rows.stream_fence();
  });
  return nullptr;
}

const char* add_norm_backward(const AddNormBackwardProblem& p, const CpuExecutor& ex) {
  if (p.groups < 0 || p.rows < 0 || p.cols < 0) return "negative extent";
  if (p.gamma_stride != 0 && p.gamma_stride != p.cols) return "gamma stride must be 0 or cols";
  if (!is_valid_dtype(p.dy_dtype) || !is_valid_dtype(p.h_dtype) || !is_valid_dtype(p.out_dtype))
    return "unsupported dtype";
  if (p.kind != AddNormKind::kLayer && p.kind != AddNormKind::kRms) return "unknown norm kind";
  if (p.kind == AddNormKind::kRms && p.pd_beta) return "RMSNorm has no beta gradient";
  const int64_t G = p.groups, R = p.rows, H = p.cols;
  if (G == 0 || H == 0) return nullptr;
  const int out_size = dtype_size(p.out_dtype);
  char* out_g = static_cast<char*>(p.pd_gamma);
  char* out_b = static_cast<char*>(p.pd_beta);
  if (R == 0) {
    // No rows: an empty sum is zero, in every dtype.
    std::fill_n(out_g, G * H * out_size, char(0));
    if (out_b) std::fill_n(out_b, G * H * out_size, char(0));
    return nullptr;
  }
  const int64_t row_bytes = H * (dtype_size(p.dy_dtype) + 3 * dtype_size(p.h_dtype));
  const RowPartition part = make_row_partition(R, row_bytes);
  const int64_t RB = part.num_blocks;
  const int64_t items = G * RB;
  const int64_t in_bytes = G * R * row_bytes;
  const int64_t workers = std::min(ex.threads_for(in_bytes), items);
  const int sums = p.pd_beta ? 2 : 1;

  // [sums][groups][blocks][cols] float32 partials in the calling thread's
  // workspace (the caller also runs a worker).
  float* partials = thread_workspace(sums * items * H);
  auto partial = [&](int s, int64_t g, int64_t rb) { return partials + ((s * G + g) * RB + rb) * H; };

  const AddNormRowsTable& rows = add_norm_rows();
  const bool layer = p.kind == AddNormKind::kLayer;
  const AddNormBackwardRowsFn fn = rows.backward[int(p.kind)][int(p.dy_dtype)][int(p.h_dtype)];
  const Scale scale(p.gamma, p.gamma_stride != 0 ? G : 1, H, p.zero_centered);
  const int64_t ds = dtype_size(p.dy_dtype), hs = dtype_size(p.h_dtype);
  const char* dy = static_cast<const char*>(p.dy);
  const char* dh = static_cast<const char*>(p.dh);
  const char* h = static_cast<const char*>(p.h);
  char* d_sum = static_cast<char*>(p.d_sum);
  const bool stream = G * R * H * hs >= kStreamOutputBytes;
  std::atomic<int64_t> next{0};
  // Workers claim (group, block) items; who computes an item never
  // changes what it computes.
  ex.run(workers, in_bytes, [&](int64_t) {
    for (;;) {
      const int64_t item = next.fetch_add(1, std::memory_order_relaxed);
      if (item >= items) break;
      const int64_t g = item / RB, rb = item % RB;
      float* pg = partial(0, g, rb);
      float* pb = p.pd_beta ? partial(1, g, rb) : nullptr;
      std::fill_n(pg, H, 0.0f);
      if (pb) std::fill_n(pb, H, 0.0f);
      const int64_t row = g * R + part.begin(rb);
      fn(dy + row * H * ds, dh + row * H * hs, h + row * H * hs, layer ? p.mean + row : p.rstd + row,
         layer ? p.variance + row : nullptr, scale.ptr + g * p.gamma_stride, part.end(rb) - part.begin(rb), H,
         p.epsilon, stream, d_sum + row * H * hs, pg, pb);
      if (stream) rows.stream_fence();
    }
  });

  // The partials of each group in block order (as the fused norm backwards
  // combine theirs), column chunks in parallel, narrowed once.
  const StoreSumsFn store = store_sums_fn(p.out_dtype);
  const int64_t chunk = std::min<int64_t>(H, 4 * kColAlign);
  const int64_t CC = (H + chunk - 1) / chunk;
  ex.run(sums * G * CC, sums * items * H * 4, [&](int64_t t) {
    const int s = int(t / (G * CC));
    const int64_t g = (t / CC) % G;
    const int64_t c0 = (t % CC) * chunk, c1 = std::min(H, c0 + chunk);
    float* sum = partial(s, g, 0);
    for (int64_t rb = 1; rb < RB; ++rb) {
      const float* src = partial(s, g, rb);
      for (int64_t c = c0; c < c1; ++c) sum[c] += src[c];
    }
    char* out = s == 0 ? out_g : out_b;
    store(sum + c0, out + (g * H + c0) * out_size, c1 - c0);
  });
  return nullptr;
}

}  // namespace jax_lngb
