// Buffer-layout checks shared by the LayerNorm FFI handlers (forward,
// LayerNormGrad, fused backward).
//
// Row operands are [*G, *rows, H]; per-row statistics are [*G, *rows]; a
// parameter (gamma, beta) is either [H], shared by every row, or [*G, H],
// one per group: the batching rules add the leading group axes G. All sizes
// come from the buffers.
#pragma once

#include <cstdint>
#include <string>

#include "ffi/ffi_common.h"

namespace jax_lngb::ffi_util {

// Where a parameter's row for group g starts: g * stride floats.
struct ParamLayout {
  int64_t group_dims = 0;  // how many leading axes of the row operand are groups
  int64_t groups = 1;
  int64_t stride = 0;  // 0 (shared) or H
};

// Checks a float32 parameter against the row operand's dims; on failure
// returns the message.
inline std::string param_layout(const char* name, const ffi::AnyBuffer& prm,
                                ffi::Span<const int64_t> row_dims, ParamLayout* out) {
  if (prm.element_type() != ffi::DataType::F32) return std::string(name) + " must be float32";
  const auto d = prm.dimensions();
  const int64_t H = row_dims.back();
  if (d.size() < 1 || d.back() != H || d.size() > row_dims.size())
    return std::string(name) + " shape " + dims_str(d) + " is neither [H] nor [*G, H] for rows " +
           dims_str(row_dims);
  ParamLayout l;
  l.group_dims = int64_t(d.size()) - 1;
  for (size_t i = 0; i + 1 < d.size(); ++i) {
    if (d[i] != row_dims[i])
      return std::string(name) + " group dims " + dims_str(d) + " do not lead the rows " +
             dims_str(row_dims);
    l.groups *= d[i];
  }
  l.stride = l.group_dims > 0 ? H : 0;
  *out = l;
  return {};
}

// dims without the last axis, as a string-free comparison helper.
inline bool is_row_stats(ffi::Span<const int64_t> stats, ffi::Span<const int64_t> row_dims) {
  if (stats.size() + 1 != row_dims.size()) return false;
  for (size_t i = 0; i < stats.size(); ++i)
    if (stats[i] != row_dims[i]) return false;
  return true;
}

inline int64_t product(ffi::Span<const int64_t> d, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= d[i];
  return n;
}

}  // namespace jax_lngb::ffi_util
