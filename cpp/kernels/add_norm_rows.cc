#include "add_norm_rows.h"

#include "add_norm_rows_table.h"
#include "base/isa_table.h"

namespace jax_lngb {

const AddNormRowsTable& add_norm_rows() {
  static const auto table =
      active_isa_table(&generic::add_norm_rows_table, JAX_LNGB_AVX2_ONLY(avx2::add_norm_rows_table),
                       JAX_LNGB_AVX512_ONLY(avx512::add_norm_rows_table));
  return table;
}

}  // namespace jax_lngb
