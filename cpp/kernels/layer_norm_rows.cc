#include "layer_norm_rows.h"

#include "base/isa_table.h"
#include "layer_norm_rows_table.h"

namespace jax_lngb {

const LayerNormRowsTable& layer_norm_rows() {
  static const auto table =
      active_isa_table(&generic::layer_norm_rows_table, JAX_LNGB_AVX2_ONLY(avx2::layer_norm_rows_table),
                       JAX_LNGB_AVX512_ONLY(avx512::layer_norm_rows_table));
  return table;
}

}  // namespace jax_lngb
