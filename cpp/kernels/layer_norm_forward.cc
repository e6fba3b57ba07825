// LayerNorm forward driver: a fixed partition of all rows into blocks, one
// task per block; each row is read from memory once (its later passes hit
// the cache) and y is written once.
#include "base/partition.h"
#include "base/row_segments.h"
#include "layer_norm.h"
#include "layer_norm_rows.h"

namespace jax_lngb {

const char* layer_norm_forward(const LayerNormForwardProblem& p, const CpuExecutor& ex) {
  if (p.groups < 0 || p.rows < 0 || p.cols < 0) return "negative extent";
  if ((p.gamma_stride != 0 && p.gamma_stride != p.cols) || (p.beta_stride != 0 && p.beta_stride != p.cols))
    return "gamma/beta stride must be 0 or cols";
  if (!is_valid_dtype(p.dtype)) return "unsupported dtype";
  const int64_t N = p.groups * p.rows, H = p.cols;
  if (N == 0) return nullptr;
  const LayerNormRowsTable& rows = layer_norm_rows();
  const ForwardRowsFn fn = rows.forward[int(p.dtype)];
  if (fn == nullptr) return "unsupported dtype";
  const int64_t esize = dtype_size(p.dtype);
  const char* x = static_cast<const char*>(p.x);
  char* y = static_cast<char*>(p.y);
  const bool stream = N * H * esize >= kStreamOutputBytes;
  const RowPartition part = make_row_partition(N, 2 * H * esize);
  ex.run(part.num_blocks, N * H * esize, [&](int64_t b) {
    for_group_segments(part.begin(b), part.end(b), p.rows, [&](int64_t g, int64_t r0, int64_t r1) {
      const int64_t off = r0 * H * esize;
      const float* beta = p.beta != nullptr ? p.beta + g * p.beta_stride : nullptr;
      fn(x + off, r1 - r0, H, p.gamma + g * p.gamma_stride, beta, p.epsilon, stream, y + off, p.mean + r0,
         p.variance + r0);
    });
    if (stream) rows.stream_fence();
  });
  return nullptr;
}

}  // namespace jax_lngb
