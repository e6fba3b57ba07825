// The per-ISA row-kernel tables behind add_norm_rows() (internal).
#pragma once

#include "add_norm_rows.h"

namespace jax_lngb {
namespace generic {
AddNormRowsTable add_norm_rows_table();
}
namespace avx2 {
AddNormRowsTable add_norm_rows_table();
}
namespace avx512 {
AddNormRowsTable add_norm_rows_table();
}
}  // namespace jax_lngb
