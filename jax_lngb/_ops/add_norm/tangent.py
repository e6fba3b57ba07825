"""`add_norm_tangent_p`: the JVP of the residual add + norm, linear in
(t_x, t_residual, t_gamma[, t_beta]), whose transpose is the fused backward.

    t_h = t_x + t_residual              (float32 add, residual's dtype)
    t_y = the norm's tangent of t_h     (LayerNorm's or RMSNorm's formulas)

plus the tangents of the saved statistics, so nothing of the tangent map is
evaluated on the primal side of a linearization.

`add_norm_forward_p`'s JVP binds it; reverse mode transposes it into
`add_norm_backward_p` (one kernel: d_x = d_residual = the norm's dx + dh,
and the parameter sums). It is evaluated only in forward mode, by its
jax.numpy formulas on every platform; its JVP differentiates those, so
higher orders work.

Operands: t_x, t_residual, t_gamma[, t_beta], h, *stats, gamma.
Results: t_y (x's dtype), t_h (residual's dtype), *t_stats (float32).
Parameters: those of `add_norm_forward_p`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, mlir

from ..._core.avals import derived_aval, psum_to_match
from ..._core.batching import PARAM, ROWS, row_wise_batcher
from ..._core.ffi_call import apply_impl
from ..._core.validate import (
    KERNEL_DTYPES,
    check_batch_dims,
    check_epsilon,
    check_kernel_dtype,
    check_param,
    check_row_stats,
    check_same_dtype,
    check_same_shape,
)
from ..primitives import add_norm_backward_p, add_norm_tangent_p
from .formulas import num_stats, stats_cotangent_jnp, tangent_jnp
from .forward import check_flags, function_name


def split(args, kind: str, has_beta: bool):
    """(t_x, t_residual, t_gamma, t_beta or None, h, stats, gamma) from the operands."""
    n = 3 + bool(has_beta)
    t_x, t_res, t_gamma = args[:3]
    t_beta = args[3] if has_beta else None
    h = args[n]
    stats = tuple(args[n + 1 : n + 1 + num_stats(kind)])
    gamma = args[n + 1 + num_stats(kind)]
    return t_x, t_res, t_gamma, t_beta, h, stats, gamma


def _abstract_eval(*args, kind, epsilon, zero_centered, has_beta, batch_dims):
    fn = function_name(kind) + " (tangent)"
    check_flags(fn, kind, zero_centered, has_beta)
    if len(args) != 5 + bool(has_beta) + num_stats(kind):
        raise TypeError(f"{fn}: wrong number of operands ({len(args)})")
    t_x, t_res, t_gamma, t_beta, h, stats, gamma = split(args, kind, has_beta)
    batch_dims = check_batch_dims(fn, batch_dims, "h", h.shape)
    check_kernel_dtype(fn, "h", h.dtype)
    check_kernel_dtype(fn, "t_x", t_x.dtype)
    check_same_shape(fn, "h", h.shape, "t_x", t_x.shape)
    check_same_shape(fn, "h", h.shape, "t_residual", t_res.shape)
    check_same_dtype(fn, "h", h.dtype, "t_residual", t_res.dtype)
    params = (("t_gamma", t_gamma), ("gamma", gamma)) + ((("t_beta", t_beta),) if has_beta else ())
    for name, p in params:
        check_kernel_dtype(fn, name, p.dtype)
        check_param(fn, name, p.shape, h.shape, batch_dims)
    for s in stats:
        check_kernel_dtype(fn, "stats", s.dtype)
        check_row_stats(fn, "stats", s.shape, h.shape)
    check_epsilon(fn, epsilon)
    t_y = derived_aval(h, h.shape, t_x.dtype, range(h.ndim), inputs=args)
    t_h = derived_aval(h, h.shape, h.dtype, range(h.ndim), inputs=args)
    stat = derived_aval(h, h.shape[:-1], jnp.float32, range(h.ndim - 1), inputs=args)
    return (t_y, t_h) + (stat,) * num_stats(kind)


add_norm_tangent_p.def_abstract_eval(_abstract_eval)
add_norm_tangent_p.def_impl(apply_impl(add_norm_tangent_p))


def _tangent_jnp(*args, kind, epsilon, zero_centered, has_beta, batch_dims):
    t_x, t_res, t_gamma, t_beta, h, stats, gamma = split(args, kind, has_beta)
    return list(
        tangent_jnp(
            t_x,
            t_res,
            t_gamma,
            t_beta,
            h,
            stats,
            gamma,
            kind=kind,
            epsilon=epsilon,
            zero_centered=zero_centered,
            batch_dims=batch_dims,
        )
    )


# Forward mode is a few elementwise ops and row sums: the jax.numpy formulas
# are the lowering on every platform.
mlir.register_lowering(add_norm_tangent_p, mlir.lower_fun(_tangent_jnp, multiple_results=True))


# ------------------------------------------------------- JVP and transpose


def _jvp(primals, tangents, **params):
    out = add_norm_tangent_p.bind(*primals, **params)
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    _, t_out = jax.jvp(functools.partial(_tangent_jnp, **params), tuple(primals), tuple(tangents))
    return out, t_out


def _aval(a):
    return a.aval if ad.is_undefined_primal(a) else jax.typeof(a)


def _transpose(cts, *args, kind, epsilon, zero_centered, has_beta, batch_dims):
    """The backward: (d_x, d_residual, d_gamma[, d_beta]) from the cotangents
    of y and h (plus, when asked, of the saved statistics)."""
    t_x, t_res, t_gamma, t_beta, h, stats, gamma = split(args, kind, has_beta)
    if any(ad.is_undefined_primal(a) for a in (h, *stats, gamma)):
        raise NotImplementedError("add_norm_tangent is linear in (t_x, t_residual, t_gamma, t_beta) only")
    n_lin = 3 + bool(has_beta)
    ct_y, ct_h, *ct_stats = cts
    no_stats = all(type(c) is ad.Zero for c in ct_stats)
    if type(ct_y) is ad.Zero and type(ct_h) is ad.Zero and no_stats:
        return [None] * len(args)
    x_aval = _aval(t_x)
    ct_y = ad.instantiate_zeros(ct_y) if type(ct_y) is not ad.Zero else jnp.zeros(h.shape, x_aval.dtype)
    ct_h = ad.instantiate_zeros(ct_h) if type(ct_h) is not ad.Zero else jnp.zeros(h.shape, h.dtype)
    p_avals = [_aval(t_gamma)] + ([_aval(t_beta)] if has_beta else [])
    # Parameters shared by every vmapped group get the sum over the groups,
    # formed from the float32 per-group sums.
    shared = batch_dims > 0 and any(a.ndim == 1 for a in p_avals)
    out_dtype = np.dtype(p_avals[0].dtype)
    if shared or any(a.dtype != out_dtype for a in p_avals) or out_dtype not in KERNEL_DTYPES:
        out_dtype = np.dtype(jnp.float32)
    d_sum, *d_params = add_norm_backward_p.bind(
        ct_y,
        ct_h,
        h,
        *stats,
        gamma,
        kind=kind,
        epsilon=epsilon,
        zero_centered=zero_centered,
        has_beta=has_beta,
        batch_dims=batch_dims,
        out_dtype=out_dtype,
    )
    if not no_stats:
        ct_s = [ad.instantiate_zeros(c) for c in ct_stats]
        extra = stats_cotangent_jnp(ct_s, h, stats, kind=kind)
        d_sum = (d_sum.astype(jnp.float32) + extra).astype(d_sum.dtype)

    def fit(v, aval):
        if v.ndim > aval.ndim:
            v = jnp.sum(v, axis=tuple(range(v.ndim - aval.ndim)))
        # Inside shard_map a parameter that is the same on every device gets
        # the sum of the per-device partial gradients (see _core.avals).
        return psum_to_match(v.astype(aval.dtype), aval)

    lin = [t_x, t_res, t_gamma] + ([t_beta] if has_beta else [])
    vals = [d_sum.astype(x_aval.dtype), d_sum] + list(d_params)
    out = []
    for i, (primal, v) in enumerate(zip(lin, vals)):
        if not ad.is_undefined_primal(primal):
            out.append(None)
        elif i < 2:
            out.append(psum_to_match(v, _aval(primal)))
        else:
            out.append(fit(v, _aval(primal)))
    return out + [None] * (len(args) - n_lin)


ad.primitive_jvps[add_norm_tangent_p] = _jvp
ad.primitive_transposes[add_norm_tangent_p] = _transpose


# ------------------------------------------------------------------ batching


def _batch(args, dims, *, kind, has_beta, **params):
    # Every output is per row (see _core.batching).
    kinds = (ROWS, ROWS) + (PARAM,) * (1 + bool(has_beta)) + (ROWS,) * (1 + num_stats(kind)) + (PARAM,)
    return row_wise_batcher(add_norm_tangent_p, kinds)(args, dims, kind=kind, has_beta=has_beta, **params)


batching.primitive_batchers[add_norm_tangent_p] = _batch
