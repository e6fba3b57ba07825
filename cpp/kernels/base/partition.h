// The fixed work partition shared by every CPU kernel.
//
// Results must be bitwise identical whatever the number of threads, so the
// split of the rows into blocks depends on the problem shape only. Each block
// reduces its rows in row order into its own float32 partial; partials are
// then combined in block order. Threads only decide *who* computes a block,
// never *what* a block is.
#pragma once

#include <algorithm>
#include <cstdint>

namespace jax_lngb {

struct RowPartition {
  int64_t rows = 0;            // rows in one group
  int64_t rows_per_block = 1;  // last block may be shorter
  int64_t num_blocks = 0;      // blocks per group; 0 when rows == 0

  int64_t begin(int64_t b) const { return b * rows_per_block; }
  int64_t end(int64_t b) const { return std::min(rows, (b + 1) * rows_per_block); }
};

// Column chunks split H when there are too few rows to keep every core busy
// (H >> rows). A column's sum never spans chunks, so chunking cannot change
// any result.
struct ColPartition {
  int64_t cols = 0;
  int64_t cols_per_chunk = 0;
  int64_t num_chunks = 1;

  int64_t begin(int64_t c) const { return c * cols_per_chunk; }
  int64_t end(int64_t c) const { return std::min(cols, (c + 1) * cols_per_chunk); }
};

struct ReducePartition {
  RowPartition rows;
  ColPartition cols;
};

// Tuning constants of the partition. They are part of the numerical
// contract: changing them changes how float32 partials are associated (and
// so the last bits of a result), never the math.
inline constexpr int64_t kTargetBlockBytes = int64_t(1) << 20;  // input bytes per task
inline constexpr int64_t kMaxBlocksPerGroup = 64;
// Each row block of a reduction writes a [2, cols] float32 partial that
// combine_partials reads back: with blocks of at least 64 rows that traffic
// stays under 1/32 of the 16-bit input it summarises (16-row blocks of long
// rows spent an eighth more memory traffic on it, measured 20% slower).
// Row kernels cannot split columns instead, so they keep smaller blocks to
// spread a few long rows over the cores.
inline constexpr int64_t kMinRowsPerBlock = 64;
inline constexpr int64_t kMinRowsPerRowBlock = 16;
inline constexpr int64_t kColAlign = 64;  // floats; keeps chunks SIMD- and line-aligned

// Partition for a reduction over `rows` rows of `cols` columns, reading
// `bytes_per_elem` input bytes per element (both operands together).
inline ReducePartition make_reduce_partition(int64_t rows, int64_t cols, int64_t bytes_per_elem,
                                             int64_t min_rows_per_block = kMinRowsPerBlock) {
  ReducePartition p;
  p.rows.rows = rows;
  p.cols.cols = cols;
  p.cols.cols_per_chunk = std::max<int64_t>(cols, 1);
  if (rows <= 0 || cols <= 0) {
    p.rows.num_blocks = rows > 0 ? 1 : 0;
    p.rows.rows_per_block = std::max<int64_t>(rows, 1);
    return p;
  }
  const int64_t row_bytes = cols * bytes_per_elem;
  const int64_t total = rows * row_bytes;  // fits: buffers exist in memory
  const int64_t want_tasks = std::clamp<int64_t>(total / kTargetBlockBytes, 1, kMaxBlocksPerGroup);

  int64_t row_blocks = std::min(want_tasks, std::max<int64_t>(rows / min_rows_per_block, 1));
  p.rows.rows_per_block = (rows + row_blocks - 1) / row_blocks;
  p.rows.num_blocks = (rows + p.rows.rows_per_block - 1) / p.rows.rows_per_block;

  // Few rows: make up the missing parallelism with column chunks.
  const int64_t col_chunks_wanted = want_tasks / p.rows.num_blocks;
  if (col_chunks_wanted > 1 && cols >= 2 * kColAlign) {
    int64_t per = (cols + col_chunks_wanted - 1) / col_chunks_wanted;
    per = (per + kColAlign - 1) / kColAlign * kColAlign;
    p.cols.cols_per_chunk = per;
    p.cols.num_chunks = (cols + per - 1) / per;
  }
  return p;
}

// Row blocks for row-wise kernels (LayerNorm forward, LayerNormGrad, the
// fused backward): each row is independent, the only cross-row result is the
// gamma/beta reduction, which follows the same block rule.
inline RowPartition make_row_partition(int64_t rows, int64_t row_bytes) {
  return make_reduce_partition(rows, std::max<int64_t>(row_bytes, 1), 1, kMinRowsPerRowBlock).rows;
}

}  // namespace jax_lngb
