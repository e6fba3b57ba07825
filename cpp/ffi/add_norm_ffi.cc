// XLA FFI handlers of the residual add + norm (cpp/kernels/add_norm.h):
//   jax_lngb_add_layer_norm_forward   x, residual, gamma, beta -> y, h, mean, variance
//   jax_lngb_add_rms_norm_forward     x, residual, gamma       -> y, h, rstd
//   jax_lngb_add_layer_norm_backward  dy, dh, h, mean, variance, gamma -> d_sum, pd_gamma, pd_beta
//   jax_lngb_add_rms_norm_backward    dy, dh, h, rstd, gamma             -> d_sum, pd_gamma
// Attributes: epsilon (float32), zero_centered (bool). Parameters are
// float32 [H] or [*G, H]; beta may be empty ([0]) and pd_beta [*G, 0]: the
// norm then has no bias, and no bias is read or summed. x/y/dy share one
// dtype, residual/h/dh/d_sum another; every size comes from the buffers.
#include <string>

#include "ffi/ffi_common.h"
#include "ffi/norm_layout.h"
#include "ffi/registry.h"
#include "kernels/add_norm.h"

namespace jax_lngb {
namespace {

namespace ffi = xla::ffi;
using ffi_util::dims_str;
using ffi_util::invalid;

bool same_shape(const ffi::AnyBuffer& a, const ffi::AnyBuffer& b) {
  return ffi_util::same_dims(a.dimensions(), b.dimensions());
}

// x and residual: same shape, supported dtypes.
std::string row_pair(const char* a_name, const ffi::AnyBuffer& a, const char* b_name, const ffi::AnyBuffer& b,
                     DType* ta, DType* tb) {
  if (auto e = ffi_util::row_operand(a, ta); !e.empty()) return e;
  const auto t = ffi_util::to_dtype(b.element_type());
  if (!t) return std::string("unsupported ") + b_name + " dtype (need float32, float16 or bfloat16)";
  if (!same_shape(a, b))
    return std::string(b_name) + " shape " + dims_str(b.dimensions()) + " must match " + a_name + " " +
           dims_str(a.dimensions());
  *tb = *t;
  return {};
}

ffi::Error ForwardImpl(AddNormKind kind, ffi::ThreadPool& pool, const ffi::AnyBuffer& x, const ffi::AnyBuffer& residual,
                       const ffi::AnyBuffer& gamma, const ffi::AnyBuffer* beta, float epsilon, bool zero_centered,
                       ffi::AnyBuffer& y, ffi::AnyBuffer& h, ffi::AnyBuffer* mean, ffi::AnyBuffer* variance,
                       ffi::AnyBuffer* rstd) {
  DType tx, tr;
  if (auto e = row_pair("x", x, "residual", residual, &tx, &tr); !e.empty()) return invalid(e);
  const auto dims = x.dimensions();
  if (!ffi_util::like_rows(y, x)) return invalid("y buffer must match x " + dims_str(dims));
  if (!ffi_util::like_rows(h, residual)) return invalid("h buffer must match residual " + dims_str(dims));
  for (ffi::AnyBuffer* s : {mean, variance, rstd})
    if (s && !ffi_util::like_row_stats(*s, x))
      return invalid("statistics buffers must be float32 of shape x.shape[:-1]");
  ffi_util::ParamLayout lg, lb;
  if (auto e = ffi_util::param_layout("gamma", gamma, dims, &lg); !e.empty()) return invalid(e);
  const bool has_beta = beta && beta->element_count() > 0;
  if (beta && !has_beta && (beta->dimensions().size() != 1 || beta->element_type() != ffi::DataType::F32))
    return invalid("an absent beta must be an empty float32 [0]");
  if (has_beta) {
    if (auto e = ffi_util::param_layout("beta", *beta, dims, &lb); !e.empty()) return invalid(e);
    if (lb.group_dims != lg.group_dims) return invalid("gamma and beta must have the same group axes");
  }
  if (auto e = ffi_util::epsilon_error(epsilon); !e.empty()) return invalid(e);
  // Absent buffers stand in as ones already in the list.
  if (auto e = ffi_util::first_overlap(
          {{"y", &y},
           {"h", &h},
           {"mean", mean ? mean : &y},
           {"variance", variance ? variance : &y},
           {"rstd", rstd ? rstd : &y}},
          {{"x", &x}, {"residual", &residual}, {"gamma", &gamma}, {"beta", has_beta ? beta : &gamma}});
      !e.empty())
    return invalid(e);
  if (ffi_util::overlap(y, h)) return invalid("y and h buffers share memory");
  AddNormForwardProblem p;
  p.kind = kind;
  p.x_dtype = tx;
  p.r_dtype = tr;
  p.x = x.untyped_data();
  p.residual = residual.untyped_data();
  p.gamma = static_cast<const float*>(gamma.untyped_data());
  p.beta = has_beta ? static_cast<const float*>(beta->untyped_data()) : nullptr;
  p.param_stride = lg.stride;
  p.zero_centered = zero_centered;
  p.y = y.untyped_data();
  p.h = h.untyped_data();
  if (mean) p.mean = static_cast<float*>(mean->untyped_data());
  if (variance) p.variance = static_cast<float*>(variance->untyped_data());
  if (rstd) p.rstd = static_cast<float*>(rstd->untyped_data());
  const int64_t n = ffi_util::product(dims, 0, dims.size() - 1);
  p.groups = lg.groups;
  p.rows = lg.groups > 0 ? n / lg.groups : 0;
  p.cols = dims.back();
  p.epsilon = epsilon;
  if (const char* err = add_norm_forward(p, ffi_util::make_executor(pool))) return invalid(err);
  return ffi::Error::Success();
}

ffi::Error BackwardImpl(AddNormKind kind, ffi::ThreadPool& pool, const ffi::AnyBuffer& dy, const ffi::AnyBuffer& dh,
                        const ffi::AnyBuffer& h, const ffi::AnyBuffer* mean, const ffi::AnyBuffer* variance,
                        const ffi::AnyBuffer* rstd, const ffi::AnyBuffer& gamma, float epsilon, bool zero_centered,
                        ffi::AnyBuffer& d_sum, ffi::AnyBuffer& pd_gamma, ffi::AnyBuffer* pd_beta) {
  DType th, tdy;
  if (auto e = row_pair("h", h, "dy", dy, &th, &tdy); !e.empty()) return invalid(e);
  const auto dims = h.dimensions();
  if (!ffi_util::like_rows(dh, h)) return invalid("dh must match h " + dims_str(dims));
  if (!ffi_util::like_rows(d_sum, h)) return invalid("d_sum buffer must match h " + dims_str(dims));
  for (const ffi::AnyBuffer* s : {mean, variance, rstd})
    if (s && !ffi_util::like_row_stats(*s, h)) return invalid("statistics must be float32 of shape h.shape[:-1]");
  ffi_util::ParamLayout lg;
  if (auto e = ffi_util::param_layout("gamma", gamma, dims, &lg); !e.empty()) return invalid(e);
  DType out_t;
  if (auto e = ffi_util::reduced_out_layout(pd_gamma, dims, &out_t); !e.empty()) return invalid(e);
  const auto out_dims = pd_gamma.dimensions();
  if (auto e = ffi_util::gamma_matches_out(gamma, lg, out_dims); !e.empty()) return invalid(e);
  const bool has_beta = pd_beta && pd_beta->element_count() > 0;
  if (pd_beta) {
    const auto bd = pd_beta->dimensions();
    bool ok = pd_beta->element_type() == pd_gamma.element_type() && bd.size() == out_dims.size();
    for (size_t i = 0; ok && i + 1 < bd.size(); ++i) ok = bd[i] == out_dims[i];
    if (ok && bd.size() > 0) ok = bd.back() == out_dims.back() || bd.back() == 0;
    if (!ok) return invalid("pd_beta must be pd_gamma's dtype and shape " + dims_str(out_dims) + ", or [*G, 0]");
  }
  if (auto e = ffi_util::epsilon_error(epsilon); !e.empty()) return invalid(e);
  if (auto e = ffi_util::first_overlap(
          {{"d_sum", &d_sum}, {"pd_gamma", &pd_gamma}, {"pd_beta", has_beta ? pd_beta : &pd_gamma}},
          {{"dy", &dy},
           {"dh", &dh},
           {"h", &h},
           {"gamma", &gamma},
           {"mean", mean ? mean : &gamma},
           {"variance", variance ? variance : &gamma},
           {"rstd", rstd ? rstd : &gamma}});
      !e.empty())
    return invalid(e);
  AddNormBackwardProblem p;
  p.kind = kind;
  p.dy_dtype = tdy;
  p.h_dtype = th;
  p.out_dtype = out_t;
  p.dy = dy.untyped_data();
  p.dh = dh.untyped_data();
  p.h = h.untyped_data();
  if (mean) p.mean = static_cast<const float*>(mean->untyped_data());
  if (variance) p.variance = static_cast<const float*>(variance->untyped_data());
  if (rstd) p.rstd = static_cast<const float*>(rstd->untyped_data());
  p.gamma = static_cast<const float*>(gamma.untyped_data());
  p.gamma_stride = lg.stride;
  p.zero_centered = zero_centered;
  p.d_sum = d_sum.untyped_data();
  p.pd_gamma = pd_gamma.untyped_data();
  p.pd_beta = has_beta ? pd_beta->untyped_data() : nullptr;
  p.groups = ffi_util::product(out_dims, 0, out_dims.size() - 1);
  p.rows = ffi_util::product(dims, out_dims.size() - 1, dims.size() - 1);
  p.cols = dims.back();
  p.epsilon = epsilon;
  if (const char* err = add_norm_backward(p, ffi_util::make_executor(pool))) return invalid(err);
  return ffi::Error::Success();
}

ffi::Error LayerForward(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer residual, ffi::AnyBuffer gamma,
                        ffi::AnyBuffer beta, float epsilon, bool zero_centered, ffi::Result<ffi::AnyBuffer> y,
                        ffi::Result<ffi::AnyBuffer> h, ffi::Result<ffi::AnyBuffer> mean,
                        ffi::Result<ffi::AnyBuffer> variance) {
  return ForwardImpl(AddNormKind::kLayer, pool, x, residual, gamma, &beta, epsilon, zero_centered, *y, *h, &*mean,
                     &*variance, nullptr);
}

ffi::Error RmsForward(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer residual, ffi::AnyBuffer gamma,
                      float epsilon, bool zero_centered, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> h,
                      ffi::Result<ffi::AnyBuffer> rstd) {
  return ForwardImpl(AddNormKind::kRms, pool, x, residual, gamma, nullptr, epsilon, zero_centered, *y, *h, nullptr,
                     nullptr, &*rstd);
}

ffi::Error LayerBackward(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer dh, ffi::AnyBuffer h,
                         ffi::AnyBuffer mean, ffi::AnyBuffer variance, ffi::AnyBuffer gamma, float epsilon,
                         bool zero_centered, ffi::Result<ffi::AnyBuffer> d_sum, ffi::Result<ffi::AnyBuffer> pd_gamma,
                         ffi::Result<ffi::AnyBuffer> pd_beta) {
  return BackwardImpl(AddNormKind::kLayer, pool, dy, dh, h, &mean, &variance, nullptr, gamma, epsilon, zero_centered,
                      *d_sum, *pd_gamma, &*pd_beta);
}

ffi::Error RmsBackward(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer dh, ffi::AnyBuffer h,
                       ffi::AnyBuffer rstd, ffi::AnyBuffer gamma, float epsilon, bool zero_centered,
                       ffi::Result<ffi::AnyBuffer> d_sum, ffi::Result<ffi::AnyBuffer> pd_gamma) {
  return BackwardImpl(AddNormKind::kRms, pool, dy, dh, h, nullptr, nullptr, &rstd, gamma, epsilon, zero_centered,
                      *d_sum, *pd_gamma, nullptr);
}

}  // namespace
}  // namespace jax_lngb

namespace xffi = xla::ffi;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbAddLayerNormForwardCpu, jax_lngb::LayerForward,
                              xffi::Ffi::Bind()
                                  .Ctx<xffi::ThreadPool>()
                                  .Arg<xffi::AnyBuffer>()  // x
                                  .Arg<xffi::AnyBuffer>()  // residual
                                  .Arg<xffi::AnyBuffer>()  // gamma (float32)
                                  .Arg<xffi::AnyBuffer>()  // beta (float32, or [0])
                                  .Attr<float>("epsilon")
                                  .Attr<bool>("zero_centered")
                                  .Ret<xffi::AnyBuffer>()  // y
                                  .Ret<xffi::AnyBuffer>()  // h
                                  .Ret<xffi::AnyBuffer>()  // mean
                                  .Ret<xffi::AnyBuffer>()  // variance
);

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbAddRmsNormForwardCpu, jax_lngb::RmsForward,
                              xffi::Ffi::Bind()
                                  .Ctx<xffi::ThreadPool>()
                                  .Arg<xffi::AnyBuffer>()  // x
                                  .Arg<xffi::AnyBuffer>()  // residual
                                  .Arg<xffi::AnyBuffer>()  // gamma (float32)
                                  .Attr<float>("epsilon")
                                  .Attr<bool>("zero_centered")
                                  .Ret<xffi::AnyBuffer>()  // y
                                  .Ret<xffi::AnyBuffer>()  // h
                                  .Ret<xffi::AnyBuffer>()  // rstd
);

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbAddLayerNormBackwardCpu, jax_lngb::LayerBackward,
                              xffi::Ffi::Bind()
                                  .Ctx<xffi::ThreadPool>()
                                  .Arg<xffi::AnyBuffer>()  // dy
                                  .Arg<xffi::AnyBuffer>()  // dh
                                  .Arg<xffi::AnyBuffer>()  // h
                                  .Arg<xffi::AnyBuffer>()  // mean
                                  .Arg<xffi::AnyBuffer>()  // variance
                                  .Arg<xffi::AnyBuffer>()  // gamma (float32)
                                  .Attr<float>("epsilon")
                                  .Attr<bool>("zero_centered")
                                  .Ret<xffi::AnyBuffer>()  // d_sum
                                  .Ret<xffi::AnyBuffer>()  // pd_gamma
                                  .Ret<xffi::AnyBuffer>()  // pd_beta ([*G, H] or [*G, 0])
);

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbAddRmsNormBackwardCpu, jax_lngb::RmsBackward,
                              xffi::Ffi::Bind()
                                  .Ctx<xffi::ThreadPool>()
                                  .Arg<xffi::AnyBuffer>()  // dy
                                  .Arg<xffi::AnyBuffer>()  // dh
                                  .Arg<xffi::AnyBuffer>()  // h
                                  .Arg<xffi::AnyBuffer>()  // rstd
                                  .Arg<xffi::AnyBuffer>()  // gamma (float32)
                                  .Attr<float>("epsilon")
                                  .Attr<bool>("zero_centered")
                                  .Ret<xffi::AnyBuffer>()  // d_sum
                                  .Ret<xffi::AnyBuffer>()  // pd_gamma
);

JAX_LNGB_CPU_HANDLER("jax_lngb_add_layer_norm_forward", JaxLngbAddLayerNormForwardCpu);
JAX_LNGB_CPU_HANDLER("jax_lngb_add_rms_norm_forward", JaxLngbAddRmsNormForwardCpu);
JAX_LNGB_CPU_HANDLER("jax_lngb_add_layer_norm_backward", JaxLngbAddLayerNormBackwardCpu);
JAX_LNGB_CPU_HANDLER("jax_lngb_add_rms_norm_backward", JaxLngbAddRmsNormBackwardCpu);
