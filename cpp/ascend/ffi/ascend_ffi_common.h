// What every Ascend XLA FFI handler (grad_beta, layer_norm, rms_norm; NPU and
// emulated) shares: the error shape, the element-type decoding, the operand
// checks that read the same way in each target, and the call of the launcher.
// Each check returns the message the handlers have always returned, so a
// caller that folds onto it keeps its contract word for word.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ascend/launch/grad_beta_launch.h"  // ElemType, elem_size
#include "xla/ffi/api/ffi.h"

namespace jax_lngb::ascend {

namespace ffi = xla::ffi;

inline ffi::Error invalid(const std::string& what) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, "jax_lngb ascend: " + what);
}

inline bool elem_type(ffi::DataType t, ElemType* out) {
  if (t == ffi::DataType::F32) return *out = ElemType::kF32, true;
  if (t == ffi::DataType::F16) return *out = ElemType::kF16, true;
  return false;
}

// The kernels move whole 32-byte blocks per row.
inline bool whole_32_byte_rows(uint64_t h_length, ElemType t) { return h_length * elem_size(t) % 32 == 0; }

// A buffer of another operand's element type and element count.
inline bool like(ffi::DataType type, size_t count, ffi::AnyBuffer x) {
  return type == x.element_type() && count == x.element_count();
}

// `name`'s last dimension is h_length.
inline ffi::Error check_last_dim(const std::string& name, ffi::AnyBuffer x, uint32_t h_length) {
  const auto dims = x.dimensions();
  if (dims.size() < 1 || dims.back() != int64_t(h_length))
    return invalid(name + "'s last dimension must be h_length = " + std::to_string(h_length));
  return ffi::Error::Success();
}

// `holders` (one operand, or several named together) hold rows * h_length elements.
inline ffi::Error check_row_count(const std::string& holders, bool holds, uint32_t rows, uint32_t h_length) {
  if (!holds)
    return invalid(holders + " must hold rows * h_length = " + std::to_string(uint64_t(rows) * h_length) + " elements");
  return ffi::Error::Success();
}

// A [..., h_length] row operand: float32 or float16 (decoded into *type),
// last dimension h_length, rows * h_length elements.
inline ffi::Error check_row_operand(const std::string& name, ffi::AnyBuffer x, ElemType* type, uint32_t rows,
                                    uint32_t h_length) {
  if (!elem_type(x.element_type(), type)) return invalid(name + " must be float32 or float16");
  if (ffi::Error e = check_last_dim(name, x, h_length); e.failure()) return e;
  return check_row_count(name, x.element_count() == size_t(rows) * h_length, rows, h_length);
}

inline ffi::Error check_tiling_words(size_t words, size_t expected) {
  if (words != expected) return invalid("the tiling operand must have " + std::to_string(expected) + " uint32 words");
  return ffi::Error::Success();
}

// pd_gamma and pd_beta: one type, float32 or float16 (decoded into *type).
inline ffi::Error check_param_grad_type(ffi::AnyBuffer pd_gamma, ffi::AnyBuffer pd_beta, ElemType* type) {
  if (!elem_type(pd_gamma.element_type(), type) || pd_beta.element_type() != pd_gamma.element_type())
    return invalid("pd_gamma and pd_beta must both be float32 or both float16");
  return ffi::Error::Success();
}

inline ffi::Error check_param_grad_count(ffi::AnyBuffer pd_gamma, ffi::AnyBuffer pd_beta, uint32_t h_length) {
  if (pd_gamma.element_count() != h_length || pd_beta.element_count() != h_length)
    return invalid("pd_gamma and pd_beta must have h_length elements");
  return ffi::Error::Success();
}

// The fp32 group partials of the combine kernel: num_groups * 2 * h_length
// floats, whose count goes to *elems.
inline ffi::Error check_workspace(size_t count, uint32_t num_groups, uint32_t h_length, uint64_t* elems) {
  *elems = uint64_t(num_groups) * 2 * h_length;
  if (count != *elems)
    return invalid("workspace must have num_groups * 2 * h_length = " + std::to_string(*elems) + " floats");
  return ffi::Error::Success();
}

// The combine kernel's cores must cover every column of H.
inline ffi::Error check_combine_cover(uint32_t combine_block_dim, uint32_t combine_cols_per_core, uint32_t h_length) {
  if (combine_block_dim < 1 || uint64_t(combine_block_dim) * combine_cols_per_core < h_length)
    return invalid("combine_block_dim * combine_cols_per_core must cover h_length = " + std::to_string(h_length));
  return ffi::Error::Success();
}

// The NPU handlers run on the stream of XLA's FFI context.
inline ffi::Error check_stream(void* stream) {
  if (stream == nullptr) return invalid("no NPU stream in the FFI context");
  return ffi::Error::Success();
}

// Launcher: callable as int(const Launch&, const char** message); a non-zero
// code becomes an internal error carrying the launcher's message.
template <class Launcher, class Launch>
ffi::Error run_launcher(Launcher&& launcher, const Launch& l) {
  const char* message = "";
  if (const int rc = launcher(l, &message))
    return ffi::Error(ffi::ErrorCode::kInternal,
                      std::string("jax_lngb ascend: ") + message + " (code " + std::to_string(rc) + ")");
  return ffi::Error::Success();
}

}  // namespace jax_lngb::ascend

// Returns from the enclosing handler when a check fails.
#define JAX_LNGB_ASCEND_CHECK(expr)                                                     \
  do {                                                                                  \
    if (::xla::ffi::Error jax_lngb_e = (expr); jax_lngb_e.failure()) return jax_lngb_e; \
  } while (0)
