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

#include "ascend/ffi/grad_beta_ascend_ffi.h"  // invalid, elem_type
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
  if (!elem_type(x.element_type(), type)) return invalid(std::string(what) + " must be float32 or float16");
  const auto dims = x.dimensions();
  if (dims.size() < 1 || dims.back() != int64_t(h))
    return invalid(std::string(what) + "'s last dimension must be h_length = " + std::to_string(h));
  if (x.element_count() != size_t(rows) * h)
    return invalid(std::string(what) + " must hold rows * h_length = " + std::to_string(uint64_t(rows) * h) +
                   " elements");
  if (uint64_t(h) * elem_size(*type) % 32 != 0) return invalid("h_length must make 32-byte rows (pad H with zeros)");
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
  if (ffi::Error e = check_rms_rows("x", x, &l.type, a.rows, a.h_length, a.original_h_length, a.tile_rows, a.num_tiles);
      e.failure())
    return e;
  if (y->element_type() != x.element_type() || y->element_count() != x.element_count())
    return invalid("y must have x's type and size");
  if (gamma.element_count() != a.h_length) return invalid("gamma must have h_length float32 elements");
  if (tiling.element_count() != jax_lngb_ascend::kRmsNormForwardTilingWords)
    return invalid("the tiling operand must have " + std::to_string(jax_lngb_ascend::kRmsNormForwardTilingWords) +
                   " uint32 words");
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
  const char* message = "";
  if (const int rc = launcher(l, &message))
    return ffi::Error(ffi::ErrorCode::kInternal,
                      std::string("jax_lngb ascend: ") + message + " (code " + std::to_string(rc) + ")");
  return ffi::Error::Success();
}

template <class Launcher>
ffi::Error rms_norm_backward_ascend(Launcher&& launcher, ffi::AnyBuffer dy, ffi::AnyBuffer x,
                                    ffi::Buffer<ffi::F32> rstd, ffi::Buffer<ffi::F32> gamma,
                                    ffi::Buffer<ffi::U32> tiling, ffi::Result<ffi::AnyBuffer> dx,
                                    ffi::Result<ffi::AnyBuffer> pd_gamma, ffi::Result<ffi::AnyBuffer> pd_beta,
                                    ffi::Result<ffi::Buffer<ffi::F32>> workspace, const RmsNormBackwardAttrs& a) {
  RmsNormBackwardLaunch l;
  if (ffi::Error e = check_rms_rows("x", x, &l.type, a.rows, a.h_length, a.original_h_length, a.tile_rows, a.num_tiles);
      e.failure())
    return e;
  if (dy.element_type() != x.element_type() || dy.element_count() != x.element_count())
    return invalid("dy must have x's type and size");
  if (dx->element_type() != x.element_type() || dx->element_count() != x.element_count())
    return invalid("dx must have x's type and size");
  if (!elem_type(pd_gamma->element_type(), &l.out_type) || pd_beta->element_type() != pd_gamma->element_type())
    return invalid("pd_gamma and pd_beta must both be float32 or both float16");
  if (pd_gamma->element_count() != a.h_length || pd_beta->element_count() != a.h_length)
    return invalid("pd_gamma and pd_beta must have h_length elements");
  if (uint64_t(a.h_length) * elem_size(l.out_type) % 32 != 0)
    return invalid("h_length must make 32-byte rows of pd_gamma (pad H with zeros)");
  if (gamma.element_count() != a.h_length) return invalid("gamma must have h_length float32 elements");
  if (tiling.element_count() != jax_lngb_ascend::kRmsNormBackwardTilingWords)
    return invalid("the tiling operand must have " + std::to_string(jax_lngb_ascend::kRmsNormBackwardTilingWords) +
                   " uint32 words");
  const uint64_t rstd_elems = rms_rstd_elems(a.num_tiles, a.tile_rows);
  if (rstd.element_count() != rstd_elems)
    return invalid("rstd must have num_tiles * rstd_stride = " + std::to_string(rstd_elems) + " floats");
  const uint64_t ws_elems = uint64_t(a.num_groups) * 2 * a.h_length;
  if (workspace->element_count() != ws_elems)
    return invalid("workspace must have num_groups * 2 * h_length = " + std::to_string(ws_elems) + " floats");
  if (a.num_groups < 1 || a.num_groups > a.num_tiles || a.block_dim < 1 || a.block_dim > a.num_groups)
    return invalid("inconsistent launch attributes (num_groups, block_dim)");
  if (a.combine_block_dim < 1 || uint64_t(a.combine_block_dim) * a.combine_cols_per_core < a.h_length)
    return invalid("combine_block_dim * combine_cols_per_core must cover h_length = " + std::to_string(a.h_length));
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
  const char* message = "";
  if (const int rc = launcher(l, &message))
    return ffi::Error(ffi::ErrorCode::kInternal,
                      std::string("jax_lngb ascend: ") + message + " (code " + std::to_string(rc) + ")");
  return ffi::Error::Success();
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
