"""`add_layer_norm` and `add_rms_norm`: the pre-norm transformer block's

    h = x + residual
    y = norm(h)

as one kernel that reads x and residual once and writes h, y and the
statistics. h is added in float32 and stored in residual's dtype (a float32
residual stream with bfloat16 activations keeps its precision); y is the
norm of that stored h, in x's dtype; statistics are float32.

    zero_centered_gamma=True   the scale is 1 + gamma, formed in float32
                               inside the kernel (gamma near zero keeps
                               its precision in 16-bit dtypes)
    beta=None                  no bias is read and no beta gradient formed

The backward is one kernel too: d_x = d_residual = the norm's dx plus the
cotangent of h, written once, with the gamma (and beta) sums in float32
partials per row block, combined in block order (no thread count changes a
bit). jit, grad (every order), vmap and sharding work as for `layer_norm`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..._core.validate import check_epsilon, check_kernel_dtype, check_rank, check_same_shape, check_shape
from ..primitives import add_norm_forward_p

__all__ = ["add_layer_norm", "add_layer_norm_ref", "add_rms_norm", "add_rms_norm_ref"]


def _check_bool(fn: str, name: str, v) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{fn}: {name} must be a bool; got {type(v).__name__} {v!r}")
    return bool(v)


def _bind(fn, kind, x, residual, gamma, beta, epsilon, zero_centered_gamma):
    x, residual, gamma = jnp.asarray(x), jnp.asarray(residual), jnp.asarray(gamma)
    check_rank(fn, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_kernel_dtype(fn, "residual", residual.dtype)
    check_same_shape(fn, "x", x.shape, "residual", residual.shape)
    check_kernel_dtype(fn, "gamma", gamma.dtype)
    h = x.shape[-1]
    check_shape(fn, "gamma", gamma.shape, (h,), "[H], H = x.shape[-1]")
    params = [gamma]
    if beta is not None:
        beta = jnp.asarray(beta)
        check_kernel_dtype(fn, "beta", beta.dtype)
        check_shape(fn, "beta", beta.shape, (h,), "[H], H = x.shape[-1]")
        params.append(beta)
    eps = check_epsilon(fn, epsilon)
    zc = _check_bool(fn, "zero_centered_gamma", zero_centered_gamma)
    y, h_out, *_ = add_norm_forward_p.bind(
        x, residual, *params, kind=kind, epsilon=eps, zero_centered=zc, has_beta=beta is not None, batch_dims=0
    )
    return y, h_out


def add_layer_norm(
    x: jax.typing.ArrayLike,
    residual: jax.typing.ArrayLike,
    gamma: jax.typing.ArrayLike,
    beta: jax.typing.ArrayLike | None = None,
    *,
    epsilon: float = 1e-5,
    zero_centered_gamma: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """``h = x + residual``; ``y = (h - mean) / sqrt(var + epsilon) * gamma (+ beta)``.

    Args:
      x: input of shape [..., H] (float32, float16 or bfloat16).
      residual: the residual stream, x's shape, any of those dtypes.
      gamma: scale [H]; with zero_centered_gamma the scale is 1 + gamma.
      beta: shift [H], or None for a bias-free LayerNorm.
      epsilon: added to the variance; a static float >= 0.

    Returns:
      (y, h): y in x's dtype, h in residual's dtype.
    """
    return _bind("add_layer_norm", "layer", x, residual, gamma, beta, epsilon, zero_centered_gamma)


def add_rms_norm(
    x: jax.typing.ArrayLike,
    residual: jax.typing.ArrayLike,
    gamma: jax.typing.ArrayLike,
    *,
    epsilon: float = 1e-6,
    zero_centered_gamma: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """``h = x + residual``; ``y = h / sqrt(mean(h^2) + epsilon) * gamma``.

    Arguments and results as for `add_layer_norm` (no beta).
    """
    return _bind("add_rms_norm", "rms", x, residual, gamma, None, epsilon, zero_centered_gamma)


def _ref(kind, x, residual, gamma, beta, epsilon, zero_centered_gamma):
    r_dtype = np.asarray(residual).dtype
    # h as the primitive stores it (rounded to residual's dtype); the norm of
    # that h in float64.
    h = (np.asarray(x, np.float64) + np.asarray(residual, np.float64)).astype(r_dtype)
    h64 = h.astype(np.float64)
    if kind == "layer":
        xc = h64 - h64.mean(-1, keepdims=True)
    else:
        xc = h64
    y = xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + epsilon)
    y = y * (np.asarray(gamma, np.float64) + (1.0 if zero_centered_gamma else 0.0))
    if beta is not None:
        y = y + np.asarray(beta, np.float64)
    return y, h


def add_layer_norm_ref(x, residual, gamma, beta=None, *, epsilon: float = 1e-5, zero_centered_gamma: bool = False):
    """Oracle: float64 NumPy (y, h); h is x + residual rounded to residual's
    dtype (what `add_layer_norm` stores), y the float64 LayerNorm of it."""
    return _ref("layer", x, residual, gamma, beta, epsilon, zero_centered_gamma)


def add_rms_norm_ref(x, residual, gamma, *, epsilon: float = 1e-6, zero_centered_gamma: bool = False):
    """Oracle: float64 NumPy (y, h), as `add_layer_norm_ref` for RMSNorm."""
    return _ref("rms", x, residual, gamma, None, epsilon, zero_centered_gamma)
