// The fixed work partition: blocks tile the rows in order, column chunks
// tile the columns on SIMD-aligned boundaries, and nothing depends on
// anything but the shape (there is no thread argument to depend on).
#include <algorithm>
#include <cstdint>

#include "harness.h"
#include "kernels/base/partition.h"

namespace jax_lngb::test {
namespace {

void check_partition(int64_t rows, int64_t cols, int64_t bpe) {
  const ReducePartition p = make_reduce_partition(rows, cols, bpe);
  const ReducePartition q = make_reduce_partition(rows, cols, bpe);
  CHECK(p.rows.rows_per_block == q.rows.rows_per_block && p.rows.num_blocks == q.rows.num_blocks &&
        p.cols.cols_per_chunk == q.cols.cols_per_chunk && p.cols.num_chunks == q.cols.num_chunks);
#define WHERE "rows " << rows << " cols " << cols << " bpe " << bpe
  CHECK_MSG(p.rows.rows == rows && p.cols.cols == cols, WHERE);
  if (rows <= 0) {
    CHECK_MSG(p.rows.num_blocks == 0, WHERE);
  } else {
    CHECK_MSG(p.rows.num_blocks >= 1 && p.rows.num_blocks <= kMaxBlocksPerGroup, WHERE);
    CHECK_MSG(p.rows.rows_per_block >= 1, WHERE);
    // Contiguous, in order, none empty, exactly covering [0, rows).
    CHECK_MSG(p.rows.begin(0) == 0 && p.rows.end(p.rows.num_blocks - 1) == rows, WHERE);
    for (int64_t b = 0; b + 1 < p.rows.num_blocks; ++b) CHECK_MSG(p.rows.end(b) == p.rows.begin(b + 1), WHERE);
    CHECK_MSG(p.rows.end(p.rows.num_blocks - 1) > p.rows.begin(p.rows.num_blocks - 1), WHERE);
    // Blocks are not split below the minimum unless there are too few rows.
    if (p.rows.num_blocks > 1) CHECK_MSG(p.rows.rows_per_block >= kMinRowsPerBlock, WHERE);
  }
  CHECK_MSG(p.cols.num_chunks >= 1, WHERE);
  if (cols > 0) {
    CHECK_MSG(p.cols.begin(0) == 0 && p.cols.end(p.cols.num_chunks - 1) == cols, WHERE);
    CHECK_MSG(p.cols.end(p.cols.num_chunks - 1) > p.cols.begin(p.cols.num_chunks - 1), WHERE);
    if (p.cols.num_chunks > 1) CHECK_MSG(p.cols.cols_per_chunk % kColAlign == 0, WHERE);
  }
  // Row-wise kernels use the same row rule with their smaller minimum block.
  const RowPartition r = make_row_partition(rows, cols * bpe);
  CHECK_MSG(r.num_blocks ==
                make_reduce_partition(rows, std::max<int64_t>(cols * bpe, 1), 1, kMinRowsPerRowBlock).rows.num_blocks,
            WHERE);
  if (r.num_blocks > 1) CHECK_MSG(r.rows_per_block >= kMinRowsPerRowBlock, WHERE);
#undef WHERE
}

JAX_LNGB_TEST(partition_tiles_rows_and_columns) {
  const int64_t rows_list[] = {0,
                               1,
                               2,
                               15,
                               16,
                               17,
                               31,
                               32,
                               33,
                               100,
                               1000,
                               4096,
                               65537,
                               int64_t(1) << 21,
                               (int64_t(1) << 21) + 3,
                               int64_t(1) << 28};
  const int64_t cols_list[] = {0, 1, 7, 8, 63, 64, 127, 128, 129, 768, 1024, 4097, 70001, int64_t(1) << 20};
  for (int64_t rows : rows_list)
    for (int64_t cols : cols_list)
      for (int64_t bpe : {2, 4, 8}) {
        if (rows * cols * bpe > (int64_t(1) << 44)) continue;  // larger than any machine's memory
        check_partition(rows, cols, bpe);
      }
}

JAX_LNGB_TEST(partition_scales_with_bytes) {
  // Enough bytes give the full block count; column chunks appear only when
  // there are too few rows to make blocks from.
  const ReducePartition big = make_reduce_partition(1 << 20, 1024, 4);
  CHECK(big.rows.num_blocks == kMaxBlocksPerGroup && big.cols.num_chunks == 1);
  const ReducePartition wide = make_reduce_partition(8, 70001, 8);
  CHECK(wide.rows.num_blocks == 1 && wide.cols.num_chunks > 1);
  const ReducePartition small = make_reduce_partition(1000, 8, 4);
  CHECK(small.rows.num_blocks == 1 && small.cols.num_chunks == 1);
}

}  // namespace
}  // namespace jax_lngb::test
