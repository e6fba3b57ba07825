// XLA FFI handler for the fused LayerNorm backward on the CPU (LayerNormGrad
// -> LayerNormGradBeta in one pass): dx, pd_gamma and pd_beta.
//
// pd_gamma/pd_beta are [*G, H]: one result per group, as the batching rule
// of LayerNormGradBeta produces them (never summed over vmapped examples).
// A second target serves a LayerNorm without beta: dx and pd_gamma only,
// and the kernel forms no sum of dy.
#include "ffi/ffi_common.h"
#include "ffi/norm_layout.h"
#include "ffi/registry.h"
#include "kernels/layer_norm.h"

namespace jax_lngb {
namespace {

namespace ffi = xla::ffi;
using ffi_util::dims_str;
using ffi_util::invalid;
using ffi_util::same_dims;

// pd_beta == nullptr: no beta.
ffi::Error Backward(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer variance,
                    ffi::AnyBuffer mean, ffi::AnyBuffer gamma, float epsilon, ffi::Result<ffi::AnyBuffer> dx,
                    ffi::Result<ffi::AnyBuffer> pd_gamma, ffi::AnyBuffer* pd_beta) {
  const auto dims = x.dimensions();
  DType t;
  if (auto e = ffi_util::row_operand(x, &t); !e.empty()) return invalid(e);
  if (!ffi_util::like_rows(dy, x)) return invalid("dy must match x " + dims_str(dims));
  if (!ffi_util::like_rows(*dx, x)) return invalid("dx buffer must match x " + dims_str(dims));
  for (const auto* s : {&variance, &mean}) {
    if (!ffi_util::like_row_stats(*s, x)) return invalid("variance/mean must be float32 of shape x.shape[:-1]");
  }
  const auto out_dims = pd_gamma->dimensions();
  if (pd_beta != nullptr &&
      (pd_gamma->element_type() != pd_beta->element_type() || !same_dims(pd_beta->dimensions(), out_dims)))
    return invalid("pd_gamma and pd_beta buffers differ");
  DType out_t;
  if (auto e = ffi_util::reduced_out_layout(*pd_gamma, dims, &out_t); !e.empty()) return invalid(e);
  ffi_util::ParamLayout lg;
  if (auto e = ffi_util::param_layout("gamma", gamma, dims, &lg); !e.empty()) return invalid(e);
  if (auto e = ffi_util::gamma_matches_out(gamma, lg, out_dims); !e.empty()) return invalid(e);
  if (auto e = ffi_util::epsilon_error(epsilon); !e.empty()) return invalid(e);
  if (pd_beta != nullptr) {
    if (auto e = ffi_util::first_overlap(
            {{"dx", &*dx}, {"pd_gamma", &*pd_gamma}, {"pd_beta", pd_beta}},
            {{"dy", &dy}, {"x", &x}, {"variance", &variance}, {"mean", &mean}, {"gamma", &gamma}});
        !e.empty())
      return invalid(e);
  } else if (auto e = ffi_util::first_overlap(
                 {{"dx", &*dx}, {"pd_gamma", &*pd_gamma}},
                 {{"dy", &dy}, {"x", &x}, {"variance", &variance}, {"mean", &mean}, {"gamma", &gamma}});
             !e.empty()) {
    return invalid(e);
  }
  const int64_t groups = ffi_util::product(out_dims, 0, out_dims.size() - 1);
  const int64_t rows = ffi_util::product(dims, out_dims.size() - 1, dims.size() - 1);

  LayerNormBackwardProblem p;
  p.dtype = t;
  p.out_dtype = out_t;
  p.dy = dy.untyped_data();
  p.x = x.untyped_data();
  p.variance = static_cast<const float*>(variance.untyped_data());
  p.mean = static_cast<const float*>(mean.untyped_data());
  p.gamma = static_cast<const float*>(gamma.untyped_data());
  p.gamma_stride = lg.stride;
  p.dx = dx->untyped_data();
  p.pd_gamma = pd_gamma->untyped_data();
  p.pd_beta = pd_beta != nullptr ? pd_beta->untyped_data() : nullptr;
  p.groups = groups;
  p.rows = rows;
  p.cols = dims.back();
  p.epsilon = epsilon;
  if (const char* err = layer_norm_backward(p, ffi_util::make_executor(pool))) return invalid(err);
  return ffi::Error::Success();
}

ffi::Error BackwardCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer variance,
                           ffi::AnyBuffer mean, ffi::AnyBuffer gamma, float epsilon, ffi::Result<ffi::AnyBuffer> dx,
                           ffi::Result<ffi::AnyBuffer> pd_gamma, ffi::Result<ffi::AnyBuffer> pd_beta) {
  return Backward(pool, dy, x, variance, mean, gamma, epsilon, dx, pd_gamma, &*pd_beta);
}

ffi::Error BackwardNoBetaCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer variance,
                                 ffi::AnyBuffer mean, ffi::AnyBuffer gamma, float epsilon,
                                 ffi::Result<ffi::AnyBuffer> dx, ffi::Result<ffi::AnyBuffer> pd_gamma) {
  return Backward(pool, dy, x, variance, mean, gamma, epsilon, dx, pd_gamma, nullptr);
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

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormBackwardNoBetaCpu, jax_lngb::BackwardNoBetaCpuImpl,
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
);

JAX_LNGB_CPU_HANDLER("jax_lngb_layer_norm_backward_no_beta", JaxLngbLayerNormBackwardNoBetaCpu);
