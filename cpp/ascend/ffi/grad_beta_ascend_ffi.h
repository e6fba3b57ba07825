// The XLA FFI handler of `jax_lngb_ascend_layer_norm_grad_beta`: decodes and
// checks what jax_lngb/ascend.py emits, then hands a GradBetaLaunch to a
// launcher. Written once, bound twice: with the NPU stream and the CANN
// launcher (grad_beta_ascend_ffi.cc), and on the CPU with the emulated
// launcher (emu/emu_ffi.cc), which is how the contract is tested here.
//
// Custom call contract (jax_lngb/ascend.py):
//   operands: res_for_gamma [..., h_length], dy [..., h_length] (float32 or
//             float16, H zero padded), tiling u32[56] (GradBetaKernelTiling)
//   results:  pd_gamma [h_length], pd_beta [h_length] (float32 or float16),
//             workspace f32[num_groups * 2 * h_length]
//   attributes (u32): block_dim, combine_block_dim, combine_cols_per_core,
//             rows, h_length, original_h_length, tile_rows, num_groups,
//             stack_buffer_bytes, one_cal_size
#pragma once

#include <cstdint>
#include <string>

#include "ascend/launch/grad_beta_launch.h"
#include "tiling/grad_beta_kernel_tiling.h"
#include "xla/ffi/api/ffi.h"

namespace jax_lngb::ascend {

namespace ffi = xla::ffi;

struct GradBetaAttrs {
  uint32_t block_dim, combine_block_dim, combine_cols_per_core, rows, h_length, original_h_length, tile_rows,
      num_groups, stack_buffer_bytes, one_cal_size;
};

inline ffi::Error invalid(const std::string& what) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, "jax_lngb ascend: " + what);
}

inline bool elem_type(ffi::DataType t, ElemType* out) {
  if (t == ffi::DataType::F32) return *out = ElemType::kF32, true;
  if (t == ffi::DataType::F16) return *out = ElemType::kF16, true;
  return false;
}

// Launcher: callable as int(const GradBetaLaunch&, const char** message).
template <class Launcher>
ffi::Error grad_beta_ascend(Launcher&& launcher, ffi::AnyBuffer res, ffi::AnyBuffer dy, ffi::Buffer<ffi::U32> tiling,
                            ffi::Result<ffi::AnyBuffer> pd_gamma, ffi::Result<ffi::AnyBuffer> pd_beta,
                            ffi::Result<ffi::Buffer<ffi::F32>> workspace, const GradBetaAttrs& a) {
  GradBetaLaunch l;
  if (!elem_type(res.element_type(), &l.in_type) || dy.element_type() != res.element_type())
    return invalid("res_for_gamma and dy must both be float32 or both float16");
  if (!elem_type(pd_gamma->element_type(), &l.out_type) || pd_beta->element_type() != pd_gamma->element_type())
    return invalid("pd_gamma and pd_beta must both be float32 or both float16");
  const auto dims = res.dimensions();
  if (dims.size() < 1 || dims.back() != int64_t(a.h_length))
    return invalid("res_for_gamma's last dimension must be h_length = " + std::to_string(a.h_length));
  if (res.element_count() != size_t(a.rows) * a.h_length || dy.element_count() != res.element_count())
    return invalid("res_for_gamma and dy must hold rows * h_length = " + std::to_string(uint64_t(a.rows) * a.h_length) +
                   " elements");
  if (uint64_t(a.h_length) * elem_size(l.in_type) % 32 != 0 || uint64_t(a.h_length) * elem_size(l.out_type) % 32 != 0)
    return invalid("h_length must make 32-byte rows (pad H with zeros)");
  if (pd_gamma->element_count() != a.h_length || pd_beta->element_count() != a.h_length)
    return invalid("pd_gamma and pd_beta must have h_length elements");
  if (tiling.element_count() != jax_lngb_ascend::kGradBetaTilingWords)
    return invalid("the tiling operand must have " + std::to_string(jax_lngb_ascend::kGradBetaTilingWords) +
                   " uint32 words");
  const uint64_t ws_elems = uint64_t(a.num_groups) * 2 * a.h_length;
  if (workspace->element_count() != ws_elems)
    return invalid("workspace must have num_groups * 2 * h_length = " + std::to_string(ws_elems) + " floats");
  if (a.block_dim < 1 || a.block_dim > a.num_groups || a.original_h_length < 1 || a.original_h_length > a.h_length ||
      a.tile_rows < 1 || a.tile_rows > a.rows)
    return invalid("inconsistent launch attributes");
  // The combine kernel's cores must cover every column of H.
  if (a.combine_block_dim < 1 || uint64_t(a.combine_block_dim) * a.combine_cols_per_core < a.h_length)
    return invalid("combine_block_dim * combine_cols_per_core must cover h_length = " + std::to_string(a.h_length));

  l.res_for_gamma = res.untyped_data();
  l.dy = dy.untyped_data();
  l.tiling = tiling.typed_data();
  l.workspace = workspace->typed_data();
  l.pd_gamma = pd_gamma->untyped_data();
  l.pd_beta = pd_beta->untyped_data();
  l.rows = a.rows;
  l.h_length = a.h_length;
  l.tiling_words = tiling.element_count();
  l.workspace_bytes = ws_elems * sizeof(float);
  l.block_dim = a.block_dim;
  l.combine_block_dim = a.combine_block_dim;
  const char* message = "";
  if (const int rc = launcher(l, &message))
    return ffi::Error(ffi::ErrorCode::kInternal,
                      std::string("jax_lngb ascend: ") + message + " (code " + std::to_string(rc) + ")");
  return ffi::Error::Success();
}

}  // namespace jax_lngb::ascend

// The binding shared by both handlers, after the context arguments.
#define JAX_LNGB_ASCEND_GRAD_BETA_BINDING(bind) \
  bind.Arg<xla::ffi::AnyBuffer>()               \
      .Arg<xla::ffi::AnyBuffer>()               \
      .Arg<xla::ffi::Buffer<xla::ffi::U32>>()   \
      .Ret<xla::ffi::AnyBuffer>()               \
      .Ret<xla::ffi::AnyBuffer>()               \
      .Ret<xla::ffi::Buffer<xla::ffi::F32>>()   \
      .Attr<uint32_t>("block_dim")              \
      .Attr<uint32_t>("combine_block_dim")      \
      .Attr<uint32_t>("combine_cols_per_core")  \
      .Attr<uint32_t>("rows")                   \
      .Attr<uint32_t>("h_length")               \
      .Attr<uint32_t>("original_h_length")      \
      .Attr<uint32_t>("tile_rows")              \
      .Attr<uint32_t>("num_groups")             \
      .Attr<uint32_t>("stack_buffer_bytes")     \
      .Attr<uint32_t>("one_cal_size")
