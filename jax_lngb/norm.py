"""`layer_norm`: LayerNorm over the last axis whose VJP runs CANN's backward
chain, LayerNormGrad -> LayerNormGradBeta, with the gamma/beta gradients
computed by `layer_norm_grad_beta_p`.

Statistics are float32 whatever the input dtype; the output has x's dtype;
the gamma/beta gradients come back in gamma's/beta's dtype.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import check_epsilon, check_kernel_dtype, check_rank, check_shape
from .grad_beta import layer_norm_grad_beta_p


def layer_norm(
    x: jax.typing.ArrayLike,
    gamma: jax.typing.ArrayLike,
    beta: jax.typing.ArrayLike,
    *,
    epsilon: float = 1e-5,
) -> jax.Array:
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` over the last axis.

    Args:
      x: input of shape [..., H] (float32, float16 or bfloat16).
      gamma, beta: scale and shift of shape [H] (any of the same dtypes).
      epsilon: added to the variance; a static float >= 0.
    """
    x, gamma, beta = jnp.asarray(x), jnp.asarray(gamma), jnp.asarray(beta)
    fn = "layer_norm"
    check_rank(fn, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_kernel_dtype(fn, "gamma", gamma.dtype)
    check_kernel_dtype(fn, "beta", beta.dtype)
    h = x.shape[-1]
    check_shape(fn, "gamma", gamma.shape, (h,), "[H], H = x.shape[-1]")
    check_shape(fn, "beta", beta.shape, (h,), "[H], H = x.shape[-1]")
    return _layer_norm(x, gamma, beta, check_epsilon(fn, epsilon))


def layer_norm_ref(x, gamma, beta, *, epsilon: float = 1e-5) -> np.ndarray:
    """Oracle: float64 NumPy LayerNorm."""
    x64 = np.asarray(x, np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    return (x64 - mean) / np.sqrt(var + epsilon) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)


def layer_norm_jnp(x, gamma, beta, *, epsilon: float = 1e-5) -> jax.Array:
    """Plain jax.numpy LayerNorm (float32 statistics): what XLA autodiff sees."""
    x32 = x.astype(jnp.float32)
    mean = jnp.mean(x32, -1, keepdims=True)
    var = jnp.mean(jnp.square(x32 - mean), -1, keepdims=True)
    y = (x32 - mean) * jax.lax.rsqrt(var + epsilon) * gamma.astype(jnp.float32) + beta.astype(jnp.float32)
    return y.astype(x.dtype)


# --------------------------------------------------------------- forward


def _statistics(x):
    """float32 mean and (biased) variance over the last axis, two-pass."""
    x32 = x.astype(jnp.float32)
    mean = jnp.mean(x32, -1)
    var = jnp.mean(jnp.square(x32 - mean[..., None]), -1)
    return mean, var


def _forward(x, gamma, beta, epsilon):
    mean, var = _statistics(x)
    rstd = jax.lax.rsqrt(var + epsilon)
    y = (x.astype(jnp.float32) - mean[..., None]) * rstd[..., None]
    y = y * gamma.astype(jnp.float32) + beta.astype(jnp.float32)
    return y.astype(x.dtype), mean, var


# -------------------------------------------------------------- backward


def layer_norm_grad_jnp(dy, x, variance, mean, gamma, *, epsilon: float):
    """CANN LayerNormGrad (SPEC section 3) in jax.numpy, float32 compute.

    Returns (pd_x in x's dtype, res_for_gamma in float32).
    """
    h = x.shape[-1]
    f32 = jnp.float32
    x1 = dy.astype(f32) * gamma.astype(f32)
    x2 = x.astype(f32) - mean[..., None]
    rstd = jax.lax.rsqrt(variance + epsilon)[..., None]
    res_for_gamma = x2 * rstd
    pd_var = jnp.sum(-0.5 * x1 * x2 * rstd**3, -1, keepdims=True)
    x3 = x1 * rstd
    pd_mean = jnp.sum(-x3, -1, keepdims=True) + pd_var * (1.0 / h) * jnp.sum(-2.0 * x2, -1, keepdims=True)
    pd_x = pd_var * (2.0 / h) * x2 + pd_mean * (1.0 / h) + x3
    return pd_x.astype(x.dtype), res_for_gamma


def _param_grads(res_for_gamma, dy, gamma_dtype, beta_dtype):
    """pd_gamma, pd_beta from the primitive, in the parameters' dtypes.

    res_for_gamma is handed over in dy's dtype, as CANN's LayerNormGrad
    produces it; the sums are float32 and narrowed once.
    """
    same = np.dtype(gamma_dtype) == np.dtype(beta_dtype)
    out = gamma_dtype if same else jnp.float32
    pd_gamma, pd_beta = layer_norm_grad_beta_p.bind(
        res_for_gamma.astype(dy.dtype), dy, out_dtype=np.dtype(out), batch_dims=0
    )
    return pd_gamma.astype(gamma_dtype), pd_beta.astype(beta_dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _layer_norm(x, gamma, beta, epsilon):
    return _forward(x, gamma, beta, epsilon)[0]


def _layer_norm_fwd(x, gamma, beta, epsilon):
    y, mean, var = _forward(x, gamma, beta, epsilon)
    return y, (x, gamma, beta, mean, var)


def _layer_norm_bwd(epsilon, residuals, dy):
    x, gamma, beta, mean, var = residuals
    pd_x, res_for_gamma = layer_norm_grad_jnp(dy, x, var, mean, gamma, epsilon=epsilon)
    pd_gamma, pd_beta = _param_grads(res_for_gamma, dy, gamma.dtype, beta.dtype)
    return pd_x, pd_gamma, pd_beta


_layer_norm.defvjp(_layer_norm_fwd, _layer_norm_bwd)
