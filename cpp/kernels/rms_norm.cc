// RMSNorm drivers: a fixed partition of the rows into blocks (partition.h),
// one task per block; the row kernels (rms_norm_rows.h) do the work.
//
// The fused backward mirrors layer_norm_backward.cc: each (group, block)
// item sums its rows' res_for_gamma * dy into its own float32 partial, in
// row order, through LayerNormGradBeta's reduction step; the partials of a
// group are then added in block order and narrowed once by the reduction's
// own store (store_sums_fn: RNE, canonical NaN). The blocks are
// make_row_partition's over the input bytes (dy and x), so the sums depend
// on the shape alone.
#include "rms_norm.h"

#include <algorithm>
#include <atomic>

#include "base/partition.h"
#include "base/row_segments.h"
#include "base/workspace.h"
#include "layer_norm.h"  // kStreamOutputBytes
#include "reduce_rows.h"
#include "rms_norm_rows.h"

namespace jax_lngb {

const char* rms_norm_forward(const RmsNormForwardProblem& p, const CpuExecutor& ex) {
  if (p.groups < 0 || p.rows < 0 || p.cols < 0) return "negative extent";
  if (p.gamma_stride != 0 && p.gamma_stride != p.cols) return "gamma stride must be 0 or cols";
  if (!is_valid_dtype(p.dtype)) return "unsupported dtype";
  const int64_t N = p.groups * p.rows, H = p.cols;
  if (N == 0) return nullptr;
  const RmsNormRowsTable& rows = rms_norm_rows();
  const RmsForwardRowsFn fn = rows.forward[int(p.dtype)];
  const int64_t esize = dtype_size(p.dtype);
  const char* x = static_cast<const char*>(p.x);
  char* y = static_cast<char*>(p.y);
  const bool stream = N * H * esize >= kStreamOutputBytes;
  const RowPartition part = make_row_partition(N, 2 * H * esize);
  ex.run(part.num_blocks, N * H * esize, [&](int64_t b) {
    for_group_segments(part.begin(b), part.end(b), p.rows, [&](int64_t g, int64_t r0, int64_t r1) {
      const int64_t off = r0 * H * esize;
      fn(x + off, r1 - r0, H, p.gamma + g * p.gamma_stride, p.epsilon, stream, y + off, p.rstd + r0);
    });
    if (stream) rows.stream_fence();
  });
  return nullptr;
}

const char* rms_norm_grad(const RmsNormGradProblem& p, const CpuExecutor& ex) {
  if (p.groups < 0 || p.rows < 0 || p.cols < 0) return "negative extent";
  if (p.gamma_stride != 0 && p.gamma_stride != p.cols) return "gamma stride must be 0 or cols";
  if (!is_valid_dtype(p.dtype)) return "unsupported dtype";
  const int64_t N = p.groups * p.rows, H = p.cols;
  if (N == 0 || H == 0) return nullptr;
  const RmsNormRowsTable& rows = rms_norm_rows();
  const RmsGradRowsFn fn = rows.grad[int(p.dtype)];
  const int64_t esize = dtype_size(p.dtype);
  const char* dy = static_cast<const char*>(p.dy);
  const char* x = static_cast<const char*>(p.x);
  char* dx = static_cast<char*>(p.dx);
  char* res = static_cast<char*>(p.res_for_gamma);
  const bool stream = N * H * esize >= kStreamOutputBytes;
  const RowPartition part = make_row_partition(N, 2 * H * esize);
  ex.run(part.num_blocks, 2 * N * H * esize, [&](int64_t b) {
    for_group_segments(part.begin(b), part.end(b), p.rows, [&](int64_t g, int64_t r0, int64_t r1) {
      const int64_t off = r0 * H * esize;
      fn(dy + off, x + off, p.rstd + r0, p.gamma + g * p.gamma_stride, r1 - r0, H, stream, dx + off, res + off);
    });
    if (stream) rows.stream_fence();
  });
  return nullptr;
}

const char* rms_norm_backward(const RmsNormBackwardProblem& p, const CpuExecutor& ex) {
  if (p.groups < 0 || p.rows < 0 || p.cols < 0) return "negative extent";
  if (p.gamma_stride != 0 && p.gamma_stride != p.cols) return "gamma stride must be 0 or cols";
  if (!is_valid_dtype(p.dtype) || !is_valid_dtype(p.out_dtype)) return "unsupported dtype";
  const int64_t G = p.groups, R = p.rows, H = p.cols;
  if (G == 0 || H == 0) return nullptr;
  const int out_size = dtype_size(p.out_dtype);
  char* out = static_cast<char*>(p.pd_gamma);
  if (R == 0) {
    // No rows: an empty sum is zero, in every dtype.
    std::fill_n(out, G * H * out_size, char(0));
    return nullptr;
  }
  const RmsNormRowsTable& rows = rms_norm_rows();
  const RmsGradReduceFn grad = rows.grad_reduce[int(p.dtype)];
  const StoreSumsFn store = store_sums_fn(p.out_dtype);

  const int64_t esize = dtype_size(p.dtype);
  const int64_t in_bytes = G * R * H * 2 * esize;
  const RowPartition part = make_row_partition(R, 2 * H * esize);
  const int64_t RB = part.num_blocks;
  const int64_t items = G * RB;
  const int64_t workers = std::min(ex.threads_for(in_bytes), items);

  // [groups][blocks][cols] float32 partials in the calling thread's
  // workspace (the caller also runs a worker; the row kernels never take
  // thread_workspace).
  float* partials = thread_workspace(items * H);
  auto partial = [&](int64_t g, int64_t rb) { return partials + (g * RB + rb) * H; };

  const char* dy = static_cast<const char*>(p.dy);
  const char* x = static_cast<const char*>(p.x);
  char* dx = static_cast<char*>(p.dx);
  const bool stream = G * R * H * esize >= kStreamOutputBytes;
  std::atomic<int64_t> next{0};
  // Workers claim (group, block) items; who computes an item never changes
  // what it computes.
  ex.run(workers, in_bytes, [&](int64_t) {
    for (;;) {
      const int64_t item = next.fetch_add(1, std::memory_order_relaxed);
      if (item >= items) break;
      const int64_t g = item / RB, rb = item % RB;
      float* pg = partial(g, rb);
      std::fill_n(pg, H, 0.0f);
      const int64_t row = g * R + part.begin(rb);
      const int64_t off = row * H * esize;
      grad(dy + off, x + off, p.rstd + row, p.gamma + g * p.gamma_stride, part.end(rb) - part.begin(rb), H, stream,
           dx + off, pg);
      if (stream) rows.stream_fence();
    }
  });

  // The partials of each group in block order (as combine_partials adds
  // LayerNormGradBeta's), column chunks in parallel, narrowed once.
  const int64_t chunk = std::min<int64_t>(H, 4 * kColAlign);
  const int64_t CC = (H + chunk - 1) / chunk;
  ex.run(G * CC, items * H * 4, [&](int64_t t) {
    const int64_t g = t / CC;
    const int64_t c0 = (t % CC) * chunk, c1 = std::min(H, c0 + chunk);
    float* sum = partial(g, 0);
    for (int64_t rb = 1; rb < RB; ++rb) {
      const float* src = partial(g, rb);
      for (int64_t c = c0; c < c1; ++c) sum[c] += src[c];
    }
    store(sum + c0, out + (g * H + c0) * out_size, c1 - c0);
  });
  return nullptr;
}

}  // namespace jax_lngb
