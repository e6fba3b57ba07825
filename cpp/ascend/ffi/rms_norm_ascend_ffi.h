// The XLA FFI handlers of `jax_lngb_ascend_rms_norm_forward` and
// `jax_lngb_ascend_rms_norm_backward`: decode and check what
// jax_lngb/ascend/lowering.py emits, then hand a launch description to a
// launcher. Written once, bound twice: with the NPU stream and the CANN
// launcher (rms_norm_ascend_ffi.cc), and on the CPU with the emulated
// launcher (emu/emu_rms_norm_ffi.cc), which is how the contract is tested.
//
// Forward custom call:
//   operands: x [..., h_length] (float32 or float16, H zero padded),
//             gamma f32[h_length], tiling u32[40] (RmsNormForwardKernelTiling)
//   results:  y [..., h_length] (x's type), rstd f32[num_tiles * rstd_stride]
//   attributes (u32): block_dim, rows, h_length, original_h_length, tile_rows, num_tiles
// Backward custom call:
//   operands: dy, x [..., h_length] (float32 or float16, one type),
//             rstd f32[num_tiles * rstd_stride], gamma f32[h_length],
//             tiling u32[64] (RmsNormBackwardKernelTiling)
//   results:  dx [..., h_length] (x's type), pd_gamma [h_length] and
//             pd_beta [h_length] (float32 or float16; pd_beta is the sum of
//             dy, a by-product), workspace f32[num_groups * 2 * h_length]
//   attributes (u32): block_dim, combine_block_dim, combine_cols_per_core,
//             rows, h_length, original_h_length, tile_rows, num_tiles, num_groups
#pragma once

#include <cstdint>
#include <string>

#include "ascend/ffi/ascend_ffi_common.h"
#include "ascend/launch/rms_norm_launch.h"
#include "tiling/rms_norm_kernel_tiling.h"
#include "xla/ffi/api/ffi.h"

namespace jax_lngb::ascend {

struct RmsNormForwardAttrs {
  uint32_t block_dim, rows, h_length, original_h_length, tile_rows, num_tiles;
};

struct RmsNormBackwardAttrs {
  uint32_t block_dim, combine_block_dim, combine_cols_per_core, rows, h_length, original_h_length, tile_rows, num_tiles,
      num_groups;
};

inline uint64_t rms_rstd_elems(uint32_t num_tiles, uint32_t tile_rows) {
  return uint64_t(num_tiles) * ((uint64_t(tile_rows) + 7) / 8 * 8);
}

// The checks both handlers share: rows, tiles and the row operands.
inline ffi::Error check_rms_rows(const char* what, ffi::AnyBuffer x, ElemType* type, uint32_t rows, uint32_t h,
                                 uint32_t original_h, uint32_t tile_rows, uint32_t num_tiles) {
  JAX_LNGB_ASCEND_CHECK(check_row_operand(what, x, type, rows, h));
  if (!whole_32_byte_rows(h, *type)) return invalid("h_length must make 32-byte rows (pad H with zeros)");
  if (original_h < 2 || original_h > h || tile_rows < 1 || tile_rows > jax_lngb_ascend::kRmsNormMaxTileRows ||
      uint64_t(num_tiles) != (uint64_t(rows) + tile_rows - 1) / tile_rows)
    return invalid("inconsistent launch attributes (original_h_length, tile_rows, num_tiles)");
  return ffi::Error::Success();
}

template <class Launcher>
ffi::Error rms_norm_forward_ascend(Launcher&& launcher, ffi::AnyBuffer x, ffi::Buffer<ffi::F32> gamma,
                                   ffi::Buffer<ffi::U32> tiling, ffi::Result<ffi::AnyBuffer> y,
                                   ffi::Result<ffi::Buffer<ffi::F32>> rstd, const RmsNormForwardAttrs& a) {
  RmsNormForwardLaunch l;
  JAX_LNGB_ASCEND_CHECK(
      check_rms_rows("x", x, &l.type, a.rows, a.h_length, a.original_h_length, a.tile_rows, a.num_tiles));
  if (!like(y->element_type(), y->element_count(), x)) return invalid("y must have x's type and size");
  if (gamma.element_count() != a.h_length) return invalid("gamma must have h_length float32 elements");
  JAX_LNGB_ASCEND_CHECK(check_tiling_words(tiling.element_count(), jax_lngb_ascend::kRmsNormForwardTilingWords));
  const uint64_t rstd_elems = rms_rstd_elems(a.num_tiles, a.tile_rows);
  if (rstd->element_count() != rstd_elems)
    return invalid("rstd must have num_tiles * rstd_stride = " + std::to_string(rstd_elems) + " floats");
  if (a.block_dim < 1 || a.block_dim > a.num_tiles) return invalid("block_dim must be in [1, num_tiles]");
  l.x = x.untyped_data();
  l.gamma = gamma.typed_data();
  l.tiling = tiling.typed_data();
  l.y = y->untyped_data();
  l.rstd = rstd->typed_data();
  l.rows = a.rows;
  l.h_length = a.h_length;
  l.tiling_words = tiling.element_count();
  l.rstd_elems = rstd_elems;
  l.block_dim = a.block_dim;
  return run_launcher(launcher, l);
}

template <class Launcher>
ffi::Error rms_norm_backward_ascend(Launcher&& launcher, ffi::AnyBuffer dy, ffi::AnyBuffer x,
                                    ffi::Buffer<ffi::F32> rstd, ffi::Buffer<ffi::F32> gamma,
                                    ffi::Buffer<ffi::U32> tiling, ffi::Result<ffi::AnyBuffer> dx,
                                    ffi::Result<ffi::AnyBuffer> pd_gamma, ffi::Result<ffi::AnyBuffer> pd_beta,
                                    ffi::Result<ffi::Buffer<ffi::F32>> workspace, const RmsNormBackwardAttrs& a) {
  RmsNormBackwardLaunch l;
  JAX_LNGB_ASCEND_CHECK(
      check_rms_rows("x", x, &l.type, a.rows, a.h_length, a.original_h_length, a.tile_rows, a.num_tiles));
  if (!like(dy.element_type(), dy.element_count(), x)) return invalid("dy must have x's type and size");
  if (!like(dx->element_type(), dx->element_count(), x)) return invalid("dx must have x's type and size");
  JAX_LNGB_ASCEND_CHECK(check_param_grad_type(*pd_gamma, *pd_beta, &l.out_type));
  JAX_LNGB_ASCEND_CHECK(check_param_grad_count(*pd_gamma, *pd_beta, a.h_length));
  if (!whole_32_byte_rows(a.h_length, l.out_type))
    return invalid("h_length must make 32-byte rows of pd_gamma (pad H with zeros)");
  if (gamma.element_count() != a.h_length) return invalid("gamma must have h_length float32 elements");
  JAX_LNGB_ASCEND_CHECK(check_tiling_words(tiling.element_count(), jax_lngb_ascend::kRmsNormBackwardTilingWords));
  const uint64_t rstd_elems = rms_rstd_elems(a.num_tiles, a.tile_rows);
  if (rstd.element_count() != rstd_elems)
    return invalid("rstd must have num_tiles * rstd_stride = " + std::to_string(rstd_elems) + " floats");
  uint64_t ws_elems = 0;
  JAX_LNGB_ASCEND_CHECK(check_workspace(workspace->element_count(), a.num_groups, a.h_length, &ws_elems));
  if (a.num_groups < 1 || a.num_groups > a.num_tiles || a.block_dim < 1 || a.block_dim > a.num_groups)
    return invalid("inconsistent launch attributes (num_groups, block_dim)");
  JAX_LNGB_ASCEND_CHECK(check_combine_cover(a.combine_block_dim, a.combine_cols_per_core, a.h_length));
  l.dy = dy.untyped_data();
  l.x = x.untyped_data();
  l.rstd = rstd.typed_data();
  l.gamma = gamma.typed_data();
  l.tiling = tiling.typed_data();
  l.dx = dx->untyped_data();
  l.pd_gamma = pd_gamma->untyped_data();
  l.pd_beta = pd_beta->untyped_data();
  l.workspace = workspace->typed_data();
  l.rows = a.rows;
  l.h_length = a.h_length;
  l.tiling_words = tiling.element_count();
  l.rstd_elems = rstd_elems;
  l.workspace_bytes = ws_elems * sizeof(float);
  l.block_dim = a.block_dim;
  l.combine_block_dim = a.combine_block_dim;
  return run_launcher(launcher, l);
}

}  // namespace jax_lngb::ascend

// The bindings shared by both handlers, after the context arguments.
#define JAX_LNGB_ASCEND_RMS_NORM_FORWARD_BINDING(bind) \
  bind.Arg<xla::ffi::AnyBuffer>()                      \
      .Arg<xla::ffi::Buffer<xla::ffi::F32>>()          \
      .Arg<xla::ffi::Buffer<xla::ffi::U32>>()          \
      .Ret<xla::ffi::AnyBuffer>()                      \
      .Ret<xla::ffi::Buffer<xla::ffi::F32>>()          \
      .Attr<uint32_t>("block_dim")                     \
      .Attr<uint32_t>("rows")                          \
      .Attr<uint32_t>("h_length")                      \
      .Attr<uint32_t>("original_h_length")             \
      .Attr<uint32_t>("tile_rows")                     \
      .Attr<uint32_t>("num_tiles")

#define JAX_LNGB_ASCEND_RMS_NORM_BACKWARD_BINDING(bind) \
  bind.Arg<xla::ffi::AnyBuffer>()                       \
      .Arg<xla::ffi::AnyBuffer>()                       \
      .Arg<xla::ffi::Buffer<xla::ffi::F32>>()           \
      .Arg<xla::ffi::Buffer<xla::ffi::F32>>()           \
      .Arg<xla::ffi::Buffer<xla::ffi::U32>>()           \
      .Ret<xla::ffi::AnyBuffer>()                       \
      .Ret<xla::ffi::AnyBuffer>()                       \
      .Ret<xla::ffi::AnyBuffer>()                       \
      .Ret<xla::ffi::Buffer<xla::ffi::F32>>()           \
      .Attr<uint32_t>("block_dim")                      \
      .Attr<uint32_t>("combine_block_dim")              \
      .Attr<uint32_t>("combine_cols_per_core")          \
      .Attr<uint32_t>("rows")                           \
      .Attr<uint32_t>("h_length")                       \
      .Attr<uint32_t>("original_h_length")              \
      .Attr<uint32_t>("tile_rows")                      \
      .Attr<uint32_t>("num_tiles")                      \
      .Attr<uint32_t>("num_groups")

// Handlers `PREFIX##Forward` and `PREFIX##Backward` on the bindings above:
// `LAUNCH` is an expression callable as int(const RmsNormForwardLaunch&,
// const char**) and int(const RmsNormBackwardLaunch&, const char**),
// `PRELUDE` a statement each runs first (the NPU's stream check), and the
// variadic arguments are the context parameters ahead of the operands.
#define JAX_LNGB_ASCEND_RMS_NORM_HANDLERS(PREFIX, LAUNCH, PRELUDE, ...)                                                \
  ::xla::ffi::Error PREFIX##Forward(                                                                                   \
      __VA_ARGS__ ::xla::ffi::AnyBuffer x, ::xla::ffi::Buffer<::xla::ffi::F32> gamma,                                  \
      ::xla::ffi::Buffer<::xla::ffi::U32> tiling, ::xla::ffi::Result<::xla::ffi::AnyBuffer> y,                         \
      ::xla::ffi::Result<::xla::ffi::Buffer<::xla::ffi::F32>> rstd, uint32_t block_dim, uint32_t rows,                 \
      uint32_t h_length, uint32_t original_h_length, uint32_t tile_rows, uint32_t num_tiles) {                         \
    PRELUDE                                                                                                            \
    const jax_lngb::ascend::RmsNormForwardAttrs a{block_dim, rows, h_length, original_h_length, tile_rows, num_tiles}; \
    return jax_lngb::ascend::rms_norm_forward_ascend(LAUNCH, x, gamma, tiling, y, rstd, a);                            \
  }                                                                                                                    \
  ::xla::ffi::Error PREFIX##Backward(                                                                                  \
      __VA_ARGS__ ::xla::ffi::AnyBuffer dy, ::xla::ffi::AnyBuffer x, ::xla::ffi::Buffer<::xla::ffi::F32> rstd,         \
      ::xla::ffi::Buffer<::xla::ffi::F32> gamma, ::xla::ffi::Buffer<::xla::ffi::U32> tiling,                           \
      ::xla::ffi::Result<::xla::ffi::AnyBuffer> dx, ::xla::ffi::Result<::xla::ffi::AnyBuffer> pd_gamma,                \
      ::xla::ffi::Result<::xla::ffi::AnyBuffer> pd_beta,                                                               \
      ::xla::ffi::Result<::xla::ffi::Buffer<::xla::ffi::F32>> workspace, uint32_t block_dim,                           \
      uint32_t combine_block_dim, uint32_t combine_cols_per_core, uint32_t rows, uint32_t h_length,                    \
      uint32_t original_h_length, uint32_t tile_rows, uint32_t num_tiles, uint32_t num_groups) {                       \
    PRELUDE                                                                                                            \
    const jax_lngb::ascend::RmsNormBackwardAttrs a{block_dim, combine_block_dim, combine_cols_per_core,                \
                                                   rows,      h_length,          original_h_length,                    \
                                                   tile_rows, num_tiles,         num_groups};                          \
    return jax_lngb::ascend::rms_norm_backward_ascend(LAUNCH, dy, x, rstd, gamma, tiling, dx, pd_gamma, pd_beta,       \
                                                      workspace, a);                                                   \
  }
