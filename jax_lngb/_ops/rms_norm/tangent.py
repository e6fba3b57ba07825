"""`rms_norm_tangent_p`: the JVP of RMSNorm, a map linear in (t_x, t_gamma)
whose transpose is the RMSNorm backward.

    t_y    = gamma * (rstd * t_x + ((-(rstd^3) * B) * (1/H)) * x) + (x * rstd) * t_gamma
    t_rstd = (-(rstd^3) * B) * (1/H),     B = sum(t_x * x)

t_rstd is the tangent of the forward's saved rstd, so nothing of the
tangent map is evaluated on the primal side of a linearization.

`rms_norm_forward_p`'s JVP binds it; JAX's reverse mode transposes it, and
the transpose rule runs the backward the forward was asked for: "fused"
(`rms_norm_backward_p`, one kernel: dx and dgamma, res_for_gamma never in
memory) or "chained" (`rms_norm_grad_p` for dx and res_for_gamma = x * rstd
in x's dtype, then `layer_norm_grad_beta_p` for dgamma, CANN's
LayerNormGradBeta on every platform it has a lowering for, the Ascend NPU
included). The tangent itself is evaluated only in forward mode, by its
jax.numpy formulas on every platform; its JVP differentiates them, so
higher orders work.
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
    check_kernel_dtype,
    check_param,
    check_row_stats,
    check_same_dtype,
    check_same_shape,
)
from ..primitives import (
    BACKWARDS,
    layer_norm_grad_beta_p,
    rms_norm_backward_p,
    rms_norm_grad_p,
    rms_norm_tangent_p,
)
from .formulas import rstd_cotangent_jnp, rstd_tangent_jnp, tangent_jnp

_KINDS = (ROWS, PARAM, ROWS, ROWS, PARAM)


def rms_norm_tangent_ref(t_x, t_gamma, x, rstd, gamma):
    """Oracle: the formulas above in float64 NumPy. Returns (t_y, t_rstd)."""
    f = lambda a: np.asarray(a, np.float64)
    tx, x64, r = f(t_x), f(x), f(rstd)[..., None]
    b = (tx * x64).sum(-1, keepdims=True)
    t_r = -(r**3) * b / x64.shape[-1]
    return f(gamma) * (r * tx + t_r * x64) + x64 * r * f(t_gamma), t_r[..., 0]


def _abstract_eval(t_x, t_gamma, x, rstd, gamma, *, batch_dims, backward, zero_centered_gamma=False):
    check_bool("rms_norm (tangent)", "zero_centered_gamma", zero_centered_gamma)
    # The kernel primitives' checks: its transpose binds them with these
    # operands, and a bad one must fail here, while tracing.
    fn = "rms_norm (tangent)"
    batch_dims = check_batch_dims(fn, batch_dims, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_same_shape(fn, "x", x.shape, "t_x", t_x.shape)
    check_same_dtype(fn, "x", x.dtype, "t_x", t_x.dtype)
    for name, p in (("t_gamma", t_gamma), ("gamma", gamma)):
        check_kernel_dtype(fn, name, p.dtype)
        check_param(fn, name, p.shape, x.shape, batch_dims)
    check_kernel_dtype(fn, "rstd", rstd.dtype)
    check_row_stats(fn, "rstd", rstd.shape, x.shape)
    check_choice(fn, "backward", backward, BACKWARDS)
    inputs = (t_x, t_gamma, rstd, gamma)
    t_y = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=inputs)
    t_rstd = derived_aval(x, x.shape[:-1], jnp.float32, range(x.ndim - 1), inputs=inputs)
    return t_y, t_rstd


rms_norm_tangent_p.def_abstract_eval(_abstract_eval)
rms_norm_tangent_p.def_impl(apply_impl(rms_norm_tangent_p))


def _tangent_jnp(t_x, t_gamma, x, rstd, gamma, *, batch_dims, backward, zero_centered_gamma=False):
    t_y = tangent_jnp(t_x, t_gamma, x, rstd, gamma, batch_dims=batch_dims, zero_centered_gamma=zero_centered_gamma)
    return [t_y, rstd_tangent_jnp(t_x, x, rstd)]


# Forward mode is a few elementwise ops and row sums: the jax.numpy formulas
# are the lowering on every platform.
mlir.register_lowering(rms_norm_tangent_p, mlir.lower_fun(_tangent_jnp, multiple_results=True))


# ------------------------------------------------------- JVP and transpose


def _jvp(primals, tangents, **params):
    out = rms_norm_tangent_p.bind(*primals, **params)
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    _, t_out = jax.jvp(functools.partial(_tangent_jnp, **params), tuple(primals), tuple(tangents))
    return out, t_out


def _aval(a):
    return a.aval if ad.is_undefined_primal(a) else jax.typeof(a)


def _transpose(cts, t_x, t_gamma, x, rstd, gamma, *, batch_dims, backward, zero_centered_gamma=False):
    """The RMSNorm backward: (dx, dgamma) from the cotangent of y (plus, when
    asked, the cotangent of the saved rstd)."""

    if any(ad.is_undefined_primal(a) for a in (x, rstd, gamma)):
        raise NotImplementedError("rms_norm_tangent is linear in (t_x, t_gamma) only")
    ct, ct_rstd = cts
    no_stats = type(ct_rstd) is ad.Zero
    if type(ct) is ad.Zero and no_stats:
        return [None] * 5
    ct = ad.instantiate_zeros(ct)
    g_aval = _aval(t_gamma)
    # A gamma shared by every vmapped group gets the sum over the groups,
    # formed from the float32 per-group sums.
    out_dtype = np.dtype(g_aval.dtype)
    if (batch_dims > 0 and g_aval.ndim == 1) or out_dtype not in KERNEL_DTYPES:
        out_dtype = np.dtype(jnp.float32)
    # Only a non-default flag reaches the kernel primitives' parameters.
    zc = {"zero_centered_gamma": True} if zero_centered_gamma else {}
    if backward == "fused":
        dx, pd_gamma = rms_norm_backward_p.bind(ct, x, rstd, gamma, batch_dims=batch_dims, out_dtype=out_dtype, **zc)
    else:
        dx, res = rms_norm_grad_p.bind(ct, x, rstd, gamma, batch_dims=batch_dims, **zc)
        pd_gamma, _ = layer_norm_grad_beta_p.bind(res, ct, out_dtype=out_dtype, batch_dims=batch_dims)

    if not no_stats:
        dx = (dx.astype(jnp.float32) + rstd_cotangent_jnp(ct_rstd, x, rstd)).astype(dx.dtype)

    def fit(v, aval):
        if v.ndim > aval.ndim:
            v = jnp.sum(v, axis=tuple(range(v.ndim - aval.ndim)))
        # Inside shard_map a gamma that is the same on every device gets the
        # sum of the per-device partial gradients (one psum, or none).
        return psum_to_match(v.astype(aval.dtype), aval)

    return [
        psum_to_match(dx, _aval(t_x)) if ad.is_undefined_primal(t_x) else None,
        fit(pd_gamma, g_aval) if ad.is_undefined_primal(t_gamma) else None,
        None,
        None,
        None,
    ]


ad.primitive_jvps[rms_norm_tangent_p] = _jvp
ad.primitive_transposes[rms_norm_tangent_p] = _transpose


# ------------------------------------------------------------------ batching


# t_y and t_rstd are per row: with gamma not mapped the mapped axis is more
# rows, and the transpose sums dgamma over all of them (see _core.batching).
batching.primitive_batchers[rms_norm_tangent_p] = row_wise_batcher(rms_norm_tangent_p, _KINDS)
