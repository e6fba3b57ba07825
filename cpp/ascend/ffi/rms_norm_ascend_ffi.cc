// The NPU handlers of the RMSNorm kernels: the stream comes from XLA's FFI
// context (the Ascend plugin's aclrtStream), the launchers are the CANN
// ones. Compiled in every build with XLA's FFI headers; linked only with CANN.
#include "ascend/ffi/rms_norm_ascend_ffi.h"

namespace {

namespace ffi = xla::ffi;
using namespace jax_lngb::ascend;

ffi::Error RmsNormForwardAscendNpu(void* stream, ffi::AnyBuffer x, ffi::Buffer<ffi::F32> gamma,
                                   ffi::Buffer<ffi::U32> tiling, ffi::Result<ffi::AnyBuffer> y,
                                   ffi::Result<ffi::Buffer<ffi::F32>> rstd, uint32_t block_dim, uint32_t rows,
                                   uint32_t h_length, uint32_t original_h_length, uint32_t tile_rows,
                                   uint32_t num_tiles) {
  if (stream == nullptr) return invalid("no NPU stream in the FFI context");
  const RmsNormForwardAttrs a{block_dim, rows, h_length, original_h_length, tile_rows, num_tiles};
  return rms_norm_forward_ascend([stream](const RmsNormForwardLaunch& l,
                                          const char** message) { return launch_rms_norm_forward(l, stream, message); },
                                 x, gamma, tiling, y, rstd, a);
}

ffi::Error RmsNormBackwardAscendNpu(void* stream, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::Buffer<ffi::F32> rstd,
                                    ffi::Buffer<ffi::F32> gamma, ffi::Buffer<ffi::U32> tiling,
                                    ffi::Result<ffi::AnyBuffer> dx, ffi::Result<ffi::AnyBuffer> pd_gamma,
                                    ffi::Result<ffi::AnyBuffer> pd_beta, ffi::Result<ffi::Buffer<ffi::F32>> workspace,
                                    uint32_t block_dim, uint32_t combine_block_dim, uint32_t combine_cols_per_core,
                                    uint32_t rows, uint32_t h_length, uint32_t original_h_length, uint32_t tile_rows,
                                    uint32_t num_tiles, uint32_t num_groups) {
  if (stream == nullptr) return invalid("no NPU stream in the FFI context");
  const RmsNormBackwardAttrs a{block_dim, combine_block_dim, combine_cols_per_core,
                               rows,      h_length,          original_h_length,
                               tile_rows, num_tiles,         num_groups};
  return rms_norm_backward_ascend(
      [stream](const RmsNormBackwardLaunch& l, const char** message) {
        return launch_rms_norm_backward(l, stream, message);
      },
      dy, x, rstd, gamma, tiling, dx, pd_gamma, pd_beta, workspace, a);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbRmsNormForwardAscend, RmsNormForwardAscendNpu,
    JAX_LNGB_ASCEND_RMS_NORM_FORWARD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbRmsNormBackwardAscend, RmsNormBackwardAscendNpu,
    JAX_LNGB_ASCEND_RMS_NORM_BACKWARD_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
