// The XLA FFI handlers of the Ascend LayerNorm targets: decode and check
// what jax_lngb/ascend/lowering.py emits, then hand a launch struct to a
// launcher. Written once, bound twice: with the NPU stream and the CANN
// launcher (layer_norm_ascend_ffi.cc), and on the CPU with the emulated
// launcher (emu/emu_layer_norm_ffi.cc), which is how the contract is tested.
//
// jax_lngb_ascend_layer_norm_forward
//   operands: x [..., h_length] (float32 or float16, H zero padded),
//             gamma f32[h_length], beta f32[h_length],
//             tiling u32[68] (LayerNormForwardKernelTiling)
//   results:  y [..., h_length] (x's type), mean f32[num_tiles * stat_stride],
//             variance f32[num_tiles * stat_stride]
//   attributes (u32): block_dim, rows, h_length, original_h_length, tile_rows,
//             num_tiles, stat_stride
// jax_lngb_ascend_layer_norm_grad
//   operands: dy, x [..., h_length]; mean, variance f32[num_tiles * stat_stride];
//             gamma f32[h_length]; tiling u32[124] (LayerNormBackwardKernelTiling)
//   results:  pd_x, res_for_gamma [..., h_length] (x's type)
//   attributes: as the forward's
// jax_lngb_ascend_layer_norm_backward
//   operands: as layer_norm_grad's
//   results:  dx [..., h_length] (x's type), pd_gamma, pd_beta [h_length]
//             (float32 or float16), workspace f32[num_groups * 2 * h_length]
//   attributes: as the forward's, and combine_block_dim, combine_cols_per_core,
//             num_groups
#pragma once

#include <cstdint>
#include <string>

#include "ascend/ffi/ascend_ffi_common.h"
#include "ascend/launch/layer_norm_launch.h"
#include "tiling/layer_norm_kernel_tiling.h"
#include "xla/ffi/api/ffi.h"

namespace jax_lngb::ascend {

struct LayerNormAttrs {
  uint32_t block_dim, rows, h_length, original_h_length, tile_rows, num_tiles, stat_stride;
  uint32_t combine_block_dim = 0, combine_cols_per_core = 0, num_groups = 0;
};

// The checks every LayerNorm target shares: x-like operands and the
// per-tile statistics layout.
inline ffi::Error check_layer_norm_common(const LayerNormAttrs& a, ffi::AnyBuffer x, ElemType* type,
                                          size_t tiling_words, size_t expected_words) {
  JAX_LNGB_ASCEND_CHECK(check_row_operand("x", x, type, a.rows, a.h_length));
  if (!whole_32_byte_rows(a.h_length, *type)) return invalid("h_length must make 32-byte rows");
  JAX_LNGB_ASCEND_CHECK(check_tiling_words(tiling_words, expected_words));
  if (a.rows < 1 || a.tile_rows < 1 || a.tile_rows > a.rows || a.original_h_length < 1 ||
      a.original_h_length > a.h_length || a.num_tiles != (a.rows + a.tile_rows - 1) / a.tile_rows ||
      a.stat_stride != (a.tile_rows + 7) / 8 * 8 || a.block_dim < 1 || a.block_dim > a.num_tiles)
    return invalid("inconsistent launch attributes");
  return ffi::Error::Success();
}

inline bool is_f32_vector(ffi::AnyBuffer b, uint64_t n) {
  return b.element_type() == ffi::DataType::F32 && b.element_count() == n;
}

template <class Launcher>
ffi::Error layer_norm_forward_ascend(Launcher&& launcher, ffi::AnyBuffer x, ffi::AnyBuffer gamma, ffi::AnyBuffer beta,
                                     ffi::Buffer<ffi::U32> tiling, ffi::Result<ffi::AnyBuffer> y,
                                     ffi::Result<ffi::AnyBuffer> mean, ffi::Result<ffi::AnyBuffer> variance,
                                     const LayerNormAttrs& a) {
  LayerNormForwardLaunch l;
  JAX_LNGB_ASCEND_CHECK(
      check_layer_norm_common(a, x, &l.type, tiling.element_count(), jax_lngb_ascend::kLayerNormForwardTilingWords));
  const uint64_t stats = uint64_t(a.num_tiles) * a.stat_stride;
  if (!is_f32_vector(gamma, a.h_length) || !is_f32_vector(beta, a.h_length))
    return invalid("gamma and beta must be float32 [h_length]");
  if (!like(y->element_type(), y->element_count(), x)) return invalid("y must be like x");
  if (!is_f32_vector(*mean, stats) || !is_f32_vector(*variance, stats))
    return invalid("mean and variance must be float32 [num_tiles * stat_stride] = " + std::to_string(stats));
  l.x = x.untyped_data();
  l.gamma = gamma.untyped_data();
  l.beta = beta.untyped_data();
  l.tiling = tiling.typed_data();
  l.y = y->untyped_data();
  l.mean = mean->untyped_data();
  l.variance = variance->untyped_data();
  l.rows = a.rows;
  l.h_length = a.h_length;
  l.stat_elems = stats;
  l.tiling_words = tiling.element_count();
  l.block_dim = a.block_dim;
  return run_launcher(launcher, l);
}

// Shared by layer_norm_grad (res_for_gamma out) and the fused backward
// (pd_gamma, pd_beta and the workspace out).
template <class Launcher>
ffi::Error layer_norm_backward_ascend(Launcher&& launcher, bool fused, ffi::AnyBuffer dy, ffi::AnyBuffer x,
                                      ffi::AnyBuffer mean, ffi::AnyBuffer variance, ffi::AnyBuffer gamma,
                                      ffi::Buffer<ffi::U32> tiling, void* pd_x, ffi::DataType pd_x_type,
                                      size_t pd_x_count, void* res_for_gamma, ffi::DataType res_type, size_t res_count,
                                      void* pd_gamma, void* pd_beta, ffi::DataType param_type, size_t gamma_count,
                                      size_t beta_count, void* workspace, size_t workspace_count,
                                      const LayerNormAttrs& a) {
  LayerNormBackwardLaunch l;
  l.fused = fused;
  JAX_LNGB_ASCEND_CHECK(check_layer_norm_common(a, x, &l.in_type, tiling.element_count(),
                                                jax_lngb_ascend::kLayerNormBackwardTilingWords));
  if (!like(dy.element_type(), dy.element_count(), x)) return invalid("dy must be like x");
  const uint64_t stats = uint64_t(a.num_tiles) * a.stat_stride;
  if (!is_f32_vector(mean, stats) || !is_f32_vector(variance, stats))
    return invalid("mean and variance must be float32 [num_tiles * stat_stride] = " + std::to_string(stats));
  if (!is_f32_vector(gamma, a.h_length)) return invalid("gamma must be float32 [h_length]");
  if (!like(pd_x_type, pd_x_count, x)) return invalid("pd_x must be like x");
  if (fused) {
    if (!elem_type(param_type, &l.out_type) || gamma_count != a.h_length || beta_count != a.h_length)
      return invalid("pd_gamma and pd_beta must be float32 or float16 [h_length]");
    if (!whole_32_byte_rows(a.h_length, l.out_type)) return invalid("h_length must make 32-byte rows");
    uint64_t ws = 0;
    JAX_LNGB_ASCEND_CHECK(check_workspace(workspace_count, a.num_groups, a.h_length, &ws));
    if (a.num_groups < 1 || a.num_groups > a.num_tiles || a.block_dim > a.num_groups)
      return invalid("inconsistent launch attributes");
    JAX_LNGB_ASCEND_CHECK(check_combine_cover(a.combine_block_dim, a.combine_cols_per_core, a.h_length));
    l.workspace = workspace;
    l.workspace_bytes = ws * sizeof(float);
    l.pd_gamma = pd_gamma;
    l.pd_beta = pd_beta;
    l.combine_block_dim = a.combine_block_dim;
  } else {
    if (!like(res_type, res_count, x)) return invalid("res_for_gamma must be like x");
    l.res_for_gamma = res_for_gamma;
    l.out_type = l.in_type;
  }
  l.dy = dy.untyped_data();
  l.x = x.untyped_data();
  l.mean = mean.untyped_data();
  l.variance = variance.untyped_data();
  l.gamma = gamma.untyped_data();
  l.tiling = tiling.typed_data();
  l.pd_x = pd_x;
  l.rows = a.rows;
  l.h_length = a.h_length;
  l.stat_elems = stats;
  l.tiling_words = tiling.element_count();
  l.block_dim = a.block_dim;
  return run_launcher(launcher, l);
}

}  // namespace jax_lngb::ascend

#define JAX_LNGB_ASCEND_LN_TILE_ATTRS(bind) \
  bind.Attr<uint32_t>("block_dim")          \
      .Attr<uint32_t>("rows")               \
      .Attr<uint32_t>("h_length")           \
      .Attr<uint32_t>("original_h_length")  \
      .Attr<uint32_t>("tile_rows")          \
      .Attr<uint32_t>("num_tiles")          \
      .Attr<uint32_t>("stat_stride")

// The bindings shared by both handlers of each target, after the context arguments.
#define JAX_LNGB_ASCEND_LN_FORWARD_BINDING(bind)                            \
  JAX_LNGB_ASCEND_LN_TILE_ATTRS(bind.Arg<xla::ffi::AnyBuffer>()             \
                                    .Arg<xla::ffi::AnyBuffer>()             \
                                    .Arg<xla::ffi::AnyBuffer>()             \
                                    .Arg<xla::ffi::Buffer<xla::ffi::U32>>() \
                                    .Ret<xla::ffi::AnyBuffer>()             \
                                    .Ret<xla::ffi::AnyBuffer>()             \
                                    .Ret<xla::ffi::AnyBuffer>())

// The operands of both backward targets: dy, x, mean, variance, gamma, tiling.
#define JAX_LNGB_ASCEND_LN_BACKWARD_OPERANDS(bind) \
  bind.Arg<xla::ffi::AnyBuffer>()                  \
      .Arg<xla::ffi::AnyBuffer>()                  \
      .Arg<xla::ffi::AnyBuffer>()                  \
      .Arg<xla::ffi::AnyBuffer>()                  \
      .Arg<xla::ffi::AnyBuffer>()                  \
      .Arg<xla::ffi::Buffer<xla::ffi::U32>>()

#define JAX_LNGB_ASCEND_LN_GRAD_BINDING(bind) \
  JAX_LNGB_ASCEND_LN_TILE_ATTRS(              \
      JAX_LNGB_ASCEND_LN_BACKWARD_OPERANDS(bind).Ret<xla::ffi::AnyBuffer>().Ret<xla::ffi::AnyBuffer>())

#define JAX_LNGB_ASCEND_LN_BACKWARD_BINDING(bind)                            \
  JAX_LNGB_ASCEND_LN_TILE_ATTRS(JAX_LNGB_ASCEND_LN_BACKWARD_OPERANDS(bind)   \
                                    .Ret<xla::ffi::AnyBuffer>()              \
                                    .Ret<xla::ffi::AnyBuffer>()              \
                                    .Ret<xla::ffi::AnyBuffer>()              \
                                    .Ret<xla::ffi::Buffer<xla::ffi::F32>>()) \
      .Attr<uint32_t>("combine_block_dim")                                   \
      .Attr<uint32_t>("combine_cols_per_core")                               \
      .Attr<uint32_t>("num_groups")

// Handler bodies: `LAUNCH` is an expression callable as int(const Launch&, const char**);
// `PRELUDE` is a statement each handler runs first (the NPU's stream check).
#define JAX_LNGB_ASCEND_LN_HANDLERS(PREFIX, FWD_LAUNCH, BWD_LAUNCH, PRELUDE, ...)                                 \
  ffi::Error PREFIX##Forward(__VA_ARGS__ ffi::AnyBuffer x, ffi::AnyBuffer gamma, ffi::AnyBuffer beta,             \
                             ffi::Buffer<ffi::U32> tiling, ffi::Result<ffi::AnyBuffer> y,                         \
                             ffi::Result<ffi::AnyBuffer> mean, ffi::Result<ffi::AnyBuffer> variance,              \
                             uint32_t block_dim, uint32_t rows, uint32_t h_length, uint32_t original_h_length,    \
                             uint32_t tile_rows, uint32_t num_tiles, uint32_t stat_stride) {                      \
    PRELUDE                                                                                                       \
    const jax_lngb::ascend::LayerNormAttrs a{block_dim, rows,      h_length,   original_h_length,                 \
                                             tile_rows, num_tiles, stat_stride};                                  \
    return jax_lngb::ascend::layer_norm_forward_ascend(FWD_LAUNCH, x, gamma, beta, tiling, y, mean, variance, a); \
  }                                                                                                               \
  ffi::Error PREFIX##Grad(__VA_ARGS__ ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer mean,                   \
                          ffi::AnyBuffer variance, ffi::AnyBuffer gamma, ffi::Buffer<ffi::U32> tiling,            \
                          ffi::Result<ffi::AnyBuffer> pd_x, ffi::Result<ffi::AnyBuffer> res, uint32_t block_dim,  \
                          uint32_t rows, uint32_t h_length, uint32_t original_h_length, uint32_t tile_rows,       \
                          uint32_t num_tiles, uint32_t stat_stride) {                                             \
    PRELUDE                                                                                                       \
    const jax_lngb::ascend::LayerNormAttrs a{block_dim, rows,      h_length,   original_h_length,                 \
                                             tile_rows, num_tiles, stat_stride};                                  \
    return jax_lngb::ascend::layer_norm_backward_ascend(                                                          \
        BWD_LAUNCH, false, dy, x, mean, variance, gamma, tiling, pd_x->untyped_data(), pd_x->element_type(),      \
        pd_x->element_count(), res->untyped_data(), res->element_type(), res->element_count(), nullptr, nullptr,  \
        ffi::DataType::F32, 0, 0, nullptr, 0, a);                                                                 \
  }                                                                                                               \
  ffi::Error PREFIX##Backward(__VA_ARGS__ ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer mean,               \
                              ffi::AnyBuffer variance, ffi::AnyBuffer gamma, ffi::Buffer<ffi::U32> tiling,        \
                              ffi::Result<ffi::AnyBuffer> dx, ffi::Result<ffi::AnyBuffer> pd_gamma,               \
                              ffi::Result<ffi::AnyBuffer> pd_beta, ffi::Result<ffi::Buffer<ffi::F32>> workspace,  \
                              uint32_t block_dim, uint32_t rows, uint32_t h_length, uint32_t original_h_length,   \
                              uint32_t tile_rows, uint32_t num_tiles, uint32_t stat_stride,                       \
                              uint32_t combine_block_dim, uint32_t combine_cols_per_core, uint32_t num_groups) {  \
    PRELUDE                                                                                                       \
    const jax_lngb::ascend::LayerNormAttrs a{                                                                     \
        block_dim, rows,        h_length,          original_h_length,     tile_rows,                              \
        num_tiles, stat_stride, combine_block_dim, combine_cols_per_core, num_groups};                            \
    if (pd_beta->element_type() != pd_gamma->element_type())                                                      \
      return jax_lngb::ascend::invalid("pd_gamma and pd_beta must have one type");                                \
    return jax_lngb::ascend::layer_norm_backward_ascend(                                                          \
        BWD_LAUNCH, true, dy, x, mean, variance, gamma, tiling, dx->untyped_data(), dx->element_type(),           \
        dx->element_count(), nullptr, ffi::DataType::F32, 0, pd_gamma->untyped_data(), pd_beta->untyped_data(),   \
        pd_gamma->element_type(), pd_gamma->element_count(), pd_beta->element_count(), workspace->typed_data(),   \
        workspace->element_count(), a);                                                                           \
  }
