#include "grad_beta.h"

#include <algorithm>

#include "base/partition.h"
#include "base/workspace.h"
#include "reduce_rows.h"

namespace jax_lngb {

void combine_partials(const GradBetaPartials& partials, DType out, void* pd_gamma, void* pd_beta, int64_t col_chunk,
                      const CpuExecutor& ex) {
  const int64_t G = partials.groups, RB = partials.blocks, H = partials.cols;
  if (G == 0 || H == 0) return;
  col_chunk = std::max<int64_t>(1, std::min(col_chunk, H));
  const int64_t CC = (H + col_chunk - 1) / col_chunk;
  const int out_size = dtype_size(out);
  const StoreSumsFn store = store_sums_fn(out);
  char* out_g = static_cast<char*>(pd_gamma);
  char* out_b = static_cast<char*>(pd_beta);
  if (RB == 0) {
    // No row blocks (zero rows): every sum is empty, i.e. zero.
    std::fill(out_g, out_g + G * H * out_size, char(0));
    std::fill(out_b, out_b + G * H * out_size, char(0));
    return;
  }
  ex.run(G * CC, G * RB * 2 * H * 4, [&](int64_t t) {
    const int64_t g = t / CC;
    const int64_t c0 = (t % CC) * col_chunk, c1 = std::min(H, c0 + col_chunk);
    float* sum_g = partials.gamma(g, 0);
    float* sum_b = partials.beta(g, 0);
    for (int64_t rb = 1; rb < RB; ++rb) {
      const float* src_g = partials.gamma(g, rb);
      const float* src_b = partials.beta(g, rb);
      for (int64_t c = c0; c < c1; ++c) sum_g[c] += src_g[c];
      for (int64_t c = c0; c < c1; ++c) sum_b[c] += src_b[c];
    }
    store(sum_g + c0, out_g + (g * H + c0) * out_size, c1 - c0);
    store(sum_b + c0, out_b + (g * H + c0) * out_size, c1 - c0);
  });
}

const char* grad_beta(const GradBetaProblem& p, const CpuExecutor& ex) {
  if (p.groups < 0 || p.rows < 0 || p.cols < 0) return "negative extent";
  if (!is_valid_dtype(p.out_dtype)) return "unsupported output dtype";
  const int64_t G = p.groups, R = p.rows, H = p.cols;
  const int64_t esize = dtype_size(p.in_dtype);
  // nullptr for a dtype decoded from foreign bits (reduce_rows_fn checks).
  const ReduceLoop loop = reduce_loop_for(G * R * H * 2 * esize, H * esize, cpu_vendor(), active_isa());
  const ReduceRowsFn reduce = reduce_rows_fn(p.in_dtype, loop);
  if (reduce == nullptr) return "unsupported input dtype";
  if (G == 0 || H == 0) return nullptr;

  const int out_size = dtype_size(p.out_dtype);
  char* out_g = static_cast<char*>(p.pd_gamma);
  char* out_b = static_cast<char*>(p.pd_beta);
  if (R == 0) {
    // An empty sum is zero, in every dtype.
    std::fill(out_g, out_g + G * H * out_size, char(0));
    std::fill(out_b, out_b + G * H * out_size, char(0));
    return nullptr;
  }

  const StoreSumsFn store = store_sums_fn(p.out_dtype);
  const ReducePartition part = make_reduce_partition(R, H, 2 * esize);
  const int64_t RB = part.rows.num_blocks, CC = part.cols.num_chunks;
  const int64_t tasks_per_group = RB * CC;
  // Tiny groups (many vmapped examples) are bundled so a task still streams
  // a useful amount of memory; bundling never changes a group's partition.
  const int64_t group_bytes = R * H * 2 * esize;
  const int64_t groups_per_task =
      tasks_per_group > 1 ? 1 : std::max<int64_t>(1, kTargetBlockBytes / std::max<int64_t>(group_bytes, 1));
  const int64_t num_tasks = tasks_per_group > 1 ? G * tasks_per_group : (G + groups_per_task - 1) / groups_per_task;

  GradBetaPartials partials{thread_workspace(G * RB * 2 * H), G, RB, H};
  const char* res = static_cast<const char*>(p.res_for_gamma);
  const char* dy = static_cast<const char*>(p.dy);

  auto run_block = [&](int64_t g, int64_t rb, int64_t cc) {
    const int64_t r0 = part.rows.begin(rb), r1 = part.rows.end(rb);
    const int64_t c0 = part.cols.begin(cc), c1 = part.cols.end(cc);
    float* pg = partials.gamma(g, rb);
    float* pb = partials.beta(g, rb);
    std::fill(pg + c0, pg + c1, 0.0f);
    std::fill(pb + c0, pb + c1, 0.0f);
    const int64_t off = ((g * R + r0) * H + c0) * esize;
    reduce(res + off, dy + off, r1 - r0, c1 - c0, H, H, pg + c0, pb + c0);
    if (RB == 1) {
      // A single row block's partial is already the sum: the task narrows
      // its columns while they are in its cache, instead of a second pass
      // over every partial after the join (the same bits: combine_partials
      // adds nothing when there is one block).
      store(pg + c0, out_g + (g * H + c0) * out_size, c1 - c0);
      store(pb + c0, out_b + (g * H + c0) * out_size, c1 - c0);
    }
  };

  ex.run(num_tasks, G * group_bytes, [&](int64_t t) {
    if (tasks_per_group > 1) {
      const int64_t g = t / tasks_per_group, rem = t % tasks_per_group;
      run_block(g, rem / CC, rem % CC);
    } else {
      const int64_t g1 = std::min(G, (t + 1) * groups_per_task);
      for (int64_t g = t * groups_per_task; g < g1; ++g) run_block(g, 0, 0);
    }
  });

  if (RB > 1) combine_partials(partials, p.out_dtype, p.pd_gamma, p.pd_beta, part.cols.cols_per_chunk, ex);
  return nullptr;
}

}  // namespace jax_lngb
