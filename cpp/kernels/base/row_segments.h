// Walking a block of rows of a [groups][rows] layout group by group
// (internal to the LayerNorm drivers).
#pragma once

#include <algorithm>
#include <cstdint>

namespace jax_lngb {

// Calls f(g, r0, r1) for each piece [r0, r1) (global row indices) of the
// rows [begin, end) that lies in one group of `rows_per_group` rows.
template <class F>
inline void for_group_segments(int64_t begin, int64_t end, int64_t rows_per_group, F&& f) {
  for (int64_t r = begin; r < end;) {
    const int64_t g = r / rows_per_group;
    const int64_t stop = std::min(end, (g + 1) * rows_per_group);
    f(g, r, stop);
    r = stop;
  }
}

}  // namespace jax_lngb
