"""The LayerNorm math in jax.numpy, shared by the primitives.

These functions are the lowering every non-CPU platform uses, and the
tangent rules of the primitives (JAX differentiates and transposes them
like any jax.numpy code, which is what makes every order of derivative
work). They compute in float32 and follow the C++ kernels' formulas
operation for operation; only the association of the sums over H differs.

Layout, as in the kernels: row operands are [*G, *rows, H], statistics
[*G, *rows] (float32), parameters [H] or [*G, H], where the G leading axes
(``batch_dims`` of them) are independent problems added by vmap.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

F32 = jnp.float32


def expand_param(p: jax.Array, ndim: int) -> jax.Array:
    """[H] or [*G, H] (float32) broadcastable against an [*G, *rows, H] operand."""
    p = p.astype(F32)
    if p.ndim == 1:
        return p
    return p.reshape(p.shape[:-1] + (1,) * (ndim - p.ndim) + p.shape[-1:])


def scale_param(gamma: jax.Array, ndim: int, zero_centered: bool = False) -> jax.Array:
    """The scale the rows are multiplied by, as `expand_param` lays it out:
    gamma, or with zero_centered (Gemma, Megatron's layernorm1p) 1 + gamma,
    formed in float32 from the widened gamma (exact), never in gamma's dtype:
    1 + 2^-9 is 1 in bfloat16 but not in float32."""
    g = expand_param(gamma, ndim)
    return g + np.float32(1.0) if zero_centered else g


def kernel_gamma(gamma: jax.Array, zero_centered: bool) -> jax.Array:
    """gamma as the CPU kernels take it: float32, [H] or [*G, H].

    With zero_centered the kernels get 1 + gamma, added here in float32 on
    the [H] (or [*G, H]) parameter rather than in every kernel: widening is
    exact, so this is the same single float32 rounding a kernel would make
    (1.0f + gamma[c]), bit for bit, done once per call instead of once per
    row, and every kernel and ISA variant stays as it is."""
    g = gamma.astype(F32)
    return g + np.float32(1.0) if zero_centered else g


def _inv(h: int) -> tuple[np.float32, np.float32]:
    """1/H and 2/H, rounded to float32 as the kernels compute them."""
    fh = np.float32(max(h, 1))
    return np.float32(1.0) / fh, np.float32(2.0) / fh


def rstd_of(variance: jax.Array, epsilon: float) -> jax.Array:
    return 1.0 / jnp.sqrt(variance.astype(F32) + np.float32(epsilon))


def shift_of(x32: jax.Array) -> jax.Array:
    """The per-row value the mean is taken relative to, as the kernels pick it:
    the row's first element, or 0 where that is not finite (or H == 0)."""
    if x32.shape[-1] == 0:
        return jnp.zeros(x32.shape[:-1], F32)
    ref = x32[..., 0]
    return jnp.where(jnp.isfinite(ref), ref, jnp.zeros_like(ref))


def forward_jnp(x, gamma, beta, *, epsilon: float, batch_dims: int = 0, zero_centered_gamma: bool = False):
    """y, mean, variance (two passes; variance biased).

    The mean is shifted and refined as in the C++ kernels: m = ref +
    sum(x - ref) / H with ref = shift_of(x) (for rows far from zero the
    differences sum without the rounding of large partial sums), then the
    second pass gives variance = sum(d^2) / H and mean = m + sum(d) / H for
    d = x - m (which undoes the shifted sum's rounding for rows near zero).
    Only the association of the sums differs from the kernels.
    """
    h = x.shape[-1]
    x32 = x.astype(F32)
    ref = shift_of(x32)
    m = ref + jnp.sum(x32 - ref[..., None], -1) / np.float32(h)
    d = x32 - m[..., None]
    variance = jnp.sum(d * d, -1) / np.float32(h)
    mean = m + jnp.sum(d, -1) / np.float32(h)
    rstd = rstd_of(variance, epsilon)[..., None]
    y = ((x32 - mean[..., None]) * rstd) * scale_param(gamma, x.ndim, zero_centered_gamma)
    if beta is not None:
        y = y + expand_param(beta, x.ndim)
    return y.astype(x.dtype), mean, variance


def stats_tangent_jnp(t_x, x, mean):
    """Tangents of the forward's mean and variance (linear in t_x):
    t_mean = mean(t_x), t_var = (2/H) sum((x - mean) * (t_x - t_mean))."""
    h = x.shape[-1]
    tx = t_x.astype(F32)
    t_mean = jnp.sum(tx, -1) / np.float32(h)
    x2 = x.astype(F32) - mean.astype(F32)[..., None]
    t_var = jnp.sum(x2 * (tx - t_mean[..., None]), -1) * _inv(h)[1]
    return t_mean, t_var


def stats_cotangent_jnp(ct_mean, ct_var, x, mean):
    """The transpose of stats_tangent_jnp: the t_x cotangent of (ct_mean, ct_var)."""
    inv_h, two_h = _inv(x.shape[-1])
    x2 = x.astype(F32) - mean.astype(F32)[..., None]
    s2 = jnp.sum(x2, -1, keepdims=True)
    cv = ct_var.astype(F32)[..., None]
    return ct_mean.astype(F32)[..., None] * inv_h + two_h * cv * (x2 - s2 * inv_h)


def grad_jnp(
    dy,
    x,
    variance,
    mean,
    gamma,
    *,
    epsilon: float,
    batch_dims: int = 0,
    res_dtype=None,
    zero_centered_gamma: bool = False,
):
    """CANN LayerNormGrad (SPEC section 3): pd_x (x's dtype), res_for_gamma.

    The per-row constants are taken out of the sums:
      pd_var  = -0.5 * rstd^3 * sum(x1 * x2)
      pd_mean = -rstd * sum(x1) + pd_var * (1/H) * (-2 * sum(x2))
    """
    inv_h, two_h = _inv(x.shape[-1])
    x1 = dy.astype(F32) * scale_param(gamma, x.ndim, zero_centered_gamma)
    x2 = x.astype(F32) - mean.astype(F32)[..., None]
    rstd = rstd_of(variance, epsilon)[..., None]
    s12 = jnp.sum(x1 * x2, -1, keepdims=True)
    s1 = jnp.sum(x1, -1, keepdims=True)
    s2 = jnp.sum(x2, -1, keepdims=True)
    pd_var = (-0.5 * (rstd * rstd * rstd)) * s12
    pd_mean = (-rstd) * s1 + (pd_var * inv_h) * (-2.0 * s2)
    pd_x = ((pd_var * two_h) * x2 + pd_mean * inv_h) + x1 * rstd
    res = x2 * rstd
    return pd_x.astype(x.dtype), res.astype(x.dtype if res_dtype is None else res_dtype)


def backward_jnp(
    dy,
    x,
    variance,
    mean,
    gamma,
    *,
    epsilon: float,
    batch_dims: int,
    out_dtype,
    zero_centered_gamma: bool = False,
    has_beta: bool = True,
):
    """The fused backward: LayerNormGrad, then LayerNormGradBeta of its
    float32 res_for_gamma: dx, pd_gamma [*G, H], and pd_beta [*G, H] when
    has_beta (with no beta there is no sum of dy to form)."""
    pd_x, res = grad_jnp(
        dy, x, variance, mean, gamma, epsilon=epsilon, res_dtype=F32, zero_centered_gamma=zero_centered_gamma
    )
    rows = tuple(range(batch_dims, x.ndim - 1))
    d = dy.astype(F32)
    pd_gamma = jnp.sum(res * d, rows)
    if not has_beta:
        return pd_x, pd_gamma.astype(out_dtype)
    pd_beta = jnp.sum(d, rows)
    return pd_x, pd_gamma.astype(out_dtype), pd_beta.astype(out_dtype)


def tangent_jnp(
    t_x, t_gamma, t_beta, x, variance, mean, gamma, *, epsilon: float, batch_dims: int = 0, zero_centered_gamma=False
):
    """The JVP of the forward's y: t_y for tangents (t_x, t_gamma, t_beta).

    Written as the exact adjoint of the backward formulas (grad_jnp /
    backward_jnp are its transpose), including the sum(x - mean) term that
    vanishes when mean is the exact row mean; it is then also the exact
    derivative of forward_jnp:
      A = mean(t_x),  B = (2/H) sum(t_x * x2) - (2/H) sum(x2) * A
      t_y = gamma * (rstd * t_x - rstd * A - 0.5 * rstd^3 * x2 * B)
            + x2 * rstd * t_gamma + t_beta
    with 1 + gamma for gamma when zero_centered_gamma (its derivative is
    still t_gamma), and no t_beta term when t_beta is None (no beta).
    """
    inv_h, two_h = _inv(x.shape[-1])
    tx = t_x.astype(F32)
    x2 = x.astype(F32) - mean.astype(F32)[..., None]
    rstd = rstd_of(variance, epsilon)[..., None]
    a = jnp.sum(tx, -1, keepdims=True) * inv_h
    s2 = jnp.sum(x2, -1, keepdims=True)
    b = jnp.sum(tx * x2, -1, keepdims=True) * two_h - (s2 * two_h) * a
    g = scale_param(gamma, x.ndim, zero_centered_gamma)
    t_y = g * (rstd * tx - rstd * a - (0.5 * (rstd * rstd * rstd)) * x2 * b)
    t_y = t_y + (x2 * rstd) * expand_param(t_gamma, x.ndim)
    if t_beta is not None:
        t_y = t_y + expand_param(t_beta, x.ndim)
    return t_y.astype(x.dtype)
