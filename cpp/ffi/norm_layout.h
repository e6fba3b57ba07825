// Buffer-layout checks shared by the LayerNorm and RMSNorm FFI handlers
// (forward, LayerNormGrad, fused backwards).
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
inline std::string param_layout(const char* name, const ffi::AnyBuffer& prm, ffi::Span<const int64_t> row_dims,
                                ParamLayout* out) {
  if (prm.element_type() != ffi::DataType::F32) return std::string(name) + " must be float32";
  const auto d = prm.dimensions();
  const int64_t H = row_dims.back();
  if (d.size() < 1 || d.back() != H || d.size() > row_dims.size())
    return std::string(name) + " shape " + dims_str(d) + " is neither [H] nor [*G, H] for rows " + dims_str(row_dims);
  ParamLayout l;
  l.group_dims = int64_t(d.size()) - 1;
  for (size_t i = 0; i + 1 < d.size(); ++i) {
    if (d[i] != row_dims[i])
      return std::string(name) + " group dims " + dims_str(d) + " do not lead the rows " + dims_str(row_dims);
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

// The row operand x every norm handler starts from: rank >= 1 and a
// supported dtype, set in *t. Returns the message on failure.
inline std::string row_operand(const ffi::AnyBuffer& x, DType* t) {
  if (x.dimensions().size() < 1) return "x must have rank >= 1";
  const auto dt = to_dtype(x.element_type());
  if (!dt) return "unsupported x dtype (need float32, float16 or bfloat16)";
  *t = *dt;
  return {};
}

// Whether a buffer has x's dtype and shape (dy, y, dx, res_for_gamma).
inline bool like_rows(const ffi::AnyBuffer& b, const ffi::AnyBuffer& x) {
  return b.element_type() == x.element_type() && same_dims(b.dimensions(), x.dimensions());
}

// Whether a buffer is float32 of shape x.shape[:-1] (mean, variance, rstd).
inline bool like_row_stats(const ffi::AnyBuffer& s, const ffi::AnyBuffer& x) {
  return s.element_type() == ffi::DataType::F32 && is_row_stats(s.dimensions(), x.dimensions());
}

// The epsilon check's message (empty when valid_epsilon).
inline std::string epsilon_error(float eps) {
  if (valid_epsilon(eps)) return {};
  return "epsilon must be finite and >= 0; got " + std::to_string(eps);
}

// The fused backwards' reduced output (pd_gamma, and LayerNorm's pd_beta of
// the same layout): [*G, H] for the rows' dims [*G, *rows, H], in a
// supported dtype. On success sets *out_t and returns an empty string.
inline std::string reduced_out_layout(const ffi::AnyBuffer& out, ffi::Span<const int64_t> row_dims, DType* out_t) {
  const auto d = out.dimensions();
  const auto t = to_dtype(out.element_type());
  if (!t) return "unsupported pd_gamma dtype";
  if (d.size() < 1 || d.size() > row_dims.size() || d.back() != row_dims.back())
    return "pd_gamma shape " + dims_str(d) + " is not [*G, H] for x " + dims_str(row_dims);
  for (size_t i = 0; i + 1 < d.size(); ++i)
    if (d[i] != row_dims[i]) return "pd_gamma group dims " + dims_str(d) + " do not lead x " + dims_str(row_dims);
  *out_t = *t;
  return {};
}

// A per-group gamma must have pd_gamma's shape (the batching rules give
// both the same group axes).
inline std::string gamma_matches_out(const ffi::AnyBuffer& gamma, const ParamLayout& lg,
                                     ffi::Span<const int64_t> out_dims) {
  if (lg.group_dims > 0 && !same_dims(gamma.dimensions(), out_dims))
    return "gamma " + dims_str(gamma.dimensions()) + " must be [H] or pd_gamma's shape " + dims_str(out_dims);
  return {};
}

}  // namespace jax_lngb::ffi_util
