// The per-ISA function tables behind reduce_rows_fn (internal).
#pragma once

#include "reduce_rows.h"

namespace jax_lngb {

struct ReduceRowsTable {
  // Indexed by the dtype of res and dy (one dtype), one per ReduceLoop:
  ReduceRowsFn blocked[kNumDTypes];
  ReduceRowsFn blocked_prefetch[kNumDTypes];
  ReduceRowsFn rowwise[kNumDTypes];
  // Indexed by the output dtype.
  StoreSumsFn store_sums[kNumDTypes];
};

namespace generic {
ReduceRowsTable reduce_rows_table();
}
namespace avx2 {
ReduceRowsTable reduce_rows_table();
}
namespace avx512 {
ReduceRowsTable reduce_rows_table();
}

}  // namespace jax_lngb
