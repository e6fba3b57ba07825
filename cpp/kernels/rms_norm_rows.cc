#include "rms_norm_rows.h"

#include "cpu_features.h"
#include "rms_norm_rows_table.h"

namespace jax_lngb {

namespace {
RmsNormRowsTable active_table() {
  switch (active_isa()) {
#if defined(JAX_LNGB_HAVE_AVX512)
    case Isa::kAvx512:
      return avx512::rms_norm_rows_table();
#endif
#if defined(JAX_LNGB_HAVE_AVX2)
    case Isa::kAvx2:
      return avx2::rms_norm_rows_table();
#endif
    default:
      return generic::rms_norm_rows_table();
  }
}
}  // namespace

const RmsNormRowsTable& rms_norm_rows() {
  static const RmsNormRowsTable table = active_table();
  return table;
}

}  // namespace jax_lngb
