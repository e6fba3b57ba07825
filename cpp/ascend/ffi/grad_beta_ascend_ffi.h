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

#include "ascend/ffi/ascend_ffi_common.h"
#include "ascend/launch/grad_beta_launch.h"
#include "tiling/grad_beta_kernel_tiling.h"
#include "xla/ffi/api/ffi.h"

namespace jax_lngb::ascend {

struct GradBetaAttrs {
  uint32_t block_dim, combine_block_dim, combine_cols_per_core, rows, h_length, original_h_length, tile_rows,
      num_groups, stack_buffer_bytes, one_cal_size;
};

// Launcher: callable as int(const GradBetaLaunch&, const char** message).
template <class Launcher>
ffi::Error grad_beta_ascend(Launcher&& launcher, ffi::AnyBuffer res, ffi::AnyBuffer dy, ffi::Buffer<ffi::U32> tiling,
                            ffi::Result<ffi::AnyBuffer> pd_gamma, ffi::Result<ffi::AnyBuffer> pd_beta,
                            ffi::Result<ffi::Buffer<ffi::F32>> workspace, const GradBetaAttrs& a) {
  GradBetaLaunch l;
  if (!elem_type(res.element_type(), &l.in_type) || dy.element_type() != res.element_type())
    return invalid("res_for_gamma and dy must both be float32 or both float16");
  JAX_LNGB_ASCEND_CHECK(check_param_grad_type(*pd_gamma, *pd_beta, &l.out_type));
  JAX_LNGB_ASCEND_CHECK(check_last_dim("res_for_gamma", res, a.h_length));
  JAX_LNGB_ASCEND_CHECK(
      check_row_count("res_for_gamma and dy",
                      res.element_count() == size_t(a.rows) * a.h_length && dy.element_count() == res.element_count(),
                      a.rows, a.h_length));
  if (!whole_32_byte_rows(a.h_length, l.in_type) || !whole_32_byte_rows(a.h_length, l.out_type))
    return invalid("h_length must make 32-byte rows (pad H with zeros)");
  JAX_LNGB_ASCEND_CHECK(check_param_grad_count(*pd_gamma, *pd_beta, a.h_length));
  JAX_LNGB_ASCEND_CHECK(check_tiling_words(tiling.element_count(), jax_lngb_ascend::kGradBetaTilingWords));
  uint64_t ws_elems = 0;
  JAX_LNGB_ASCEND_CHECK(check_workspace(workspace->element_count(), a.num_groups, a.h_length, &ws_elems));
  if (a.block_dim < 1 || a.block_dim > a.num_groups || a.original_h_length < 1 || a.original_h_length > a.h_length ||
      a.tile_rows < 1 || a.tile_rows > a.rows)
    return invalid("inconsistent launch attributes");
  JAX_LNGB_ASCEND_CHECK(check_combine_cover(a.combine_block_dim, a.combine_cols_per_core, a.h_length));

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
  return run_launcher(launcher, l);
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

// A handler `NAME` on the binding above: `LAUNCH` is an expression callable as
// int(const GradBetaLaunch&, const char**), `PRELUDE` a statement it runs
// first (the NPU's stream check), and the variadic arguments are the context
// parameters ahead of the operands.
#define JAX_LNGB_ASCEND_GRAD_BETA_HANDLER(NAME, LAUNCH, PRELUDE, ...)                                              \
  ::xla::ffi::Error NAME(                                                                                          \
      __VA_ARGS__ ::xla::ffi::AnyBuffer res, ::xla::ffi::AnyBuffer dy, ::xla::ffi::Buffer<::xla::ffi::U32> tiling, \
      ::xla::ffi::Result<::xla::ffi::AnyBuffer> pd_gamma, ::xla::ffi::Result<::xla::ffi::AnyBuffer> pd_beta,       \
      ::xla::ffi::Result<::xla::ffi::Buffer<::xla::ffi::F32>> workspace, uint32_t block_dim,                       \
      uint32_t combine_block_dim, uint32_t combine_cols_per_core, uint32_t rows, uint32_t h_length,                \
      uint32_t original_h_length, uint32_t tile_rows, uint32_t num_groups, uint32_t stack_buffer_bytes,            \
      uint32_t one_cal_size) {                                                                                     \
    PRELUDE                                                                                                        \
    const jax_lngb::ascend::GradBetaAttrs a{                                                                       \
        block_dim, combine_block_dim, combine_cols_per_core, rows,        h_length, original_h_length,             \
        tile_rows, num_groups,        stack_buffer_bytes,    one_cal_size};                                        \
    return jax_lngb::ascend::grad_beta_ascend(LAUNCH, res, dy, tiling, pd_gamma, pd_beta, workspace, a);           \
  }
