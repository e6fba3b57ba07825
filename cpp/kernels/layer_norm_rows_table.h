// The per-ISA row-kernel tables behind layer_norm_rows() (internal).
#pragma once

#include "layer_norm_rows.h"

namespace jax_lngb {
namespace generic {
LayerNormRowsTable layer_norm_rows_table();
}
namespace avx2 {
LayerNormRowsTable layer_norm_rows_table();
}
namespace avx512 {
LayerNormRowsTable layer_norm_rows_table();
}
}  // namespace jax_lngb
