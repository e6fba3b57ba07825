// XLA FFI handler for the RMSNorm forward on the CPU: y, and the float32
// rstd of each row that the backward reuses.
#include "ffi/ffi_common.h"
#include "ffi/norm_layout.h"
#include "ffi/registry.h"
#include "kernels/rms_norm.h"

namespace jax_lngb {
namespace {

namespace ffi = xla::ffi;
using ffi_util::dims_str;
using ffi_util::invalid;

ffi::Error RmsForwardCpuImpl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer gamma, float epsilon,
                             ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> rstd) {
  const auto dims = x.dimensions();
  DType t;
  if (auto e = ffi_util::row_operand(x, &t); !e.empty()) return invalid(e);
  if (!ffi_util::like_rows(*y, x)) return invalid("y buffer must match x " + dims_str(dims));
  if (!ffi_util::like_row_stats(*rstd, x)) return invalid("rstd buffer must be float32 of shape x.shape[:-1]");
  ffi_util::ParamLayout lg;
  if (auto e = ffi_util::param_layout("gamma", gamma, dims, &lg); !e.empty()) return invalid(e);
  if (auto e = ffi_util::epsilon_error(epsilon); !e.empty()) return invalid(e);
  if (auto e = ffi_util::first_overlap({{"y", &*y}, {"rstd", &*rstd}}, {{"x", &x}, {"gamma", &gamma}}); !e.empty())
    return invalid(e);
  const int64_t n = ffi_util::product(dims, 0, dims.size() - 1);

  RmsNormForwardProblem p;
  p.dtype = t;
  p.x = x.untyped_data();
  p.gamma = static_cast<const float*>(gamma.untyped_data());
  p.gamma_stride = lg.stride;
  p.y = y->untyped_data();
  p.rstd = static_cast<float*>(rstd->untyped_data());
  p.groups = lg.groups;
  p.rows = lg.groups > 0 ? n / lg.groups : 0;
  p.cols = dims.back();
  p.epsilon = epsilon;
  if (const char* err = rms_norm_forward(p, ffi_util::make_executor(pool))) return invalid(err);
  return ffi::Error::Success();
}

}  // namespace
}  // namespace jax_lngb

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbRmsNormForwardCpu, jax_lngb::RmsForwardCpuImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<xla::ffi::AnyBuffer>()  // x
                                  .Arg<xla::ffi::AnyBuffer>()  // gamma (float32)
                                  .Attr<float>("epsilon")
                                  .Ret<xla::ffi::AnyBuffer>()  // y
                                  .Ret<xla::ffi::AnyBuffer>()  // rstd
);

JAX_LNGB_CPU_HANDLER("jax_lngb_rms_norm_forward", JaxLngbRmsNormForwardCpu);
