"""`add_norm_backward_p`: the fused backward of the residual add + norm.

    d_sum    = dx_norm(dy) + dh       (residual's dtype; it is both d_x and d_residual)
    pd_gamma = sum over rows of x_hat * dy     (x_hat = (h - mean) * rstd, or h * rstd)
    pd_beta  = sum over rows of dy             (only when the norm has a bias)

On the CPU one C++ kernel reads dy, dh and h once per row block, writes
d_sum once and adds the parameter terms into float32 partials per block,
combined in block order (bits independent of the thread count). Without it,
`x + residual` then the norm moves 11 row passes forward and backward
together; fused, 8. Other platforms run `formulas.backward_jnp`.

The transpose of `add_norm_tangent_p`; linear in (dy, dh), its own
transpose is that tangent again (with t_residual = the cotangent of d_sum),
and its JVP differentiates the jax.numpy formulas, so every order works.

Operands: dy (x's dtype), dh (residual's dtype), h, *stats, gamma.
Results: d_sum, pd_gamma[, pd_beta] ([*G, H], out_dtype).
Parameters: those of `add_norm_forward_p`, plus out_dtype.
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
    check_epsilon,
    check_kernel_dtype,
    check_param,
    check_row_stats,
    check_same_dtype,
    check_same_shape,
)
from ..primitives import (
    ADD_LAYER_NORM_BACKWARD_TARGET,
    ADD_RMS_NORM_BACKWARD_TARGET,
    add_norm_backward_local_p,
    add_norm_backward_p,
    add_norm_tangent_p,
)
from .formulas import backward_jnp, num_stats
from .forward import check_flags, function_name


def add_norm_backward_ref(dy, dh, h, gamma, *, kind: str = "layer", epsilon: float = 1e-5, zero_centered: bool = False):
    """Oracle: float64 NumPy (d_sum, pd_gamma, pd_beta) of the norm of h
    (statistics recomputed in float64), sums over every leading axis."""
    f = lambda a: np.asarray(a, np.float64)
    h64, d = f(h), f(dy)
    g = f(gamma) + (1.0 if zero_centered else 0.0)
    if kind == "layer":
        xc = h64 - h64.mean(-1, keepdims=True)
        rstd = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + epsilon)
    else:
        xc = h64
        rstd = 1.0 / np.sqrt((h64 * h64).mean(-1, keepdims=True) + epsilon)
    x_hat = xc * rstd
    gd = d * g
    dx = rstd * gd - rstd * x_hat * (gd * x_hat).mean(-1, keepdims=True)
    if kind == "layer":
        dx = dx - rstd * gd.mean(-1, keepdims=True)
    rows = tuple(range(h64.ndim - 1))
    return dx + f(dh), (x_hat * d).sum(rows), d.sum(rows)


# --------------------------------------------------------- abstract evaluation


def split(args, kind: str):
    """(dy, dh, h, stats, gamma) from the operands."""
    return args[0], args[1], args[2], tuple(args[3 : 3 + num_stats(kind)]), args[3 + num_stats(kind)]


def _abstract_eval(*args, kind, epsilon, zero_centered, has_beta, batch_dims, out_dtype):
    fn = function_name(kind) + " (backward)"
    check_flags(fn, kind, zero_centered, has_beta)
    if len(args) != 4 + num_stats(kind):
        raise TypeError(f"{fn}: wrong number of operands ({len(args)})")
    dy, dh, h, stats, gamma = split(args, kind)
    batch_dims = check_batch_dims(fn, batch_dims, "h", h.shape)
    check_kernel_dtype(fn, "h", h.dtype)
    check_kernel_dtype(fn, "dy", dy.dtype)
    check_same_shape(fn, "h", h.shape, "dy", dy.shape)
    check_same_shape(fn, "h", h.shape, "dh", dh.shape)
    check_same_dtype(fn, "h", h.dtype, "dh", dh.dtype)
    for s in stats:
        check_kernel_dtype(fn, "stats", s.dtype)
        check_row_stats(fn, "stats", s.shape, h.shape)
    check_kernel_dtype(fn, "gamma", gamma.dtype)
    check_param(fn, "gamma", gamma.shape, h.shape, batch_dims)
    check_kernel_dtype(fn, "out_dtype", out_dtype)
    check_epsilon(fn, epsilon)
    d_sum = derived_aval(h, h.shape, h.dtype, range(h.ndim), inputs=args)
    # Sums over rows: they vary over whatever manual axes the rows do.
    param = derived_aval(h, h.shape[:batch_dims] + h.shape[-1:], out_dtype, (*range(batch_dims), None), inputs=args)
    return (d_sum, param) + ((param,) if has_beta else ())


for _p in (add_norm_backward_p, add_norm_backward_local_p):
    _p.def_abstract_eval(_abstract_eval)
    _p.def_impl(apply_impl(_p))


# ------------------------------------------------------------------ lowerings


def _backward_jnp(*args, kind, epsilon, zero_centered, has_beta, batch_dims, out_dtype):
    dy, dh, h, stats, gamma = split(args, kind)
    return backward_jnp(
        dy,
        dh,
        h,
        stats,
        gamma,
        kind=kind,
        epsilon=epsilon,
        zero_centered=zero_centered,
        batch_dims=batch_dims,
        has_beta=has_beta,
        out_dtype=out_dtype,
    )


def _cpu_call(*args, kind, epsilon, zero_centered, has_beta, batch_dims, out_dtype):
    dy, dh, h, stats, gamma = split(args, kind)
    sums = h.shape[:batch_dims] + h.shape[-1:]
    outs = [jax.ShapeDtypeStruct(h.shape, h.dtype), jax.ShapeDtypeStruct(sums, out_dtype)]
    target = ADD_RMS_NORM_BACKWARD_TARGET
    if kind == "layer":
        target = ADD_LAYER_NORM_BACKWARD_TARGET
        # Without a bias the kernel gets an empty pd_beta ([*G, 0]) and skips
        # that sum. Sizes (batch_dims too, from pd_gamma's rank) come from
        # the buffers.
        outs.append(jax.ShapeDtypeStruct(h.shape[:batch_dims] + ((h.shape[-1],) if has_beta else (0,)), out_dtype))
    res = jax.ffi.ffi_call(target, tuple(outs))(
        dy, dh, h, *stats, gamma.astype(jnp.float32), epsilon=np.float32(epsilon), zero_centered=bool(zero_centered)
    )
    return list(res) if has_beta else list(res[:2])


mlir.register_lowering(add_norm_backward_local_p, mlir.lower_fun(_backward_jnp, multiple_results=True))
mlir.register_lowering(add_norm_backward_local_p, mlir.lower_fun(_cpu_call, multiple_results=True), platform="cpu")


# -------------------------------------------------------------- partitioning


def _layout(*args, kind, epsilon, zero_centered, has_beta, batch_dims, out_dtype):
    """d_sum row-wise like dy; pd_gamma/pd_beta sums over the rows."""
    h = args[2]
    return RowLayout(
        group_dims=batch_dims,
        row_dims=h.ndim - 1 - batch_dims,
        operands=(ROWS_H, ROWS_H, ROWS_H) + (ROWS_ROLE,) * num_stats(kind) + (PARAM_H,),
        results=(ROWS_H, SUM_H) + ((SUM_H,) if has_beta else ()),
    )


register_row_partitioning(
    add_norm_backward_p, add_norm_backward_local_p, _layout, reference=_backward_jnp, widen_params=float32_sums
)


# ------------------------------------------------------- JVP and transpose


def _jvp(primals, tangents, **params):
    """Primal from the kernel; tangents from the jax.numpy formulas."""
    outs = add_norm_backward_p.bind(*primals, **params)
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    _, t_outs = jax.jvp(functools.partial(_backward_jnp, **params), tuple(primals), tuple(tangents))
    return outs, t_outs


def _transpose(cts, *args, kind, epsilon, zero_centered, has_beta, batch_dims, out_dtype):
    """Linear in (dy, dh): the transpose is the forward's tangent map with
    t_h = the cotangent of d_sum (so the cotangent of dh is that itself)."""
    dy, dh, h, stats, gamma = split(args, kind)
    if any(ad.is_undefined_primal(a) for a in (h, *stats, gamma)):
        raise NotImplementedError("add_norm_backward is linear in (dy, dh) only")
    if all(type(c) is ad.Zero for c in cts):
        return [None] * len(args)
    ct_sum, *ct_params = (ad.instantiate_zeros(c) for c in cts)
    dy_aval = dy.aval if ad.is_undefined_primal(dy) else jax.typeof(dy)
    t_y, t_h, *_ = add_norm_tangent_p.bind(
        jnp.zeros(h.shape, dy_aval.dtype),
        ct_sum,
        *ct_params,
        h,
        *stats,
        gamma,
        kind=kind,
        epsilon=epsilon,
        zero_centered=zero_centered,
        has_beta=has_beta,
        batch_dims=batch_dims,
    )
    return [
        t_y if ad.is_undefined_primal(dy) else None,
        t_h if ad.is_undefined_primal(dh) else None,
    ] + [None] * (len(args) - 2)


ad.primitive_jvps[add_norm_backward_p] = _jvp
ad.primitive_transposes[add_norm_backward_p] = _transpose


# ------------------------------------------------------------------ batching


def _batch(args, dims, *, kind, batch_dims, **params):
    # The parameter sums reduce over rows: the mapped axis must stay an
    # independent problem (see _core.batching), even with gamma shared.
    kinds = (ROWS, ROWS, ROWS) + (ROWS,) * num_stats(kind) + (PARAM,)
    moved = move_to_groups(args, dims, kinds, batch_dims)
    outs = add_norm_backward_p.bind(*moved, kind=kind, batch_dims=batch_dims + 1, **params)
    return outs, (0,) * len(outs)


batching.primitive_batchers[add_norm_backward_p] = _batch

native.register_cpu_targets()
