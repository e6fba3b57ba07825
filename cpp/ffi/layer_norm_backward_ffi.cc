// XLA FFI handler for the fused LayerNorm backward on the CPU (LayerNormGrad
// -> LayerNormGradBeta in one pass): dx, pd_gamma and pd_beta.
//
// pd_gamma/pd_beta are [*G, H]: one result per group, as the batching rule
// of LayerNormGradBeta produces them (never summed over vmapped examples).
#include "ffi/ffi_common.h"
#include "ffi/layer_norm_layout.h"
#include "ffi/registry.h"
#include "kernels/layer_norm.h"

namespace jax_lngb {
namespace {

namespace ffi = xla::ffi;
using ffi_util::dims_str;
using ffi_util::invalid;
using ffi_util::same_dims;

ffi::Error BackwardCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer x,
                           ffi::AnyBuffer variance, ffi::AnyBuffer mean, ffi::AnyBuffer gamma,
                           float epsilon, ffi::Result<ffi::AnyBuffer> dx,
                           ffi::Result<ffi::AnyBuffer> pd_gamma,
                           ffi::Result<ffi::AnyBuffer> pd_beta) {
  const auto dims = x.dimensions();
  if (dims.size() < 1) return invalid("x must have rank >= 1");
  const auto t = ffi_util::to_dtype(x.element_type());
  if (!t) return invalid("unsupported x dtype (need float32, float16 or bfloat16)");
  if (dy.element_type() != x.element_type() || !same_dims(dy.dimensions(), dims))
    return invalid("dy must match x " + dims_str(dims));
  if (dx->element_type() != x.element_type() || !same_dims(dx->dimensions(), dims))
    return invalid("dx buffer must match x " + dims_str(dims));
  for (const auto* s : {&variance, &mean}) {
    if (s->element_type() != ffi::DataType::F32 || !ffi_util::is_row_stats(s->dimensions(), dims))
      return invalid("variance/mean must be float32 of shape x.shape[:-1]");
  }
  const auto out_dims = pd_gamma->dimensions();
  if (pd_gamma->element_type() != pd_beta->element_type() ||
      !same_dims(pd_beta->dimensions(), out_dims))
    return invalid("pd_gamma and pd_beta buffers differ");
  const auto out_t = ffi_util::to_dtype(pd_gamma->element_type());
  if (!out_t) return invalid("unsupported pd_gamma dtype");
  if (out_dims.size() < 1 || out_dims.size() > dims.size() || out_dims.back() != dims.back())
    return invalid("pd_gamma shape " + dims_str(out_dims) + " is not [*G, H] for x " +
                   dims_str(dims));
  for (size_t i = 0; i + 1 < out_dims.size(); ++i)
    if (out_dims[i] != dims[i])
      return invalid("pd_gamma group dims " + dims_str(out_dims) + " do not lead x " +
                     dims_str(dims));
  ffi_util::ParamLayout lg;
  if (auto e = ffi_util::param_layout("gamma", gamma, dims, &lg); !e.empty()) return invalid(e);
  if (lg.group_dims > 0 && !same_dims(gamma.dimensions(), out_dims))
    return invalid("gamma " + dims_str(gamma.dimensions()) + " must be [H] or pd_gamma's shape " +
                   dims_str(out_dims));
  if (!ffi_util::valid_epsilon(epsilon))
    return invalid("epsilon must be finite and >= 0; got " + std::to_string(epsilon));
  if (auto e = ffi_util::first_overlap(
          {{"dx", &*dx}, {"pd_gamma", &*pd_gamma}, {"pd_beta", &*pd_beta}},
          {{"dy", &dy}, {"x", &x}, {"variance", &variance}, {"mean", &mean}, {"gamma", &gamma}});
      !e.empty())
    return invalid(e);
  const int64_t groups = ffi_util::product(out_dims, 0, out_dims.size() - 1);
  const int64_t rows = ffi_util::product(dims, out_dims.size() - 1, dims.size() - 1);

  LayerNormBackwardProblem p;
  p.dtype = *t;
  p.out_dtype = *out_t;
  p.dy = dy.untyped_data();
  p.x = x.untyped_data();
  p.variance = static_cast<const float*>(variance.untyped_data());
  p.mean = static_cast<const float*>(mean.untyped_data());
  p.gamma = static_cast<const float*>(gamma.untyped_data());
  p.gamma_stride = lg.stride;
  p.dx = dx->untyped_data();
  p.pd_gamma = pd_gamma->untyped_data();
  p.pd_beta = pd_beta->untyped_data();
  p.groups = groups;
  p.rows = rows;
  p.cols = dims.back();
  p.epsilon = epsilon;
  if (const char* err = layer_norm_backward(p, ffi_util::make_executor(pool)))
    return invalid(err);
  return ffi::Error::Success();
}

}  // namespace
}  // namespace jax_lngb

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormBackwardCpu, jax_lngb::BackwardCpuImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<xla::ffi::AnyBuffer>()  // dy
                                  .Arg<xla::ffi::AnyBuffer>()  // x
                                  .Arg<xla::ffi::AnyBuffer>()  // variance (float32)
                                  .Arg<xla::ffi::AnyBuffer>()  // mean (float32)
                                  .Arg<xla::ffi::AnyBuffer>()  // gamma (float32)
                                  .Attr<float>("epsilon")
                                  .Ret<xla::ffi::AnyBuffer>()  // dx
                                  .Ret<xla::ffi::AnyBuffer>()  // pd_gamma
                                  .Ret<xla::ffi::AnyBuffer>()  // pd_beta
);

JAX_LNGB_CPU_HANDLER("jax_lngb_layer_norm_backward", JaxLngbLayerNormBackwardCpu);
