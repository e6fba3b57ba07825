"""The RMSNorm math in jax.numpy, shared by the RMSNorm primitives.

These are the lowering every non-CPU platform uses and the tangent rules of
the primitives (JAX differentiates and transposes them like any jax.numpy
code, which is what makes every order of derivative work). They compute in
float32 and follow the C++ kernels (cpp/kernels/rms_norm_rows.h) operation
for operation; only the association of the sums over H differs:

    rstd = 1 / sqrt(sum(x^2) * (1/H) + epsilon)       (CANN RmsNorm's order)
    y    = (x * rstd) * gamma
    x1   = dy * gamma,  s = sum(x1 * x),  a = (-(rstd^3) * s) * (1/H)
    dx   = a * x + x1 * rstd
    res_for_gamma = x * rstd,  pd_gamma = sum over rows of res_for_gamma * dy

Layout as for LayerNorm (`layer_norm.formulas`): row operands [*G, *rows, H], rstd
[*G, *rows] (float32), gamma [H] or [*G, H].
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..layer_norm.formulas import expand_param, scale_param

F32 = jnp.float32


def inv_h(h: int) -> np.float32:
    """1/H in float32 (CANN's reciprocalOfHLength); 1 for empty rows."""
    return np.float32(1.0) / np.float32(max(h, 1))


def forward_jnp(x, gamma, *, epsilon: float, batch_dims: int = 0, zero_centered_gamma: bool = False):
    """y (x's dtype) and the float32 rstd of each row."""
    x32 = x.astype(F32)
    ss = jnp.sum(x32 * x32, -1)
    rstd = 1.0 / jnp.sqrt(ss * inv_h(x.shape[-1]) + np.float32(epsilon))
    y = (x32 * rstd[..., None]) * scale_param(gamma, x.ndim, zero_centered_gamma)
    return y.astype(x.dtype), rstd


def grad_jnp(dy, x, rstd, gamma, *, batch_dims: int = 0, res_dtype=None, zero_centered_gamma: bool = False):
    """dx (x's dtype) and res_for_gamma = x * rstd (x's dtype, or res_dtype)."""
    x32 = x.astype(F32)
    r = rstd.astype(F32)[..., None]
    x1 = dy.astype(F32) * scale_param(gamma, x.ndim, zero_centered_gamma)
    s = jnp.sum(x1 * x32, -1, keepdims=True)
    a = (-(r * r * r) * s) * inv_h(x.shape[-1])
    dx = a * x32 + x1 * r
    res = x32 * r
    return dx.astype(x.dtype), res.astype(x.dtype if res_dtype is None else res_dtype)


def backward_jnp(dy, x, rstd, gamma, *, batch_dims: int, out_dtype, zero_centered_gamma: bool = False):
    """The fused backward: dx and pd_gamma [*G, H] (float32 sums, narrowed once)."""
    dx, res = grad_jnp(dy, x, rstd, gamma, res_dtype=F32, zero_centered_gamma=zero_centered_gamma)
    rows = tuple(range(batch_dims, x.ndim - 1))
    pd_gamma = jnp.sum(res * dy.astype(F32), rows)
    return dx, pd_gamma.astype(out_dtype)


def rstd_tangent_jnp(t_x, x, rstd):
    """The tangent of the saved rstd (linear in t_x): -(rstd^3) * (1/H) * sum(x * t_x)."""
    r = rstd.astype(F32)
    b = jnp.sum(x.astype(F32) * t_x.astype(F32), -1)
    return (-(r * r * r) * b) * inv_h(x.shape[-1])


def rstd_cotangent_jnp(ct_rstd, x, rstd):
    """The transpose of rstd_tangent_jnp: the t_x cotangent of ct_rstd (float32)."""
    r = rstd.astype(F32)
    c = (-(r * r * r) * ct_rstd.astype(F32)) * inv_h(x.shape[-1])
    return c[..., None] * x.astype(F32)


def tangent_jnp(t_x, t_gamma, x, rstd, gamma, *, batch_dims: int = 0, zero_centered_gamma: bool = False):
    """The JVP of the forward's y, written as the exact adjoint of grad_jnp /
    backward_jnp (so reverse and forward mode agree to rounding):
      B = sum(t_x * x),  t_y = gamma * (rstd * t_x + ((-(rstd^3) * B) * (1/H)) * x)
                               + (x * rstd) * t_gamma
    """
    x32 = x.astype(F32)
    r = rstd.astype(F32)[..., None]
    b = jnp.sum(t_x.astype(F32) * x32, -1, keepdims=True)
    a = (-(r * r * r) * b) * inv_h(x.shape[-1])
    g = scale_param(gamma, x.ndim, zero_centered_gamma)  # 1 + gamma when zero-centered
    t_y = g * (r * t_x.astype(F32) + a * x32) + (x32 * r) * expand_param(t_gamma, x.ndim)
    return t_y.astype(x.dtype)
