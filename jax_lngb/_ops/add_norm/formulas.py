"""The fused residual add + norm in jax.numpy, shared by its primitives.

The lowering of every platform without a kernel, and the tangent rules (JAX
differentiates and transposes them like any jax.numpy code). They follow
the C++ kernels (cpp/kernels/add_norm.cc) operation for operation:

    h      = round_to(residual.dtype, float32(x) + float32(residual))
    g      = gamma, or 1 + gamma (formed in float32) when zero_centered
    y      = norm(h; g, beta)           (float32, rounded once to x's dtype)

so y is exactly the norm of the h that is returned, as `x + residual`
followed by the norm would give. The norm is LayerNorm's or RMSNorm's
formulas (`layer_norm.formulas`, `rms_norm.formulas`) on the float32 h; the
backward adds the cotangent of h to the norm's dx:

    d_x = d_residual = round_to(residual.dtype, dx_norm + float32(dh))

Layout as for the norms: row operands [*G, *rows, H], statistics
[*G, *rows] (float32), parameters [H] or [*G, H]. `stats` is (mean,
variance) for kind "layer" and (rstd,) for kind "rms"; `beta` is None when
the norm has no bias.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..layer_norm import formulas as ln
from ..layer_norm.formulas import expand_param
from ..rms_norm import formulas as rms

F32 = jnp.float32


def num_stats(kind: str) -> int:
    """How many per-row statistics the forward saves: (mean, variance) or (rstd,)."""
    return 2 if kind == "layer" else 1


def scale_of(gamma, zero_centered: bool):
    """The float32 scale the norm multiplies by: gamma, or 1 + gamma (the
    addition in float32, never rounded to gamma's dtype)."""
    g = gamma.astype(F32)
    return g + np.float32(1.0) if zero_centered else g


def add_jnp(x, residual):
    """h = x + residual, added in float32 and stored in residual's dtype."""
    return (x.astype(F32) + residual.astype(F32)).astype(residual.dtype)


def forward_jnp(x, residual, gamma, beta, *, kind: str, epsilon: float, zero_centered: bool, batch_dims: int = 0):
    """(y, h, *stats): y in x's dtype, h in residual's dtype, stats float32."""
    h = add_jnp(x, residual)
    h32 = h.astype(F32)
    g = scale_of(gamma, zero_centered)
    if kind == "layer":
        n = h.shape[-1]
        ref = ln.shift_of(h32)
        m = ref + jnp.sum(h32 - ref[..., None], -1) / np.float32(n)
        d = h32 - m[..., None]
        variance = jnp.sum(d * d, -1) / np.float32(n)
        mean = m + jnp.sum(d, -1) / np.float32(n)
        rstd = ln.rstd_of(variance, epsilon)[..., None]
        y = ((h32 - mean[..., None]) * rstd) * expand_param(g, h.ndim)
        stats = (mean, variance)
    else:
        y, rstd = rms.forward_jnp(h32, g, epsilon=epsilon)
        stats = (rstd,)
    if beta is not None:
        y = y + expand_param(beta, h.ndim)
    return (y.astype(x.dtype), h, *stats)


def backward_jnp(
    dy,
    dh,
    h,
    stats,
    gamma,
    *,
    kind: str,
    epsilon: float,
    zero_centered: bool,
    batch_dims: int,
    has_beta: bool,
    out_dtype,
):
    """(d_sum, pd_gamma[, pd_beta]): d_sum = the norm's dx + dh (residual's
    dtype), the parameter sums over the rows in float32, narrowed once."""
    h32 = h.astype(F32)
    g = scale_of(gamma, zero_centered)
    if kind == "layer":
        mean, variance = stats
        dx, res = ln.grad_jnp(dy, h32, variance, mean, g, epsilon=epsilon, res_dtype=F32)
    else:
        (rstd,) = stats
        dx, res = rms.grad_jnp(dy, h32, rstd, g, res_dtype=F32)
    d_sum = (dx + dh.astype(F32)).astype(h.dtype)
    rows = tuple(range(batch_dims, h.ndim - 1))
    d = dy.astype(F32)
    outs = [d_sum, jnp.sum(res * d, rows).astype(out_dtype)]
    if has_beta:
        outs.append(jnp.sum(d, rows).astype(out_dtype))
    return outs


def tangent_jnp(
    t_x,
    t_residual,
    t_gamma,
    t_beta,
    h,
    stats,
    gamma,
    *,
    kind: str,
    epsilon: float,
    zero_centered: bool,
    batch_dims: int = 0,
):
    """(t_y, t_h, *t_stats), linear in the tangents (t_beta may be None).

    The exact adjoint of backward_jnp: the norm's tangent (its own module's
    formulas, on the float32 h and scale) of t_h = t_x + t_residual."""
    t_h = add_jnp(t_x, t_residual)
    th32, h32 = t_h.astype(F32), h.astype(F32)
    g = scale_of(gamma, zero_centered)
    if kind == "layer":
        mean, variance = stats
        tb = jnp.zeros(t_gamma.shape, F32) if t_beta is None else t_beta
        t_y = ln.tangent_jnp(th32, t_gamma, tb, h32, variance, mean, g, epsilon=epsilon)
        t_stats = ln.stats_tangent_jnp(th32, h32, mean)
    else:
        (rstd,) = stats
        t_y = rms.tangent_jnp(th32, t_gamma, h32, rstd, g)
        if t_beta is not None:
            t_y = t_y + expand_param(t_beta, h.ndim)
        t_stats = (rms.rstd_tangent_jnp(th32, h32, rstd),)
    return (t_y.astype(t_x.dtype), t_h, *t_stats)


def stats_cotangent_jnp(ct_stats, h, stats, *, kind: str):
    """The float32 h cotangent of the saved statistics' cotangents."""
    if kind == "layer":
        return ln.stats_cotangent_jnp(ct_stats[0], ct_stats[1], h, stats[0])
    return rms.rstd_cotangent_jnp(ct_stats[0], h, stats[0])
