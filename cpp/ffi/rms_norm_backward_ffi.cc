// XLA FFI handlers for the RMSNorm backward on the CPU:
//   jax_lngb_rms_norm_grad      dx and res_for_gamma (the chained backward,
//                               which hands res_for_gamma to LayerNormGradBeta)
//   jax_lngb_rms_norm_backward  dx and pd_gamma in one pass (fused)
// Operands of both: dy, x, rstd (float32 [*G, *rows]), gamma (float32 [H]
// or [*G, H]). pd_gamma is [*G, H]: one result per group, never summed
// over vmapped examples.
#include "ffi/ffi_common.h"
#include "ffi/norm_layout.h"
#include "ffi/registry.h"
#include "kernels/rms_norm.h"

namespace jax_lngb {
namespace {

namespace ffi = xla::ffi;
using ffi_util::dims_str;
using ffi_util::invalid;

// The checks both handlers share; on success fills dtype and gamma layout.
std::string check_operands(const ffi::AnyBuffer& dy, const ffi::AnyBuffer& x, const ffi::AnyBuffer& rstd,
                           const ffi::AnyBuffer& gamma, const ffi::AnyBuffer& dx, DType* t, ffi_util::ParamLayout* lg) {
  if (auto e = ffi_util::row_operand(x, t); !e.empty()) return e;
  const auto dims = x.dimensions();
  if (!ffi_util::like_rows(dy, x)) return "dy must match x " + dims_str(dims);
  if (!ffi_util::like_rows(dx, x)) return "dx buffer must match x " + dims_str(dims);
  if (!ffi_util::like_row_stats(rstd, x)) return "rstd must be float32 of shape x.shape[:-1]";
  return ffi_util::param_layout("gamma", gamma, dims, lg);
}

ffi::Error RmsGradCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer rstd,
                          ffi::AnyBuffer gamma, ffi::Result<ffi::AnyBuffer> dx,
                          ffi::Result<ffi::AnyBuffer> res_for_gamma) {
  DType t;
  ffi_util::ParamLayout lg;
  if (auto e = check_operands(dy, x, rstd, gamma, *dx, &t, &lg); !e.empty()) return invalid(e);
  const auto dims = x.dimensions();
  if (!ffi_util::like_rows(*res_for_gamma, x)) return invalid("res_for_gamma buffer must match x " + dims_str(dims));
  if (auto e = ffi_util::first_overlap({{"dx", &*dx}, {"res_for_gamma", &*res_for_gamma}},
                                       {{"dy", &dy}, {"x", &x}, {"rstd", &rstd}, {"gamma", &gamma}});
      !e.empty())
    return invalid(e);
  const int64_t n = ffi_util::product(dims, 0, dims.size() - 1);
  RmsNormGradProblem p;
  p.dtype = t;
  p.dy = dy.untyped_data();
  p.x = x.untyped_data();
  p.rstd = static_cast<const float*>(rstd.untyped_data());
  p.gamma = static_cast<const float*>(gamma.untyped_data());
  p.gamma_stride = lg.stride;
  p.dx = dx->untyped_data();
  p.res_for_gamma = res_for_gamma->untyped_data();
  p.groups = lg.groups;
  p.rows = lg.groups > 0 ? n / lg.groups : 0;
  p.cols = dims.back();
  if (const char* err = rms_norm_grad(p, ffi_util::make_executor(pool))) return invalid(err);
  return ffi::Error::Success();
}

ffi::Error RmsBackwardCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer rstd,
                              ffi::AnyBuffer gamma, ffi::Result<ffi::AnyBuffer> dx,
                              ffi::Result<ffi::AnyBuffer> pd_gamma) {
  DType t;
  ffi_util::ParamLayout lg;
  if (auto e = check_operands(dy, x, rstd, gamma, *dx, &t, &lg); !e.empty()) return invalid(e);
  const auto dims = x.dimensions();
  const auto out_dims = pd_gamma->dimensions();
  DType out_t;
  if (auto e = ffi_util::reduced_out_layout(*pd_gamma, dims, &out_t); !e.empty()) return invalid(e);
  if (auto e = ffi_util::gamma_matches_out(gamma, lg, out_dims); !e.empty()) return invalid(e);
  if (auto e = ffi_util::first_overlap({{"dx", &*dx}, {"pd_gamma", &*pd_gamma}},
                                       {{"dy", &dy}, {"x", &x}, {"rstd", &rstd}, {"gamma", &gamma}});
      !e.empty())
    return invalid(e);
  RmsNormBackwardProblem p;
  p.dtype = t;
  p.out_dtype = out_t;
  p.dy = dy.untyped_data();
  p.x = x.untyped_data();
  p.rstd = static_cast<const float*>(rstd.untyped_data());
  p.gamma = static_cast<const float*>(gamma.untyped_data());
  p.gamma_stride = lg.stride;
  p.dx = dx->untyped_data();
  p.pd_gamma = pd_gamma->untyped_data();
  p.groups = ffi_util::product(out_dims, 0, out_dims.size() - 1);
  p.rows = ffi_util::product(dims, out_dims.size() - 1, dims.size() - 1);
  p.cols = dims.back();
  if (const char* err = rms_norm_backward(p, ffi_util::make_executor(pool))) return invalid(err);
  return ffi::Error::Success();
}

}  // namespace
}  // namespace jax_lngb

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbRmsNormGradCpu, jax_lngb::RmsGradCpuImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<xla::ffi::AnyBuffer>()  // dy
                                  .Arg<xla::ffi::AnyBuffer>()  // x
                                  .Arg<xla::ffi::AnyBuffer>()  // rstd (float32)
                                  .Arg<xla::ffi::AnyBuffer>()  // gamma (float32)
                                  .Ret<xla::ffi::AnyBuffer>()  // dx
                                  .Ret<xla::ffi::AnyBuffer>()  // res_for_gamma
);

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbRmsNormBackwardCpu, jax_lngb::RmsBackwardCpuImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<xla::ffi::AnyBuffer>()  // dy
                                  .Arg<xla::ffi::AnyBuffer>()  // x
                                  .Arg<xla::ffi::AnyBuffer>()  // rstd (float32)
                                  .Arg<xla::ffi::AnyBuffer>()  // gamma (float32)
                                  .Ret<xla::ffi::AnyBuffer>()  // dx
                                  .Ret<xla::ffi::AnyBuffer>()  // pd_gamma
);

JAX_LNGB_CPU_HANDLER("jax_lngb_rms_norm_grad", JaxLngbRmsNormGradCpu);
JAX_LNGB_CPU_HANDLER("jax_lngb_rms_norm_backward", JaxLngbRmsNormBackwardCpu);
