"""`layer_norm`: LayerNorm over the last axis, with native kernels for the
forward and for CANN's backward chain LayerNormGrad -> LayerNormGradBeta.

    y = (x - mean) / sqrt(var + epsilon) * gamma + beta

Statistics are float32 whatever the input dtype; y has x's dtype; the
gamma/beta gradients come back in gamma's/beta's dtype.

How it differentiates: `layer_norm_forward_p` computes y with the float32
mean and variance; its JVP is `layer_norm_tangent_p`, and reverse mode
transposes that into the backward:

  backward="fused"    `layer_norm_backward_p`: one pass over row blocks;
                      res_for_gamma stays in cache, in float32.
  backward="chained"  CANN's two public ops, `layer_norm_grad` then
                      `layer_norm_grad_beta`: res_for_gamma goes through
                      memory in x's dtype, as CANN's chain hands it over.

Both give the same dx, bit for bit; pd_gamma/pd_beta agree to float32
rounding (the two kernels may block the rows differently), plus, for 16-bit
activations, the rounding of the chained res_for_gamma to x's dtype. Because every
primitive has JVP rules (and the linear ones transpose rules), jax.jvp,
jax.linearize, jax.hessian and grad-of-grad work, as do vmap and jit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..._core.validate import check_choice, check_epsilon, check_kernel_dtype, check_rank, check_shape
from ..primitives import BACKWARDS, layer_norm_forward_p


def layer_norm(
    x: jax.typing.ArrayLike,
    gamma: jax.typing.ArrayLike,
    beta: jax.typing.ArrayLike,
    *,
    epsilon: float = 1e-5,
    backward: str = "fused",
) -> jax.Array:
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` over the last axis.

    Args:
      x: input of shape [..., H] (float32, float16 or bfloat16).
      gamma, beta: scale and shift of shape [H] (any of the same dtypes).
      epsilon: added to the variance; a static float >= 0.
      backward: "fused" (default) runs the backward as one kernel;
        "chained" runs CANN's chain of the two public primitives,
        `layer_norm_grad` then `layer_norm_grad_beta`.
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
    eps = check_epsilon(fn, epsilon)
    mode = check_choice(fn, "backward", backward, BACKWARDS)
    y, _, _ = layer_norm_forward_p.bind(x, gamma, beta, epsilon=eps, batch_dims=0, backward=mode)
    return y


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
