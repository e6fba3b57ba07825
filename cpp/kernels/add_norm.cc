// Residual add + norm drivers (add_norm.h): a fixed partition of the rows
// into blocks (partition.h), one task per block, scalar row loops.
//
// The row loops keep LayerNorm's and RMSNorm's formulas operation for
// operation (layer_norm_rows.h, rms_norm_rows.h, and the jax.numpy forms in
// jax_lngb/_ops/add_norm/formulas.py), on the float32 value of the stored h,
// so y is exactly the norm of the h the forward returns. Row sums run left
// to right, a fixed order; they are not the 16-lane association of the
// vectorised norm kernels, so the last bits may differ from `layer_norm`
// applied to h (never from one run, thread count or ISA to another).
#include "add_norm.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "base/partition.h"
#include "reduce_rows.h"
#include "base/row_segments.h"
#include "base/workspace.h"

namespace jax_lngb {
namespace {

template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<A>{}, Tag<B>{}) for the storage types of dtypes a and b.
template <class F>
void with_types(DType a, DType b, F&& f) {
  auto second = [&](auto ta) {
    switch (b) {
      case DType::kF32:
        return f(ta, Tag<float>{});
      case DType::kF16:
        return f(ta, Tag<f16_t>{});
      case DType::kBF16:
        return f(ta, Tag<bf16_t>{});
    }
  };
  switch (a) {
    case DType::kF32:
      return second(Tag<float>{});
    case DType::kF16:
      return second(Tag<f16_t>{});
    case DType::kBF16:
      return second(Tag<bf16_t>{});
  }
}

// 1/H and 2/H in float32 as the norm kernels form them (1 for empty rows).
struct InvH {
  float inv, two;
  explicit InvH(int64_t cols) {
    const float fh = float(std::max<int64_t>(cols, 1));
    inv = 1.0f / fh;
    two = 2.0f / fh;
  }
};

inline float scale(const float* gamma, int64_t c, bool zero_centered) {
  return zero_centered ? gamma[c] + 1.0f : gamma[c];
}

// Rows [0, rows) of one group: h, y and the statistics. `hs` is a float32
// scratch of cols values (the row of h, re-read by the statistics passes).
template <class X, class R>
void forward_rows(const AddNormForwardProblem& p, const X* x, const R* r, int64_t rows, const float* gamma,
                  const float* beta, X* y, R* h, float* mean, float* variance, float* rstd_out, float* hs) {
  const int64_t H = p.cols;
  const InvH ih(H);
  const float fh = float(std::max<int64_t>(H, 1));
  for (int64_t i = 0; i < rows; ++i) {
    const X* xr = x + i * H;
    const R* rr = r + i * H;
    R* hr = h + i * H;
    X* yr = y + i * H;
    for (int64_t c = 0; c < H; ++c) {
      const R v = from_float<R>(to_float(xr[c]) + to_float(rr[c]));
      hr[c] = v;
      hs[c] = to_float(v);
    }
    if (p.kind == AddNormKind::kLayer) {
      // The shifted, refined mean of layer_norm_rows.h: m = ref + sum(h -
      // ref) / H, then variance = sum(d^2) / H and mean = m + sum(d) / H
      // for d = h - m.
      const float ref = (H > 0 && std::isfinite(hs[0])) ? hs[0] : 0.0f;
      float s0 = 0.0f;
      for (int64_t c = 0; c < H; ++c) s0 += hs[c] - ref;
      const float m = ref + s0 / fh;
      float sd = 0.0f, sd2 = 0.0f;
      for (int64_t c = 0; c < H; ++c) {
        const float d = hs[c] - m;
        sd += d;
        sd2 += d * d;
      }
      const float var = sd2 / fh;
      const float mu = m + sd / fh;
      const float rs = 1.0f / std::sqrt(var + p.epsilon);
      for (int64_t c = 0; c < H; ++c) {
        float v = ((hs[c] - mu) * rs) * scale(gamma, c, p.zero_centered);
        if (beta) v = v + beta[c];
        yr[c] = from_float<X>(v);
      }
      mean[i] = mu;
      variance[i] = var;
    } else {
      // CANN RmsNorm's order: rstd = 1 / sqrt(sum(h^2) * (1/H) + epsilon).
      float ss = 0.0f;
      for (int64_t c = 0; c < H; ++c) ss += hs[c] * hs[c];
      const float rs = 1.0f / std::sqrt(ss * ih.inv + p.epsilon);
      for (int64_t c = 0; c < H; ++c) yr[c] = from_float<X>((hs[c] * rs) * scale(gamma, c, p.zero_centered));
      rstd_out[i] = rs;
    }
  }
}

// Rows [0, rows) of one group: d_sum, and each row's x_hat * dy (and dy)
// added in row order into the float32 partials pg (and pb).
template <class D, class R>
void backward_rows(const AddNormBackwardProblem& p, const D* dy, const R* dh, const R* h, const float* mean,
                   const float* variance, const float* rstd, const float* gamma, int64_t rows, R* d_sum,
                   float* pg, float* pb) {
  const int64_t H = p.cols;
  const InvH ih(H);
  for (int64_t i = 0; i < rows; ++i) {
    const D* dyr = dy + i * H;
    const R* dhr = dh + i * H;
    const R* hr = h + i * H;
    R* out = d_sum + i * H;
    if (p.kind == AddNormKind::kLayer) {
      // CANN LayerNormGrad's formulas (layer_norm_rows.h).
      const float mu = mean[i];
      const float rs = 1.0f / std::sqrt(variance[i] + p.epsilon);
      float s12 = 0.0f, s1 = 0.0f, s2 = 0.0f;
      for (int64_t c = 0; c < H; ++c) {
        const float x1 = to_float(dyr[c]) * scale(gamma, c, p.zero_centered);
        const float x2 = to_float(hr[c]) - mu;
        s12 += x1 * x2;
        s1 += x1;
        s2 += x2;
      }
      const float pd_var = (-0.5f * (rs * rs * rs)) * s12;
      const float pd_mean = (-rs) * s1 + (pd_var * ih.inv) * (-2.0f * s2);
      for (int64_t c = 0; c < H; ++c) {
        const float d = to_float(dyr[c]);
        const float x1 = d * scale(gamma, c, p.zero_centered);
        const float x2 = to_float(hr[c]) - mu;
        const float pd_x = ((pd_var * ih.two) * x2 + pd_mean * ih.inv) + x1 * rs;
        out[c] = from_float<R>(pd_x + to_float(dhr[c]));
        pg[c] += (x2 * rs) * d;
        if (pb) pb[c] += d;
      }
    } else {
      // RmsNormGrad's formulas (rms_norm_rows.h).
      const float rs = rstd[i];
      float s = 0.0f;
      for (int64_t c = 0; c < H; ++c) s += (to_float(dyr[c]) * scale(gamma, c, p.zero_centered)) * to_float(hr[c]);
      const float a = (-(rs * rs * rs) * s) * ih.inv;
      for (int64_t c = 0; c < H; ++c) {
        const float d = to_float(dyr[c]);
        const float hv = to_float(hr[c]);
        const float dx = a * hv + (d * scale(gamma, c, p.zero_centered)) * rs;
        out[c] = from_float<R>(dx + to_float(dhr[c]));
        pg[c] += (hv * rs) * d;
      }
    }
  }
}

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
  with_types(p.x_dtype, p.r_dtype, [&](auto tx, auto tr) {
    using X = typename decltype(tx)::type;
    using R = typename decltype(tr)::type;
    const X* x = static_cast<const X*>(p.x);
    const R* r = static_cast<const R*>(p.residual);
    X* y = static_cast<X*>(p.y);
    R* h = static_cast<R*>(p.h);
    ex.run(part.num_blocks, N * row_bytes, [&](int64_t b) {
      std::vector<float> hs(size_t(std::max<int64_t>(H, 1)));
      for_group_segments(part.begin(b), part.end(b), p.rows, [&](int64_t g, int64_t r0, int64_t r1) {
        const int64_t off = r0 * H;
        const float* beta = p.beta ? p.beta + g * p.param_stride : nullptr;
        const bool layer = p.kind == AddNormKind::kLayer;
        forward_rows<X, R>(p, x + off, r + off, r1 - r0, p.gamma + g * p.param_stride, beta, y + off, h + off,
                           layer ? p.mean + r0 : nullptr, layer ? p.variance + r0 : nullptr,
                           layer ? nullptr : p.rstd + r0, hs.data());
      });
    });
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

  with_types(p.dy_dtype, p.h_dtype, [&](auto td, auto tr) {
    using D = typename decltype(td)::type;
    using Rt = typename decltype(tr)::type;
    const D* dy = static_cast<const D*>(p.dy);
    const Rt* dh = static_cast<const Rt*>(p.dh);
    const Rt* h = static_cast<const Rt*>(p.h);
    Rt* d_sum = static_cast<Rt*>(p.d_sum);
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
        const int64_t off = row * H;
        const bool layer = p.kind == AddNormKind::kLayer;
        backward_rows<D, Rt>(p, dy + off, dh + off, h + off, layer ? p.mean + row : nullptr,
                             layer ? p.variance + row : nullptr, layer ? nullptr : p.rstd + row,
                             p.gamma + g * p.gamma_stride, part.end(rb) - part.begin(rb), d_sum + off, pg, pb);
      }
    });
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
