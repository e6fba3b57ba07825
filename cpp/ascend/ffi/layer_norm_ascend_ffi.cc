// The NPU handlers of the LayerNorm targets: the stream comes from XLA's FFI
// context (the Ascend plugin's aclrtStream), the launchers are the CANN ones.
// Compiled in every build (only the XLA FFI headers are needed); linked into
// `jax_lngb._ascend` only with CANN.
#include "ascend/ffi/layer_norm_ascend_ffi.h"

namespace {

namespace ffi = xla::ffi;

struct NpuForward {
  void* stream;
  int operator()(const jax_lngb::ascend::LayerNormForwardLaunch& l, const char** message) const {
    return jax_lngb::ascend::launch_layer_norm_forward(l, stream, message);
  }
};

struct NpuBackward {
  void* stream;
  int operator()(const jax_lngb::ascend::LayerNormBackwardLaunch& l, const char** message) const {
    return jax_lngb::ascend::launch_layer_norm_backward(l, stream, message);
  }
};

JAX_LNGB_ASCEND_LN_HANDLERS(LayerNormNpu, NpuForward{stream}, NpuBackward{stream}, void* stream, )

ffi::Error CheckedForward(void* stream, ffi::AnyBuffer x, ffi::AnyBuffer gamma, ffi::AnyBuffer beta,
                          ffi::Buffer<ffi::U32> tiling, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> mean,
                          ffi::Result<ffi::AnyBuffer> variance, uint32_t block_dim, uint32_t rows, uint32_t h_length,
                          uint32_t original_h_length, uint32_t tile_rows, uint32_t num_tiles, uint32_t stat_stride) {
  if (stream == nullptr) return jax_lngb::ascend::invalid("no NPU stream in the FFI context");
  return LayerNormNpuForward(stream, x, gamma, beta, tiling, y, mean, variance, block_dim, rows, h_length,
                             original_h_length, tile_rows, num_tiles, stat_stride);
}

ffi::Error CheckedGrad(void* stream, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer mean, ffi::AnyBuffer variance,
                       ffi::AnyBuffer gamma, ffi::Buffer<ffi::U32> tiling, ffi::Result<ffi::AnyBuffer> pd_x,
                       ffi::Result<ffi::AnyBuffer> res, uint32_t block_dim, uint32_t rows, uint32_t h_length,
                       uint32_t original_h_length, uint32_t tile_rows, uint32_t num_tiles, uint32_t stat_stride) {
  if (stream == nullptr) return jax_lngb::ascend::invalid("no NPU stream in the FFI context");
  return LayerNormNpuGrad(stream, dy, x, mean, variance, gamma, tiling, pd_x, res, block_dim, rows, h_length,
                          original_h_length, tile_rows, num_tiles, stat_stride);
}

ffi::Error CheckedBackward(void* stream, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer mean,
                           ffi::AnyBuffer variance, ffi::AnyBuffer gamma, ffi::Buffer<ffi::U32> tiling,
                           ffi::Result<ffi::AnyBuffer> dx, ffi::Result<ffi::AnyBuffer> pd_gamma,
                           ffi::Result<ffi::AnyBuffer> pd_beta, ffi::Result<ffi::Buffer<ffi::F32>> workspace,
                           uint32_t block_dim, uint32_t rows, uint32_t h_length, uint32_t original_h_length,
                           uint32_t tile_rows, uint32_t num_tiles, uint32_t stat_stride, uint32_t combine_block_dim,
                           uint32_t combine_cols_per_core, uint32_t num_groups) {
  if (stream == nullptr) return jax_lngb::ascend::invalid("no NPU stream in the FFI context");
  return LayerNormNpuBackward(stream, dy, x, mean, variance, gamma, tiling, dx, pd_gamma, pd_beta, workspace, block_dim,
                              rows, h_length, original_h_length, tile_rows, num_tiles, stat_stride, combine_block_dim,
                              combine_cols_per_core, num_groups);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbLayerNormForwardAscend, CheckedForward,
    JAX_LNGB_ASCEND_LN_FORWARD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbLayerNormGradAscend, CheckedGrad,
    JAX_LNGB_ASCEND_LN_GRAD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbLayerNormBackwardAscend, CheckedBackward,
    JAX_LNGB_ASCEND_LN_BACKWARD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
