"""`layer_norm`: LayerNorm over the last axis, with native kernels for the
forward and for CANN's backward chain LayerNormGrad -> LayerNormGradBeta.

    y = (x - mean) / sqrt(var + epsilon) * gamma + beta

or, with zero_centered_gamma=True (Gemma, Megatron's layernorm1p: gamma
initialised to zero), * (1 + gamma), formed in float32; with beta=None, no
bias (none is read, and no beta gradient is formed).

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

from ..._core.validate import check_bool, check_choice, check_epsilon, check_kernel_dtype, check_rank, check_shape
from ..primitives import BACKWARDS, layer_norm_forward_p


def layer_norm(
    x: jax.typing.ArrayLike,
    gamma: jax.typing.ArrayLike,
    beta: jax.typing.ArrayLike | None,
    *,
    epsilon: float = 1e-5,
    backward: str = "fused",
    zero_centered_gamma: bool = False,
) -> jax.Array:
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` over the last axis.

    Args:
      x: input of shape [..., H] (float32, float16 or bfloat16).
      gamma, beta: scale and shift of shape [H] (any of the same dtypes).
        beta may be None: no bias, and no beta gradient.
      epsilon: added to the variance; a static float >= 0.
      backward: "fused" (default) runs the backward as one kernel;
        "chained" runs CANN's chain of the two public primitives,
        `layer_norm_grad` then `layer_norm_grad_beta`.
      zero_centered_gamma: scale by ``1 + gamma`` instead of ``gamma``, with
        the sum formed in float32 (a bfloat16 gamma of 2^-9 still scales by
        1 + 2^-9). The gamma gradient is the same sum as without it.
    """
    fn = "layer_norm"
    zc = check_bool(fn, "zero_centered_gamma", zero_centered_gamma)
    x, gamma = jnp.asarray(x), jnp.asarray(gamma)
    check_rank(fn, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_kernel_dtype(fn, "gamma", gamma.dtype)
    h = x.shape[-1]
    check_shape(fn, "gamma", gamma.shape, (h,), "[H], H = x.shape[-1]")
    params = (gamma,)
    if beta is not None:
        beta = jnp.asarray(beta)
        check_kernel_dtype(fn, "beta", beta.dtype)
        check_shape(fn, "beta", beta.shape, (h,), "[H], H = x.shape[-1]")
        params = (gamma, beta)
    eps = check_epsilon(fn, epsilon)
    mode = check_choice(fn, "backward", backward, BACKWARDS)
    y, _, _ = layer_norm_forward_p.bind(
        x, *params, epsilon=eps, batch_dims=0, backward=mode, zero_centered_gamma=zc, has_beta=beta is not None
    )
    return y


def layer_norm_ref(x, gamma, beta, *, epsilon: float = 1e-5, zero_centered_gamma: bool = False) -> np.ndarray:
    """Oracle: float64 NumPy LayerNorm (beta may be None)."""
    x64 = np.asarray(x, np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    scale = np.asarray(gamma, np.float64) + (1.0 if zero_centered_gamma else 0.0)
    y = (x64 - mean) / np.sqrt(var + epsilon) * scale
    return y if beta is None else y + np.asarray(beta, np.float64)


def layer_norm_jnp(x, gamma, beta, *, epsilon: float = 1e-5, zero_centered_gamma: bool = False) -> jax.Array:
    """Plain jax.numpy LayerNorm (float32 statistics): what XLA autodiff sees."""
    x32 = x.astype(jnp.float32)
    mean = jnp.mean(x32, -1, keepdims=True)
    var = jnp.mean(jnp.square(x32 - mean), -1, keepdims=True)
    scale = gamma.astype(jnp.float32)
    if zero_centered_gamma:
        scale = scale + 1.0
    y = (x32 - mean) * jax.lax.rsqrt(var + epsilon) * scale
    if beta is not None:
        y = y + beta.astype(jnp.float32)
    return y.astype(x.dtype)
