// XLA FFI handler for LayerNormGradBeta on the CPU: decode and check the
// buffers, then hand a GradBetaProblem to the kernel.
//
// Shapes come from the buffers only (never from attributes), so exported
// modules with symbolic dimensions run unchanged. The batching rule adds
// leading "group" axes: inputs are [*G, *rows, H] and outputs [*G, H].
#include "ffi/ffi_common.h"
#include "ffi/registry.h"
#include "kernels/grad_beta.h"

namespace jax_lngb {
namespace {

namespace ffi = xla::ffi;
using ffi_util::dims_str;
using ffi_util::invalid;
using ffi_util::same_dims;

ffi::Error GradBetaCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer res, ffi::AnyBuffer dy,
                           ffi::Result<ffi::AnyBuffer> pd_gamma, ffi::Result<ffi::AnyBuffer> pd_beta) {
  const auto in_dims = res.dimensions();
  const auto out_dims = pd_gamma->dimensions();
  if (in_dims.size() < 1) return invalid("res_for_gamma must have rank >= 1");
  if (!same_dims(dy.dimensions(), in_dims))
    return invalid("dy shape " + dims_str(dy.dimensions()) + " != res_for_gamma shape " + dims_str(in_dims));
  if (res.element_type() != dy.element_type()) return invalid("res_for_gamma and dy dtypes differ");
  const auto in_t = ffi_util::to_dtype(res.element_type());
  if (!in_t) return invalid("unsupported input dtype (need float32, float16 or bfloat16)");
  if (pd_gamma->element_type() != pd_beta->element_type() || !same_dims(pd_beta->dimensions(), out_dims))
    return invalid("pd_gamma and pd_beta buffers differ");
  const auto out_t = ffi_util::to_dtype(pd_gamma->element_type());
  if (!out_t) return invalid("unsupported output dtype");
  if (out_dims.size() < 1 || out_dims.size() > in_dims.size())
    return invalid("output rank must be between 1 and the input rank");
  const int64_t H = in_dims.back();
  if (out_dims.back() != H)
    return invalid("output shape " + dims_str(out_dims) + " does not end in H = " + std::to_string(H));
  int64_t groups = 1;
  for (size_t i = 0; i + 1 < out_dims.size(); ++i) {
    if (out_dims[i] != in_dims[i])
      return invalid("output batch dims " + dims_str(out_dims) + " do not lead the input shape " + dims_str(in_dims));
    groups *= out_dims[i];
  }
  int64_t rows = 1;
  for (size_t i = out_dims.size() - 1; i + 1 < in_dims.size(); ++i) rows *= in_dims[i];

  GradBetaProblem p;
  p.in_dtype = *in_t;
  p.out_dtype = *out_t;
  p.res_for_gamma = res.untyped_data();
  p.dy = dy.untyped_data();
  p.pd_gamma = pd_gamma->untyped_data();
  p.pd_beta = pd_beta->untyped_data();
  p.groups = groups;
  p.rows = rows;
  p.cols = H;
  if (const char* err = grad_beta(p, ffi_util::make_executor(pool))) return invalid(err);
  return ffi::Error::Success();
}

}  // namespace
}  // namespace jax_lngb

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbGradBetaCpu, jax_lngb::GradBetaCpuImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<xla::ffi::AnyBuffer>()  // res_for_gamma
                                  .Arg<xla::ffi::AnyBuffer>()  // dy
                                  .Ret<xla::ffi::AnyBuffer>()  // pd_gamma
                                  .Ret<xla::ffi::AnyBuffer>()  // pd_beta
);

JAX_LNGB_CPU_HANDLER("jax_lngb_layer_norm_grad_beta", JaxLngbGradBetaCpu);
