// XLA FFI handler for CANN LayerNormGrad on the CPU: pd_x and res_for_gamma
// in the input dtype.
#include "ffi/ffi_common.h"
#include "ffi/norm_layout.h"
#include "ffi/registry.h"
#include "kernels/layer_norm.h"

namespace jax_lngb {
namespace {

namespace ffi = xla::ffi;
using ffi_util::dims_str;
using ffi_util::invalid;

ffi::Error GradCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer variance,
                       ffi::AnyBuffer mean, ffi::AnyBuffer gamma, float epsilon, ffi::Result<ffi::AnyBuffer> pd_x,
                       ffi::Result<ffi::AnyBuffer> res) {
  const auto dims = x.dimensions();
  DType t;
  if (auto e = ffi_util::row_operand(x, &t); !e.empty()) return invalid(e);
  if (!ffi_util::like_rows(dy, x)) return invalid("dy must match x " + dims_str(dims));
  for (const auto* s : {&variance, &mean}) {
    if (!ffi_util::like_row_stats(*s, x)) return invalid("variance/mean must be float32 of shape x.shape[:-1]");
  }
  for (auto* o : {&pd_x, &res}) {
    if (!ffi_util::like_rows(**o, x)) return invalid("pd_x/res_for_gamma buffers must match x " + dims_str(dims));
  }
  ffi_util::ParamLayout lg;
  if (auto e = ffi_util::param_layout("gamma", gamma, dims, &lg); !e.empty()) return invalid(e);
  if (auto e = ffi_util::epsilon_error(epsilon); !e.empty()) return invalid(e);
  if (auto e = ffi_util::first_overlap(
          {{"pd_x", &*pd_x}, {"res_for_gamma", &*res}},
          {{"dy", &dy}, {"x", &x}, {"variance", &variance}, {"mean", &mean}, {"gamma", &gamma}});
      !e.empty())
    return invalid(e);
  const int64_t n = ffi_util::product(dims, 0, dims.size() - 1);

  LayerNormGradProblem p;
  p.dtype = t;
  p.dy = dy.untyped_data();
  p.x = x.untyped_data();
  p.variance = static_cast<const float*>(variance.untyped_data());
  p.mean = static_cast<const float*>(mean.untyped_data());
  p.gamma = static_cast<const float*>(gamma.untyped_data());
  p.gamma_stride = lg.stride;
  p.pd_x = pd_x->untyped_data();
  p.res_for_gamma = res->untyped_data();
  p.groups = lg.groups;
  p.rows = lg.groups > 0 ? n / lg.groups : 0;
  p.cols = dims.back();
  p.epsilon = epsilon;
  if (const char* err = layer_norm_grad(p, ffi_util::make_executor(pool))) return invalid(err);
  return ffi::Error::Success();
}

}  // namespace
}  // namespace jax_lngb

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormGradCpu, jax_lngb::GradCpuImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<xla::ffi::AnyBuffer>()  // dy
                                  .Arg<xla::ffi::AnyBuffer>()  // x
                                  .Arg<xla::ffi::AnyBuffer>()  // variance (float32)
                                  .Arg<xla::ffi::AnyBuffer>()  // mean (float32)
                                  .Arg<xla::ffi::AnyBuffer>()  // gamma (float32)
                                  .Attr<float>("epsilon")
                                  .Ret<xla::ffi::AnyBuffer>()  // pd_x
                                  .Ret<xla::ffi::AnyBuffer>()  // res_for_gamma
);

JAX_LNGB_CPU_HANDLER("jax_lngb_layer_norm_grad", JaxLngbLayerNormGradCpu);
