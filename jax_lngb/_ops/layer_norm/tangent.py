"""`layer_norm_tangent_p`: the JVP of LayerNorm, a map linear in
(t_x, t_gamma, t_beta) whose transpose is the LayerNorm backward.

    t_y = gamma * (rstd * t_x - rstd * A - 0.5 * rstd^3 * (x - mean) * B)
          + (x - mean) * rstd * t_gamma + t_beta
    A = mean(t_x),   B = (2/H) sum(t_x * (x - mean)) - (2/H) sum(x - mean) * A

and the tangents of the forward's saved statistics, t_mean = A and
t_var = (2/H) sum((x - mean) * (t_x - A)), so that nothing of the tangent
map is evaluated on the primal side of a linearization.

`layer_norm_forward_p`'s JVP binds it; JAX's reverse mode transposes it,
and the transpose rule runs the backward the forward was asked for:
"fused" (`layer_norm_backward_p`, one kernel) or "chained" (CANN's two
public ops, `layer_norm_grad_p` then `layer_norm_grad_beta_p`). It is
evaluated only in forward mode (jax.jvp, jax.linearize), by its jax.numpy
formulas on every platform; its JVP differentiates those formulas, so
higher orders work.

The formulas are the exact adjoint of LayerNormGrad's, so forward and
reverse mode agree to rounding, and are the exact derivative of the
forward's mean/variance/normalize formulas.

The forward's zero_centered_gamma and has_beta parameters come along: with
zero_centered_gamma the gamma above is 1 + gamma (t_gamma unchanged); with
has_beta=False there is no t_beta operand (operands t_x, t_gamma, x,
variance, mean, gamma) and the transpose computes no pd_beta.
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
    check_bool,
    check_choice,
    check_epsilon,
    check_kernel_dtype,
    check_param,
    check_row_stats,
    check_same_dtype,
    check_same_shape,
)
from ..primitives import (
    BACKWARDS,
    layer_norm_backward_p,
    layer_norm_grad_beta_p,
    layer_norm_grad_p,
    layer_norm_tangent_p,
)
from .formulas import stats_cotangent_jnp, stats_tangent_jnp, tangent_jnp


def _kinds(has_beta):
    return (ROWS, PARAM) + ((PARAM,) if has_beta else ()) + (ROWS, ROWS, ROWS, PARAM)


def _split(args, has_beta):
    """(t_x, t_gamma, t_beta or None, x, variance, mean, gamma)."""
    if len(args) != 6 + bool(has_beta):
        raise TypeError(f"layer_norm (tangent): {len(args)} operands for has_beta={has_beta}")
    return tuple(args) if has_beta else (*args[:2], None, *args[2:])


def layer_norm_tangent_ref(
    t_x, t_gamma, t_beta, x, variance, mean, gamma, *, epsilon: float = 1e-5, zero_centered_gamma: bool = False
):
    """Oracle: the formulas above in float64 NumPy (t_beta may be None).
    Returns (t_y, t_mean, t_var)."""
    f = lambda a: np.asarray(a, np.float64)
    tx, x2 = f(t_x), f(x) - f(mean)[..., None]
    h = x2.shape[-1]
    rstd = 1.0 / np.sqrt(f(variance)[..., None] + epsilon)
    a = tx.mean(-1, keepdims=True)
    b = (2.0 / h) * (tx * x2).sum(-1, keepdims=True) - (2.0 / h) * x2.sum(-1, keepdims=True) * a
    scale = f(gamma) + (1.0 if zero_centered_gamma else 0.0)
    t_y = scale * (rstd * tx - rstd * a - 0.5 * rstd**3 * x2 * b) + x2 * rstd * f(t_gamma)
    if t_beta is not None:
        t_y = t_y + f(t_beta)
    t_var = (2.0 / h) * (x2 * (tx - a)).sum(-1)
    return t_y, a[..., 0], t_var


def _abstract_eval(*args, epsilon, batch_dims, backward, zero_centered_gamma=False, has_beta=True):
    # The same checks as the kernel primitives: its transpose binds them
    # with these operands, and a bad one must fail here, while tracing.
    fn = "layer_norm (tangent)"
    check_bool(fn, "zero_centered_gamma", zero_centered_gamma)
    check_bool(fn, "has_beta", has_beta)
    t_x, t_gamma, t_beta, x, variance, mean, gamma = _split(args, has_beta)
    batch_dims = check_batch_dims(fn, batch_dims, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_same_shape(fn, "x", x.shape, "t_x", t_x.shape)
    check_same_dtype(fn, "x", x.dtype, "t_x", t_x.dtype)
    params = (("t_gamma", t_gamma), ("t_beta", t_beta), ("gamma", gamma))
    for name, p in (q for q in params if q[1] is not None):
        check_kernel_dtype(fn, name, p.dtype)
        check_param(fn, name, p.shape, x.shape, batch_dims)
    for name, s in (("variance", variance), ("mean", mean)):
        check_kernel_dtype(fn, name, s.dtype)
        check_row_stats(fn, name, s.shape, x.shape)
    check_epsilon(fn, epsilon)
    check_choice(fn, "backward", backward, BACKWARDS)
    inputs = tuple(a for a in (t_x, t_gamma, t_beta, variance, mean, gamma) if a is not None)
    t_y = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=inputs)
    stats = derived_aval(x, x.shape[:-1], jnp.float32, range(x.ndim - 1), inputs=inputs)
    return t_y, stats, stats


layer_norm_tangent_p.def_abstract_eval(_abstract_eval)
layer_norm_tangent_p.def_impl(apply_impl(layer_norm_tangent_p))


def _tangent_jnp(*args, epsilon, batch_dims, backward, zero_centered_gamma=False, has_beta=True):
    t_x, t_gamma, t_beta, x, variance, mean, gamma = _split(args, has_beta)
    t_y = tangent_jnp(
        t_x,
        t_gamma,
        t_beta,
        x,
        variance,
        mean,
        gamma,
        epsilon=epsilon,
        batch_dims=batch_dims,
        zero_centered_gamma=zero_centered_gamma,
    )
    return [t_y, *stats_tangent_jnp(t_x, x, mean)]


# Forward mode is a few elementwise ops and row sums: the jax.numpy formulas
# are the lowering on every platform.
mlir.register_lowering(layer_norm_tangent_p, mlir.lower_fun(_tangent_jnp, multiple_results=True))


# ------------------------------------------------------- JVP and transpose


def _jvp(primals, tangents, **params):
    out = layer_norm_tangent_p.bind(*primals, **params)
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    _, t_out = jax.jvp(functools.partial(_tangent_jnp, **params), tuple(primals), tuple(tangents))
    return out, t_out


def _aval(a):
    return a.aval if ad.is_undefined_primal(a) else jax.typeof(a)


def _transpose(cts, *args, epsilon, batch_dims, backward, zero_centered_gamma=False, has_beta=True):
    """The LayerNorm backward: (dx, dgamma, dbeta) from the cotangent of y
    (plus, when asked, the cotangents of the saved mean and variance); with
    has_beta=False, (dx, dgamma) and no sum for a beta there is not."""
    t_x, t_gamma, t_beta, x, variance, mean, gamma = _split(args, has_beta)
    n = len(args)

    if any(ad.is_undefined_primal(a) for a in (x, variance, mean, gamma)):
        raise NotImplementedError("layer_norm_tangent is linear in (t_x, t_gamma, t_beta) only")
    ct, ct_mean, ct_var = cts
    no_stats = type(ct_mean) is ad.Zero and type(ct_var) is ad.Zero
    if type(ct) is ad.Zero and no_stats:
        return [None] * n
    ct = ad.instantiate_zeros(ct)
    g_aval = _aval(t_gamma)
    b_aval = _aval(t_beta) if has_beta else g_aval
    # Parameters shared by every vmapped group get the sum over the groups,
    # formed from the float32 per-group sums.
    shared = batch_dims > 0 and (g_aval.ndim == 1 or b_aval.ndim == 1)
    out_dtype = np.dtype(g_aval.dtype)
    if shared or g_aval.dtype != b_aval.dtype or out_dtype not in KERNEL_DTYPES:
        out_dtype = np.dtype(jnp.float32)
    # Only a non-default flag reaches the kernel primitives' parameters, so
    # the default case binds exactly what it always did.
    zc = {"zero_centered_gamma": True} if zero_centered_gamma else {}
    pd_beta = None
    if backward == "fused":
        outs = layer_norm_backward_p.bind(
            ct,
            x,
            variance,
            mean,
            gamma,
            epsilon=epsilon,
            batch_dims=batch_dims,
            out_dtype=out_dtype,
            **zc,
            **({} if has_beta else {"has_beta": False}),
        )
        dx, pd_gamma = outs[:2]
        if has_beta:
            pd_beta = outs[2]
    else:
        dx, res = layer_norm_grad_p.bind(ct, x, variance, mean, gamma, epsilon=epsilon, batch_dims=batch_dims, **zc)
        # CANN's LayerNormGradBeta always forms both sums; without a beta
        # its pd_beta is dropped.
        pd_gamma, pd_beta = layer_norm_grad_beta_p.bind(res, ct, out_dtype=out_dtype, batch_dims=batch_dims)

    if not no_stats:
        ct_x = stats_cotangent_jnp(ad.instantiate_zeros(ct_mean), ad.instantiate_zeros(ct_var), x, mean)
        dx = (dx.astype(jnp.float32) + ct_x).astype(dx.dtype)

    def fit(v, aval):
        if v.ndim > aval.ndim:
            v = jnp.sum(v, axis=tuple(range(v.ndim - aval.ndim)))
        # Inside shard_map a parameter that is the same on every device
        # (invariant) gets the sum of the per-device partial gradients: one
        # psum over the manual axes the rows vary over (none elsewhere).
        return psum_to_match(v.astype(aval.dtype), aval)

    cts_in = [
        psum_to_match(dx, _aval(t_x)) if ad.is_undefined_primal(t_x) else None,
        fit(pd_gamma, g_aval) if ad.is_undefined_primal(t_gamma) else None,
    ]
    if has_beta:
        cts_in.append(fit(pd_beta, b_aval) if ad.is_undefined_primal(t_beta) else None)
    return cts_in + [None] * 4


ad.primitive_jvps[layer_norm_tangent_p] = _jvp
ad.primitive_transposes[layer_norm_tangent_p] = _transpose


# ------------------------------------------------------------------ batching


# Every output is per row: with the parameters shared (not mapped), the
# mapped axis is more rows of the same problem (see _core.batching).
_batchers = {hb: row_wise_batcher(layer_norm_tangent_p, _kinds(hb)) for hb in (True, False)}


def _batch(args, dims, **params):
    return _batchers[bool(params.get("has_beta", True))](args, dims, **params)


batching.primitive_batchers[layer_norm_tangent_p] = _batch
