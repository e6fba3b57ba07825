// The per-ISA row-kernel tables behind rms_norm_rows() (internal).
#pragma once

#include "rms_norm_rows.h"

namespace jax_lngb {
namespace generic {
RmsNormRowsTable rms_norm_rows_table();
}
namespace avx2 {
RmsNormRowsTable rms_norm_rows_table();
}
namespace avx512 {
RmsNormRowsTable rms_norm_rows_table();
}
}  // namespace jax_lngb
