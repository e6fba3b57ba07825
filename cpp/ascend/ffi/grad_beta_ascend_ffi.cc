// The NPU handler: the stream comes from XLA's FFI context (the Ascend
// plugin's aclrtStream), the launcher is the CANN one. Built only with CANN.
#include "ascend/ffi/grad_beta_ascend_ffi.h"

namespace {

namespace ffi = xla::ffi;
using jax_lngb::ascend::GradBetaAttrs;

ffi::Error GradBetaAscendNpu(void* stream, ffi::AnyBuffer res, ffi::AnyBuffer dy, ffi::Buffer<ffi::U32> tiling,
                             ffi::Result<ffi::AnyBuffer> pd_gamma, ffi::Result<ffi::AnyBuffer> pd_beta,
                             ffi::Result<ffi::Buffer<ffi::F32>> workspace, uint32_t block_dim,
                             uint32_t combine_block_dim, uint32_t combine_cols_per_core, uint32_t rows,
                             uint32_t h_length, uint32_t original_h_length, uint32_t tile_rows, uint32_t num_groups,
                             uint32_t stack_buffer_bytes, uint32_t one_cal_size) {
  if (stream == nullptr) return jax_lngb::ascend::invalid("no NPU stream in the FFI context");
  const GradBetaAttrs a{block_dim, combine_block_dim, combine_cols_per_core, rows,        h_length, original_h_length,
                        tile_rows, num_groups,        stack_buffer_bytes,    one_cal_size};
  return jax_lngb::ascend::grad_beta_ascend(
      [stream](const jax_lngb::ascend::GradBetaLaunch& l, const char** message) {
        return jax_lngb::ascend::launch_grad_beta(l, stream, message);
      },
      res, dy, tiling, pd_gamma, pd_beta, workspace, a);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxLngbGradBetaAscend, GradBetaAscendNpu,
    JAX_LNGB_ASCEND_GRAD_BETA_BINDING(xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()));
