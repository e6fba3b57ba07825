#include "rms_norm_rows.h"

#include "base/isa_table.h"
#include "rms_norm_rows_table.h"

namespace jax_lngb {

const RmsNormRowsTable& rms_norm_rows() {
  static const auto table =
      active_isa_table(&generic::rms_norm_rows_table, JAX_LNGB_AVX2_ONLY(avx2::rms_norm_rows_table),
                       JAX_LNGB_AVX512_ONLY(avx512::rms_norm_rows_table));
  return table;
}

}  // namespace jax_lngb
