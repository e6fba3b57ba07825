// CANN LayerNormGrad driver: like the forward, one task per block of rows;
// dy and x are read once, pd_x and res_for_gamma written once.
#include "base/partition.h"
#include "base/row_segments.h"
#include "layer_norm.h"
#include "layer_norm_rows.h"

namespace jax_lngb {

const char* layer_norm_grad(const LayerNormGradProblem& p, const CpuExecutor& ex) {
  if (p.groups < 0 || p.rows < 0 || p.cols < 0) return "negative extent";
  if (p.gamma_stride != 0 && p.gamma_stride != p.cols) return "gamma stride must be 0 or cols";
  if (!is_valid_dtype(p.dtype)) return "unsupported dtype";
  const int64_t N = p.groups * p.rows, H = p.cols;
  if (N == 0 || H == 0) return nullptr;
  const LayerNormRowsTable& rows = layer_norm_rows();
  const GradRowsFn fn = rows.grad[int(p.dtype)];
  if (fn == nullptr) return "unsupported dtype";
  const int64_t esize = dtype_size(p.dtype);
  const char* dy = static_cast<const char*>(p.dy);
  const char* x = static_cast<const char*>(p.x);
  char* pd_x = static_cast<char*>(p.pd_x);
  char* res = static_cast<char*>(p.res_for_gamma);
  const bool stream = N * H * esize >= kStreamOutputBytes;
  const RowPartition part = make_row_partition(N, 2 * H * esize);
  ex.run(part.num_blocks, 2 * N * H * esize, [&](int64_t b) {
    for_group_segments(part.begin(b), part.end(b), p.rows, [&](int64_t g, int64_t r0, int64_t r1) {
      const int64_t off = r0 * H * esize;
      fn(dy + off, x + off, p.variance + r0, p.mean + r0, p.gamma + g * p.gamma_stride, r1 - r0, H, p.epsilon, stream,
         pd_x + off, res + off);
    });
    if (stream) rows.stream_fence();
  });
  return nullptr;
}

}  // namespace jax_lngb
