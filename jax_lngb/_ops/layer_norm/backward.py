"""`layer_norm_backward_p`: the fused LayerNorm backward, CANN's chain
LayerNormGrad -> LayerNormGradBeta in one pass.

    dx                 = LayerNormGrad's pd_x
    pd_gamma, pd_beta  = LayerNormGradBeta(res_for_gamma, dy)

On the CPU one C++ kernel runs both per block of rows: res_for_gamma is
formed in float32 in a cache-resident scratch and fed, with the dy rows
still in cache, to the same reduction code that backs
`layer_norm_grad_beta_p`. dy and x are read once, dx is the only full-size
output. Other platforms run the same formulas in jax.numpy.

This is the transpose of `layer_norm_tangent_p` (the VJP of
`jax_lngb.layer_norm`); being linear in dy, its own transpose is that
tangent again, and its JVP uses the jax.numpy formulas, so derivatives of
every order work.

A public/local pair like every kernel primitive (see `_core.partitioning`): on a
mesh each device runs the kernel on its own rows, dx stays sharded like dy,
and the float32 partial sums are psum'd over the row-sharding axes and
narrowed once.

Parameters of the primitive:
    epsilon:    static float added to the variance.
    batch_dims: leading axes that are independent problems (added by vmap):
                pd_gamma and pd_beta are [*G, H], one per problem.
    out_dtype:  dtype of pd_gamma and pd_beta (sums are float32, narrowed once).
    zero_centered_gamma: dx scales dy by 1 + gamma (float32), not gamma;
                pd_gamma is unchanged in form (d(1 + gamma) = d gamma). Optional (False).
    has_beta:   False: no pd_beta result, and the kernel forms no sum of dy
                (results dx, pd_gamma). Optional (True).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
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
    check_epsilon,
    check_kernel_dtype,
    check_param,
    check_row_stats,
    check_same_dtype,
    check_same_shape,
)
from ..grad_beta import layer_norm_grad_beta_ref
from ..primitives import (
    LAYER_NORM_BACKWARD_NO_BETA_TARGET,
    LAYER_NORM_BACKWARD_TARGET,
    layer_norm_backward_local_p,
    layer_norm_backward_p,
    layer_norm_tangent_p,
)
from .formulas import backward_jnp, kernel_gamma
from .grad import layer_norm_grad_ref


def layer_norm_backward_ref(dy, x, variance, mean, gamma, *, epsilon: float = 1e-5, zero_centered_gamma: bool = False):
    """Oracle: float64 NumPy LayerNormGrad followed by LayerNormGradBeta
    (sums over every leading axis). Returns (dx, pd_gamma, pd_beta)."""
    if zero_centered_gamma:
        gamma = np.asarray(gamma, np.float64) + 1.0
    pd_x, res = layer_norm_grad_ref(dy, x, variance, mean, gamma, epsilon=epsilon)
    pd_gamma, pd_beta = layer_norm_grad_beta_ref(res, dy)
    return pd_x, pd_gamma, pd_beta


# --------------------------------------------------------- abstract evaluation


def _abstract_eval(
    dy, x, variance, mean, gamma, *, epsilon, batch_dims, out_dtype, zero_centered_gamma=False, has_beta=True
):
    fn = "layer_norm_backward"
    check_bool(fn, "zero_centered_gamma", zero_centered_gamma)
    check_bool(fn, "has_beta", has_beta)
    batch_dims = check_batch_dims(fn, batch_dims, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_same_shape(fn, "x", x.shape, "dy", dy.shape)
    check_same_dtype(fn, "x", x.dtype, "dy", dy.dtype)
    for name, s in (("variance", variance), ("mean", mean)):
        check_kernel_dtype(fn, name, s.dtype)
        check_row_stats(fn, name, s.shape, x.shape)
    check_kernel_dtype(fn, "gamma", gamma.dtype)
    check_param(fn, "gamma", gamma.shape, x.shape, batch_dims)
    check_kernel_dtype(fn, "out_dtype", out_dtype)
    check_epsilon(fn, epsilon)
    inputs = (dy, variance, mean, gamma)
    dx = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=inputs)
    # Sums over rows: they vary over whatever manual axes the rows do.
    param = derived_aval(x, x.shape[:batch_dims] + x.shape[-1:], out_dtype, (*range(batch_dims), None), inputs=inputs)
    return (dx, param, param) if has_beta else (dx, param)


for _p in (layer_norm_backward_p, layer_norm_backward_local_p):
    _p.def_abstract_eval(_abstract_eval)
    _p.def_impl(apply_impl(_p))


# ------------------------------------------------------------------ lowerings


def _backward_jnp(
    dy, x, variance, mean, gamma, *, epsilon, batch_dims, out_dtype, zero_centered_gamma=False, has_beta=True
):
    return list(
        backward_jnp(
            dy,
            x,
            variance,
            mean,
            gamma,
            epsilon=epsilon,
            batch_dims=batch_dims,
            out_dtype=out_dtype,
            zero_centered_gamma=zero_centered_gamma,
            has_beta=has_beta,
        )
    )


def _result_avals(dy, x, variance, mean, gamma, *, batch_dims, out_dtype, has_beta=True, **_):
    param = jax.ShapeDtypeStruct(x.shape[:batch_dims] + x.shape[-1:], out_dtype)
    return (jax.ShapeDtypeStruct(x.shape, x.dtype), param) + ((param,) if has_beta else ())


def _cpu_call(
    dy, x, variance, mean, gamma, *, epsilon, batch_dims, out_dtype, zero_centered_gamma=False, has_beta=True
):
    """Statistics and gamma in float32 (1 + gamma when zero-centered, see
    formulas.kernel_gamma); without beta, the kernel that forms no pd_beta."""
    outs = _result_avals(dy, x, variance, mean, gamma, batch_dims=batch_dims, out_dtype=out_dtype, has_beta=has_beta)
    f32 = jnp.float32
    target = LAYER_NORM_BACKWARD_TARGET if has_beta else LAYER_NORM_BACKWARD_NO_BETA_TARGET
    return jax.ffi.ffi_call(target, outs)(
        dy,
        x,
        variance.astype(f32),
        mean.astype(f32),
        kernel_gamma(gamma, zero_centered_gamma),
        epsilon=np.float32(epsilon),
    )


mlir.register_lowering(layer_norm_backward_local_p, mlir.lower_fun(_backward_jnp, multiple_results=True))
mlir.register_lowering(layer_norm_backward_local_p, mlir.lower_fun(_cpu_call, multiple_results=True), platform="cpu")


# -------------------------------------------------------------- partitioning


def _layout(dy, x, variance, mean, gamma, *, epsilon, batch_dims, out_dtype, has_beta=True, **_):
    """dx row-wise like dy; pd_gamma/pd_beta sums over the rows."""
    return RowLayout(
        group_dims=batch_dims,
        row_dims=x.ndim - 1 - batch_dims,
        operands=(ROWS_H, ROWS_H, ROWS_ROLE, ROWS_ROLE, PARAM_H),
        results=(ROWS_H, SUM_H, SUM_H) if has_beta else (ROWS_H, SUM_H),
    )


register_row_partitioning(
    layer_norm_backward_p,
    layer_norm_backward_local_p,
    _layout,
    reference=_backward_jnp,
    widen_params=float32_sums,
)


# ------------------------------------------------------- JVP and transpose


def _jvp(primals, tangents, **params):
    """Primal from the kernel; tangents from the jax.numpy formulas."""
    outs = layer_norm_backward_p.bind(*primals, **params)
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    _, t_outs = jax.jvp(functools.partial(_backward_jnp, **params), tuple(primals), tuple(tangents))
    return outs, t_outs


def _transpose(cts, dy, x, variance, mean, gamma, *, epsilon, batch_dims, out_dtype, **flags):
    """Linear in dy: the transpose is the forward's tangent map."""

    if not ad.is_undefined_primal(dy) or any(ad.is_undefined_primal(a) for a in (x, variance, mean, gamma)):
        raise NotImplementedError("layer_norm_backward is linear in dy only")
    if all(type(c) is ad.Zero for c in cts):
        return [None] * 5
    ct_dy, _, _ = layer_norm_tangent_p.bind(
        *(ad.instantiate_zeros(c) for c in cts),
        x,
        variance,
        mean,
        gamma,
        epsilon=epsilon,
        batch_dims=batch_dims,
        backward="fused",
        **flags,
    )
    return [ct_dy, None, None, None, None]


ad.primitive_jvps[layer_norm_backward_p] = _jvp
ad.primitive_transposes[layer_norm_backward_p] = _transpose


# ------------------------------------------------------------------ batching


def _batch(args, dims, *, epsilon, batch_dims, out_dtype, **flags):
    # pd_gamma/pd_beta are sums over the rows: the mapped axis must stay an
    # independent problem (vmap(grad(...)) wants one gradient per element),
    # so it becomes a new group axis even when gamma is shared (see _core.batching).
    moved = move_to_groups(args, dims, (ROWS, ROWS, ROWS, ROWS, PARAM), batch_dims)
    outs = layer_norm_backward_p.bind(*moved, epsilon=epsilon, batch_dims=batch_dims + 1, out_dtype=out_dtype, **flags)
    return outs, (0,) * len(outs)


batching.primitive_batchers[layer_norm_backward_p] = _batch

native.register_cpu_targets()
