"""`rms_norm_grad_p`: the RMSNorm backward's row part (CANN RmsNormGrad's
dx), plus the res_for_gamma = x * rstd that LayerNormGradBeta takes.

    dx            = a * x + (dy * gamma) * rstd,  a = (-(rstd^3) * sum(dy * gamma * x)) * (1/H)
    res_for_gamma = x * rstd                       (x's dtype, through memory)

The chained backward (`jax_lngb.rms_norm(..., backward="chained")`) binds
it and then `layer_norm_grad_beta_p(res_for_gamma, dy)` for dgamma: CANN's
two-kernel chain, where the reduction runs on whatever LayerNormGradBeta
lowering the platform has (the C++ kernel on the CPU, the AscendC kernel on
an Ascend NPU). On the CPU a C++ kernel writes both outputs in one pass over
row blocks; elsewhere the jax.numpy formulas run.

Row-wise in every output, so vmap with an unmapped gamma joins the rows
(`_core.batching.row_wise_batcher`), and on a mesh each device works on its own rows.

Parameters of the primitive:
    batch_dims: leading axes that are independent problems; gamma [*G, H].
"""

from __future__ import annotations

import functools

import jax
from jax.interpreters import ad, batching, mlir

from ..._core import native
from ..._core.avals import derived_aval
from ..._core.batching import PARAM, ROWS, row_wise_batcher
from ..._core.ffi_call import apply_impl
from ..._core.partitioning import PARAM_H, ROWS_H, RowLayout, register_row_partitioning
from ..._core.partitioning import ROWS as ROWS_ROLE
from ..._core.validate import check_bool
from ..layer_norm.formulas import kernel_gamma
from ..primitives import (
    RMS_NORM_GRAD_TARGET,
    rms_norm_grad_local_p,
    rms_norm_grad_p,
)
from .backward import check_backward_operands
from .formulas import grad_jnp


def _abstract_eval(dy, x, rstd, gamma, *, batch_dims, zero_centered_gamma=False):
    check_bool("rms_norm_grad", "zero_centered_gamma", zero_centered_gamma)
    check_backward_operands("rms_norm_grad", dy, x, rstd, gamma, batch_dims)
    out = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=(dy, rstd, gamma))
    return out, out


for _p in (rms_norm_grad_p, rms_norm_grad_local_p):
    _p.def_abstract_eval(_abstract_eval)
    _p.def_impl(apply_impl(_p))


def _grad_jnp(dy, x, rstd, gamma, *, batch_dims, zero_centered_gamma=False):
    return list(grad_jnp(dy, x, rstd, gamma, batch_dims=batch_dims, zero_centered_gamma=zero_centered_gamma))


def _cpu_call(dy, x, rstd, gamma, *, batch_dims, zero_centered_gamma=False):
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    g = kernel_gamma(gamma, zero_centered_gamma)  # float32; 1 + gamma when zero-centered
    return jax.ffi.ffi_call(RMS_NORM_GRAD_TARGET, (out, out))(dy, x, rstd, g)


mlir.register_lowering(rms_norm_grad_local_p, mlir.lower_fun(_grad_jnp, multiple_results=True))
mlir.register_lowering(rms_norm_grad_local_p, mlir.lower_fun(_cpu_call, multiple_results=True), platform="cpu")


def _layout(dy, x, rstd, gamma, *, batch_dims, zero_centered_gamma=False):
    return RowLayout(
        group_dims=batch_dims,
        row_dims=x.ndim - 1 - batch_dims,
        operands=(ROWS_H, ROWS_H, ROWS_ROLE, PARAM_H),
        results=(ROWS_H, ROWS_H),
    )


register_row_partitioning(rms_norm_grad_p, rms_norm_grad_local_p, _layout, reference=_grad_jnp)


def _jvp(primals, tangents, **params):
    """Primal from the kernel; tangents from the jax.numpy formulas, which JAX
    can transpose and differentiate again."""
    outs = rms_norm_grad_p.bind(*primals, **params)
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    _, t_outs = jax.jvp(functools.partial(_grad_jnp, **params), tuple(primals), tuple(tangents))
    return outs, t_outs


ad.primitive_jvps[rms_norm_grad_p] = _jvp

_KINDS = (ROWS, ROWS, ROWS, PARAM)


# dx and res_for_gamma are per row (see _core.batching).
batching.primitive_batchers[rms_norm_grad_p] = row_wise_batcher(rms_norm_grad_p, _KINDS)

native.register_cpu_targets()
