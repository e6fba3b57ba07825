// The fused LayerNorm backward: CANN's LayerNormGrad -> LayerNormGradBeta
// chain in one pass over row blocks.
//
// Each block of a group computes pd_x (written to memory) and
// res_for_gamma (float32, into a small per-worker scratch that stays in
// cache) a few rows at a time, and hands each batch of rows, with the same
// dy rows still in cache, to reduce_rows: the one gamma/beta reduction that
// also backs LayerNormGradBeta. The block's sums go to its slot of
// GradBetaPartials and combine_partials adds the slots in block order. So dy
// and x are read from memory once, dx is the only [rows, H] output, and
// res_for_gamma never reaches memory.
//
// Long rows (fewer than four fit the scratch) take the row-wise constants
// of a batch of four rows first, then run the second pass and the reduction
// one column range at a time, so that the float32 res_for_gamma of all four
// rows stays in L1 and reduce_rows keeps its four-row register blocking:
// one row at a time, its accumulators went to and from cache on every row.
// Per column the rows are still added in row order, so both paths give the
// same bits.
//
// The blocks are make_row_partition's over the input bytes (dy and x): fixed
// by the shape, so no thread count changes a bit. pd_x is the same row code
// as the public LayerNormGrad's, so fused and chained dx agree bit for bit;
// their pd_gamma/pd_beta agree to float32 rounding (bit for bit in float32
// wherever the two partitions cut the rows alike).
#include <algorithm>
#include <atomic>

#include "grad_beta.h"
#include "layer_norm.h"
#include "layer_norm_rows.h"
#include "partition.h"
#include "reduce_rows.h"
#include "workspace.h"

namespace jax_lngb {

namespace {
// float32 res_for_gamma rows computed ahead of each reduce_rows call; sized
// to stay in L1/L2 together with the matching dy rows.
constexpr int64_t kScratchBytes = int64_t(32) << 10;
// Rows per batch of the long-row path: reduce_rows' register blocking.
constexpr int64_t kLongBatch = 4;
// Columns per range of the long-row path: kLongBatch float32 rows of them
// fill the scratch. A multiple of 32, so ranges start on aligned blocks.
constexpr int64_t kLongCols = kScratchBytes / (kLongBatch * 4);
static_assert(kLongCols % 32 == 0, "column ranges must keep 16-lane blocks aligned");
}  // namespace

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
    std::fill_n(static_cast<char*>(p.pd_beta), G * H * out_size, char(0));
    return nullptr;
  }
  const LayerNormRowsTable& rows = layer_norm_rows();
  const GradRowsFn grad = rows.grad_f32[int(p.dtype)];
  const GradCoeffsFn coeffs_fn = rows.grad_coeffs[int(p.dtype)];
  const GradColsFn cols_fn = rows.grad_cols_f32[int(p.dtype)];
  const ReduceRowsFn reduce = reduce_rows_fn(DType::kF32, p.dtype);
  if (grad == nullptr || coeffs_fn == nullptr || cols_fn == nullptr || reduce == nullptr) {
    return "unsupported dtype";
  }

  const int64_t esize = dtype_size(p.dtype);
  const int64_t in_bytes = G * R * H * 2 * esize;
  const RowPartition part = make_row_partition(R, 2 * H * esize);
  const int64_t RB = part.num_blocks;
  const int64_t items = G * RB;
  // Rows per reduce_rows call: a multiple of its 4-row register blocking
  // when possible (any count gives the same bits).
  int64_t batch = std::max<int64_t>(1, kScratchBytes / (H * 4));
  const bool long_rows = batch < kLongBatch;
  if (long_rows) batch = kLongBatch;
  batch -= batch % 4;
  batch = std::min(batch, part.rows_per_block);
  const int64_t scratch_floats = long_rows ? kLongBatch * kLongCols : batch * H;
  const int64_t workers = std::min(ex.threads_for(in_bytes), items);

  // One workspace for the block partials and every worker's scratch. It is
  // the calling thread's, and the caller also runs a worker: nothing called
  // from a worker (the row kernels, reduce_rows) may take thread_workspace.
  float* ws = thread_workspace(items * 2 * H + workers * scratch_floats);
  const GradBetaPartials partials{ws, G, RB, H};
  float* scratch0 = ws + items * 2 * H;

  const char* dy = static_cast<const char*>(p.dy);
  const char* x = static_cast<const char*>(p.x);
  char* dx = static_cast<char*>(p.dx);
  const bool stream = G * R * H * esize >= kStreamOutputBytes;
  std::atomic<int64_t> next{0};
  // Workers claim (group, block) items; who computes an item never changes
  // what it computes. Worker w owns scratch slot w.
  ex.run(workers, in_bytes, [&](int64_t w) {
    float* scratch = scratch0 + w * scratch_floats;
    GradRowCoeffs coeffs[kLongBatch];
    for (;;) {
      const int64_t item = next.fetch_add(1, std::memory_order_relaxed);
      if (item >= items) break;
      const int64_t g = item / RB, rb = item % RB;
      float* pg = partials.gamma(g, rb);
      float* pb = partials.beta(g, rb);
      std::fill_n(pg, H, 0.0f);
      std::fill_n(pb, H, 0.0f);
      const float* gamma = p.gamma + g * p.gamma_stride;
      for (int64_t r = part.begin(rb), r1 = part.end(rb); r < r1;) {
        const int64_t n = std::min(batch, r1 - r);
        const int64_t row = g * R + r;
        const int64_t off = row * H * esize;
        if (long_rows) {
          coeffs_fn(dy + off, x + off, p.variance + row, p.mean + row, gamma, n, H, p.epsilon,
                    coeffs);
          for (int64_t c0 = 0; c0 < H; c0 += kLongCols) {
            const int64_t c1 = std::min(H, c0 + kLongCols);
            cols_fn(dy + off, x + off, coeffs, gamma, n, H, c0, c1, stream, dx + off, scratch,
                    kLongCols);
            reduce(scratch, dy + off + c0 * esize, n, c1 - c0, kLongCols, H, pg + c0, pb + c0);
          }
        } else {
          grad(dy + off, x + off, p.variance + row, p.mean + row, gamma, n, H, p.epsilon, stream,
               dx + off, scratch);
          reduce(scratch, dy + off, n, H, H, H, pg, pb);
        }
        r += n;
      }
      if (stream) rows.stream_fence();
    }
  });

  combine_partials(partials, p.out_dtype, p.pd_gamma, p.pd_beta, 4 * kColAlign, ex);
  return nullptr;
}

}  // namespace jax_lngb
