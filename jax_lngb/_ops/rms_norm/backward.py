"""`rms_norm_backward_p`: the fused RMSNorm backward.

    dx       = rstd * (g - xhat * mean(g * xhat)),  g = dy * gamma, xhat = x * rstd
    pd_gamma = LayerNormGradBeta's pd_gamma of (res_for_gamma = xhat, dy)

On the CPU one C++ kernel runs both per block of rows: res_for_gamma is
formed in float32 in registers and added, with dy, into the gamma sums by
the reduction step that backs `layer_norm_grad_beta_p`; dy and x are read
once, dx is the only full-size output. Elsewhere dx comes from the
jax.numpy formulas and pd_gamma from `layer_norm_grad_beta`'s kernel
primitive on the float32 res_for_gamma and dy, so a platform with a
LayerNormGradBeta lowering (the Ascend NPU, `jax_lngb.ascend`) runs the
reduction there.

This is the transpose of `rms_norm_tangent_p` (the VJP of
`jax_lngb.rms_norm`); being linear in dy, its own transpose is that tangent
again, and its JVP uses the jax.numpy formulas, so derivatives of every
order work.

A public/local pair (see `_core.partitioning`): on a mesh each device runs the
kernel on its own rows, dx stays sharded like dy, and the float32 partial
sums are psum'd over the row-sharding axes and narrowed once.

Parameters of the primitive:
    batch_dims: leading axes that are independent problems (added by vmap):
                pd_gamma is [*G, H], one per problem.
    out_dtype:  dtype of pd_gamma (sums are float32, narrowed once).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.interpreters import ad, batching, mlir

from ..._core import native
from ..._core.avals import derived_aval
from ..._core.batching import PARAM, ROWS, move_to_groups
from ..._core.ffi_call import apply_impl
from ..._core.partitioning import PARAM_H, ROWS_H, SUM_H, RowLayout, float32_sums, register_row_partitioning
from ..._core.partitioning import ROWS as ROWS_ROLE
from ..._core.validate import (
    check_batch_dims,
    check_bool,
    check_kernel_dtype,
    check_param,
    check_row_stats,
    check_same_dtype,
    check_same_shape,
)
from ..layer_norm.formulas import kernel_gamma
from ..primitives import (
    RMS_NORM_BACKWARD_TARGET,
    layer_norm_grad_beta_local_p,
    rms_norm_backward_local_p,
    rms_norm_backward_p,
    rms_norm_tangent_p,
)
from .formulas import backward_jnp, grad_jnp


def check_backward_operands(fn, dy, x, rstd, gamma, batch_dims) -> int:
    """The operand checks of the RMSNorm backward primitives (fused and chained)."""
    batch_dims = check_batch_dims(fn, batch_dims, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_same_shape(fn, "x", x.shape, "dy", dy.shape)
    check_same_dtype(fn, "x", x.dtype, "dy", dy.dtype)
    check_kernel_dtype(fn, "rstd", rstd.dtype)
    check_row_stats(fn, "rstd", rstd.shape, x.shape)
    check_kernel_dtype(fn, "gamma", gamma.dtype)
    check_param(fn, "gamma", gamma.shape, x.shape, batch_dims)
    return batch_dims


# --------------------------------------------------------- abstract evaluation


def _abstract_eval(dy, x, rstd, gamma, *, batch_dims, out_dtype, zero_centered_gamma=False):
    fn = "rms_norm_backward"
    check_bool(fn, "zero_centered_gamma", zero_centered_gamma)
    batch_dims = check_backward_operands(fn, dy, x, rstd, gamma, batch_dims)
    check_kernel_dtype(fn, "out_dtype", out_dtype)
    inputs = (dy, rstd, gamma)
    dx = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=inputs)
    # Sums over rows: they vary over whatever manual axes the rows do.
    sums_shape = x.shape[:batch_dims] + x.shape[-1:]
    pd_gamma = derived_aval(x, sums_shape, out_dtype, (*range(batch_dims), None), inputs=inputs)
    return dx, pd_gamma


for _p in (rms_norm_backward_p, rms_norm_backward_local_p):
    _p.def_abstract_eval(_abstract_eval)
    _p.def_impl(apply_impl(_p))


# ------------------------------------------------------------------ lowerings


def _backward_jnp(dy, x, rstd, gamma, *, batch_dims, out_dtype, zero_centered_gamma=False):
    return list(
        backward_jnp(
            dy, x, rstd, gamma, batch_dims=batch_dims, out_dtype=out_dtype, zero_centered_gamma=zero_centered_gamma
        )
    )


def _backward_via_grad_beta(dy, x, rstd, gamma, *, batch_dims, out_dtype, zero_centered_gamma=False):
    """Every platform but the CPU: dx in jax.numpy, pd_gamma through
    LayerNormGradBeta's kernel primitive (its lowering for the platform: the
    AscendC kernel on an Ascend NPU, jax.numpy elsewhere) on the float32
    res_for_gamma and dy, as the fused kernel sums them."""

    dx, res = grad_jnp(dy, x, rstd, gamma, res_dtype=jnp.float32, zero_centered_gamma=zero_centered_gamma)
    pd_gamma, _ = layer_norm_grad_beta_local_p.bind(
        res, dy.astype(jnp.float32), out_dtype=out_dtype, batch_dims=batch_dims
    )
    return [dx, pd_gamma]


def _cpu_call(dy, x, rstd, gamma, *, batch_dims, out_dtype, zero_centered_gamma=False):
    outs = (
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        jax.ShapeDtypeStruct(x.shape[:batch_dims] + x.shape[-1:], out_dtype),
    )
    # Every size, batch_dims included (from pd_gamma's rank), comes from the
    # buffers: no attributes, so symbolic shapes export. gamma in float32
    # (1 + gamma when zero-centered, see layer_norm's formulas.kernel_gamma).
    g = kernel_gamma(gamma, zero_centered_gamma)
    return jax.ffi.ffi_call(RMS_NORM_BACKWARD_TARGET, outs)(dy, x, rstd, g)


mlir.register_lowering(rms_norm_backward_local_p, mlir.lower_fun(_backward_via_grad_beta, multiple_results=True))
mlir.register_lowering(rms_norm_backward_local_p, mlir.lower_fun(_cpu_call, multiple_results=True), platform="cpu")


# -------------------------------------------------------------- partitioning


def _layout(dy, x, rstd, gamma, *, batch_dims, out_dtype, zero_centered_gamma=False):
    """dx row-wise like dy; pd_gamma a sum over the rows."""
    return RowLayout(
        group_dims=batch_dims,
        row_dims=x.ndim - 1 - batch_dims,
        operands=(ROWS_H, ROWS_H, ROWS_ROLE, PARAM_H),
        results=(ROWS_H, SUM_H),
    )


register_row_partitioning(
    rms_norm_backward_p,
    rms_norm_backward_local_p,
    _layout,
    reference=_backward_jnp,
    widen_params=float32_sums,
)


# ------------------------------------------------------- JVP and transpose


def _jvp(primals, tangents, **params):
    """Primal from the kernel; tangents from the jax.numpy formulas."""
    outs = rms_norm_backward_p.bind(*primals, **params)
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    _, t_outs = jax.jvp(functools.partial(_backward_jnp, **params), tuple(primals), tuple(tangents))
    return outs, t_outs


def _transpose(cts, dy, x, rstd, gamma, *, batch_dims, out_dtype, **flags):
    """Linear in dy: the transpose is the forward's tangent map."""

    if not ad.is_undefined_primal(dy) or any(ad.is_undefined_primal(a) for a in (x, rstd, gamma)):
        raise NotImplementedError("rms_norm_backward is linear in dy only")
    if all(type(c) is ad.Zero for c in cts):
        return [None] * 4
    ct_dx, ct_g = (ad.instantiate_zeros(c) for c in cts)
    ct_dy, _ = rms_norm_tangent_p.bind(ct_dx, ct_g, x, rstd, gamma, batch_dims=batch_dims, backward="fused", **flags)
    return [ct_dy, None, None, None]


ad.primitive_jvps[rms_norm_backward_p] = _jvp
ad.primitive_transposes[rms_norm_backward_p] = _transpose


# ------------------------------------------------------------------ batching


def _batch(args, dims, *, batch_dims, out_dtype, **flags):
    # pd_gamma must stay per example (vmap(grad(...))): group semantics.
    moved = move_to_groups(args, dims, (ROWS, ROWS, ROWS, PARAM), batch_dims)
    outs = rms_norm_backward_p.bind(*moved, batch_dims=batch_dims + 1, out_dtype=out_dtype, **flags)
    return outs, (0, 0)


batching.primitive_batchers[rms_norm_backward_p] = _batch

native.register_cpu_targets()
