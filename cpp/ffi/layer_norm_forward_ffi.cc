// XLA FFI handlers for the LayerNorm forward on the CPU: y, and the float32
// mean and variance of each row that the backward reuses. Two targets: with
// beta, and without one (layer_norm(..., beta=None)), whose kernel reads no
// bias at all.
#include "ffi/ffi_common.h"
#include "ffi/norm_layout.h"
#include "ffi/registry.h"
#include "kernels/layer_norm.h"

namespace jax_lngb {
namespace {

namespace ffi = xla::ffi;
using ffi_util::dims_str;
using ffi_util::invalid;

// beta == nullptr: no beta operand.
ffi::Error Forward(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer gamma, const ffi::AnyBuffer* beta,
                   float epsilon, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> mean,
                   ffi::Result<ffi::AnyBuffer> variance) {
  const auto dims = x.dimensions();
  DType t;
  if (auto e = ffi_util::row_operand(x, &t); !e.empty()) return invalid(e);
  if (!ffi_util::like_rows(*y, x)) return invalid("y buffer must match x " + dims_str(dims));
  for (auto* s : {&mean, &variance}) {
    if (!ffi_util::like_row_stats(**s, x))
      return invalid("mean/variance buffers must be float32 of shape x.shape[:-1]");
  }
  ffi_util::ParamLayout lg, lb;
  if (auto e = ffi_util::param_layout("gamma", gamma, dims, &lg); !e.empty()) return invalid(e);
  if (beta != nullptr) {
    if (auto e = ffi_util::param_layout("beta", *beta, dims, &lb); !e.empty()) return invalid(e);
    if (lg.group_dims > 0 && lb.group_dims > 0 && lg.group_dims != lb.group_dims)
      return invalid("gamma and beta have different group axes");
  } else {
    lb = lg;
  }
  if (auto e = ffi_util::epsilon_error(epsilon); !e.empty()) return invalid(e);
  if (beta != nullptr) {
    if (auto e = ffi_util::first_overlap({{"y", &*y}, {"mean", &*mean}, {"variance", &*variance}},
                                         {{"x", &x}, {"gamma", &gamma}, {"beta", beta}});
        !e.empty())
      return invalid(e);
  } else if (auto e = ffi_util::first_overlap({{"y", &*y}, {"mean", &*mean}, {"variance", &*variance}},
                                              {{"x", &x}, {"gamma", &gamma}});
             !e.empty()) {
    return invalid(e);
  }
  const int64_t groups = lg.group_dims > 0 ? lg.groups : lb.groups;
  const int64_t n = ffi_util::product(dims, 0, dims.size() - 1);

  LayerNormForwardProblem p;
  p.dtype = t;
  p.x = x.untyped_data();
  p.gamma = static_cast<const float*>(gamma.untyped_data());
  p.beta = beta != nullptr ? static_cast<const float*>(beta->untyped_data()) : nullptr;
  p.gamma_stride = lg.stride;
  p.beta_stride = beta != nullptr ? lb.stride : 0;
  p.y = y->untyped_data();
  p.mean = static_cast<float*>(mean->untyped_data());
  p.variance = static_cast<float*>(variance->untyped_data());
  p.groups = groups;
  p.rows = groups > 0 ? n / groups : 0;
  p.cols = dims.back();
  p.epsilon = epsilon;
  if (const char* err = layer_norm_forward(p, ffi_util::make_executor(pool))) return invalid(err);
  return ffi::Error::Success();
}

ffi::Error ForwardCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer gamma, ffi::AnyBuffer beta,
                          float epsilon, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> mean,
                          ffi::Result<ffi::AnyBuffer> variance) {
  return Forward(pool, x, gamma, &beta, epsilon, y, mean, variance);
}

ffi::Error ForwardNoBetaCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer gamma, float epsilon,
                                ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> mean,
                                ffi::Result<ffi::AnyBuffer> variance) {
  return Forward(pool, x, gamma, nullptr, epsilon, y, mean, variance);
}

}  // namespace
}  // namespace jax_lngb

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormForwardCpu, jax_lngb::ForwardCpuImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<xla::ffi::AnyBuffer>()  // x
                                  .Arg<xla::ffi::AnyBuffer>()  // gamma (float32)
                                  .Arg<xla::ffi::AnyBuffer>()  // beta (float32)
                                  .Attr<float>("epsilon")
                                  .Ret<xla::ffi::AnyBuffer>()  // y
                                  .Ret<xla::ffi::AnyBuffer>()  // mean
                                  .Ret<xla::ffi::AnyBuffer>()  // variance
);

JAX_LNGB_CPU_HANDLER("jax_lngb_layer_norm_forward", JaxLngbLayerNormForwardCpu);

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbLayerNormForwardNoBetaCpu, jax_lngb::ForwardNoBetaCpuImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<xla::ffi::AnyBuffer>()  // x
                                  .Arg<xla::ffi::AnyBuffer>()  // gamma (float32)
                                  .Attr<float>("epsilon")
                                  .Ret<xla::ffi::AnyBuffer>()  // y
                                  .Ret<xla::ffi::AnyBuffer>()  // mean
                                  .Ret<xla::ffi::AnyBuffer>()  // variance
);

JAX_LNGB_CPU_HANDLER("jax_lngb_layer_norm_forward_no_beta", JaxLngbLayerNormForwardNoBetaCpu);
