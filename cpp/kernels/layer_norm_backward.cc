// The fused LayerNorm backward: CANN's LayerNormGrad -> LayerNormGradBeta
// chain in one pass over row blocks.
//
// Each block of a group goes through grad_reduce (layer_norm_rows.h), four
// rows at a time (two for rows of more than 16384 columns): one pass over
// the rows' x and dy forms their sums, then one sweep over their columns
// writes pd_x and adds res_for_gamma, straight from the registers, with dy
// into the block's gamma/beta accumulators through the reduction's step
// (reduce_step.h, the step reduce_rows is made of, behind
// LayerNormGradBeta): rows in order, one load and store of the accumulators
// per tile, so the sums are reduce_rows' over the float32 res_for_gamma and
// dy widened to float32, bit for bit. Between the two, x - mean of the
// tile's rows waits in a float32 scratch in L1/L2 (rows of 256 to 16384
// columns) or is recomputed, and dy is read again from the input rows,
// still in cache. The
// block's sums go to its slot of GradBetaPartials and combine_partials adds
// the slots in block order. So dy and x are read from memory once, dx is
// the only [rows, H] output, and res_for_gamma never reaches memory.
//
// The blocks are make_row_partition's over the input bytes (dy and x): fixed
// by the shape, so no thread count changes a bit. pd_x is the same
// arithmetic as the public LayerNormGrad's, so fused and chained dx agree
// bit for bit; their pd_gamma/pd_beta agree to float32 rounding (bit for bit
// in float32 wherever the two partitions cut the rows alike).
#include <algorithm>
#include <atomic>

#include "base/partition.h"
#include "base/workspace.h"
#include "grad_beta.h"
#include "layer_norm.h"
#include "layer_norm_rows.h"
#include "reduce_rows.h"

namespace jax_lngb {

const char* layer_norm_backward(const LayerNormBackwardProblem& p, const CpuExecutor& ex) {
  if (p.groups < 0 || p.rows < 0 || p.cols < 0) return "negative extent";
  if (p.gamma_stride != 0 && p.gamma_stride != p.cols) return "gamma stride must be 0 or cols";
  if (!is_valid_dtype(p.dtype) || !is_valid_dtype(p.out_dtype)) return "unsupported dtype";
  const int64_t G = p.groups, R = p.rows, H = p.cols;
  if (G == 0 || H == 0) return nullptr;
  const int out_size = dtype_size(p.out_dtype);
  if (R == 0) {
    // No rows: empty sums are zero, in every dtype.
    std::fill_n(static_cast<char*>(p.pd_gamma), G * H * out_size, char(0));
    if (p.pd_beta != nullptr) std::fill_n(static_cast<char*>(p.pd_beta), G * H * out_size, char(0));
    return nullptr;
  }
  const bool has_beta = p.pd_beta != nullptr;
  const LayerNormRowsTable& rows = layer_norm_rows();
  const GradReduceFn grad = rows.grad_reduce[int(p.dtype)];
  if (grad == nullptr) return "unsupported dtype";

  const int64_t esize = dtype_size(p.dtype);
  const int64_t in_bytes = G * R * H * 2 * esize;
  const RowPartition part = make_row_partition(R, 2 * H * esize);
  const int64_t RB = part.num_blocks;
  const int64_t items = G * RB;
  const int64_t workers = std::min(ex.threads_for(in_bytes), items);

  // The block partials. The workspace is the calling thread's, and the
  // caller also runs a worker: nothing called from a worker (the row
  // kernels) may take thread_workspace.
  const GradBetaPartials partials{thread_workspace(items * 2 * H), G, RB, H};

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
      float* pg = partials.gamma(g, rb);
      // No beta: no pd_beta partial (the row kernels then sum no dy).
      float* pb = has_beta ? partials.beta(g, rb) : nullptr;
      std::fill_n(pg, H, 0.0f);
      if (has_beta) std::fill_n(pb, H, 0.0f);
      const int64_t row = g * R + part.begin(rb);
      const int64_t off = row * H * esize;
      grad(dy + off, x + off, p.variance + row, p.mean + row, p.gamma + g * p.gamma_stride,
           part.end(rb) - part.begin(rb), H, p.epsilon, stream, dx + off, pg, pb);
      if (stream) rows.stream_fence();
    }
  });

  if (has_beta) {
    combine_partials(partials, p.out_dtype, p.pd_gamma, p.pd_beta, 4 * kColAlign, ex);
    return nullptr;
  }
  // pd_gamma alone: the gamma partials of each group added in block order,
  // column chunks in parallel, narrowed once, as combine_partials adds them
  // (the same bits as pd_gamma with a beta).
  const StoreSumsFn store = store_sums_fn(p.out_dtype);
  char* out = static_cast<char*>(p.pd_gamma);
  const int64_t chunk = std::min<int64_t>(H, 4 * kColAlign);
  const int64_t CC = (H + chunk - 1) / chunk;
  ex.run(G * CC, items * H * 4, [&](int64_t t) {
    const int64_t g = t / CC;
    const int64_t c0 = (t % CC) * chunk, c1 = std::min(H, c0 + chunk);
    float* sum = partials.gamma(g, 0);
    for (int64_t rb = 1; rb < RB; ++rb) {
      const float* src = partials.gamma(g, rb);
      for (int64_t c = c0; c < c1; ++c) sum[c] += src[c];
    }
    store(sum + c0, out + (g * H + c0) * out_size, c1 - c0);
  });
  return nullptr;
}

}  // namespace jax_lngb
