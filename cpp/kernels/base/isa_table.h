// Picks the active ISA's kernel table (see cpu_features.h) from the per-ISA
// table makers of one kernel family (internal). A variant this build does
// not contain is passed as nullptr (JAX_LNGB_AVX2_ONLY / JAX_LNGB_AVX512_ONLY),
// so its symbol is never referenced, and the generic table stands in.
#pragma once

#include "cpu_features.h"

#if defined(JAX_LNGB_HAVE_AVX2)
#define JAX_LNGB_AVX2_ONLY(fn) (&fn)
#else
#define JAX_LNGB_AVX2_ONLY(fn) nullptr
#endif
#if defined(JAX_LNGB_HAVE_AVX512)
#define JAX_LNGB_AVX512_ONLY(fn) (&fn)
#else
#define JAX_LNGB_AVX512_ONLY(fn) nullptr
#endif

namespace jax_lngb {

template <class Table>
Table active_isa_table(Table (*generic)(), Table (*avx2)(), Table (*avx512)()) {
  switch (active_isa()) {
    case Isa::kAvx512:
      if (avx512 != nullptr) return avx512();
      break;
    case Isa::kAvx2:
      if (avx2 != nullptr) return avx2();
      break;
    default:
      break;
  }
  return generic();
}

}  // namespace jax_lngb
