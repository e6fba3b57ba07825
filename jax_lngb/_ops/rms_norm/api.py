"""`rms_norm`: RMSNorm over the last axis (LLaMA-style models), with native
kernels for the forward and for the backward, whose gamma gradient is
LayerNormGradBeta's pd_gamma with res_for_gamma = x * rstd.

    y = x * rstd * gamma,   rstd = 1 / sqrt(mean(x^2) + epsilon)

CANN's RmsNorm semantics (asc-devkit `RmsNorm`, ops-nn `RmsNormGrad`):
statistics in float32 whatever the input dtype, the mean of squares formed
as the sum times the float32 1/H, epsilon added to it, y = (x * rstd) *
gamma in float32 and rounded once to x's dtype; rstd (float32, one per row)
is what the backward reuses. Two differences: epsilon is added in float32
(CANN passes it in the input dtype, so a float16 epsilon is rounded to
float16 first), and rstd is 1/sqrt (CANN's vector unit uses exp(-0.5 ln)).
dgamma comes back in gamma's dtype (CANN's RmsNormGrad always returns
float32): the float32 sums are narrowed once.

How it differentiates: `rms_norm_forward_p` computes y and rstd; its JVP is
`rms_norm_tangent_p`, and reverse mode transposes that into the backward:

  backward="fused"    `rms_norm_backward_p`: one pass over row blocks; dx is
                      written and res_for_gamma = x * rstd goes, in float32
                      and straight from registers, into LayerNormGradBeta's
                      reduction step.
  backward="chained"  `rms_norm_grad_p` (dx and res_for_gamma in x's dtype,
                      through memory) then `layer_norm_grad_beta_p`.

Both give the same dx, bit for bit; dgamma agrees to float32 rounding (the
two kernels may block the rows differently), plus, for 16-bit activations,
the rounding of the chained res_for_gamma to x's dtype. Every primitive has
JVP rules (the linear ones transpose rules), so jax.jvp, jax.linearize,
jax.hessian and grad-of-grad work, as do vmap and jit.

Where each part runs: on the CPU every primitive is a C++ kernel (XLA FFI).
On other platforms the forward, the tangent and dx run as jax.numpy; the
dgamma reduction of both backwards binds LayerNormGradBeta's kernel
primitive, so where that has a lowering (the AscendC kernel on an Ascend
NPU, `jax_lngb.ascend`: float32 and float16) dgamma runs on it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..._core.validate import check_bool, check_choice, check_epsilon, check_kernel_dtype, check_rank, check_shape

__all__ = ["rms_norm", "rms_norm_jnp", "rms_norm_ref"]
from ..primitives import BACKWARDS, rms_norm_forward_p


def rms_norm(
    x: jax.typing.ArrayLike,
    gamma: jax.typing.ArrayLike,
    *,
    epsilon: float = 1e-6,
    backward: str = "fused",
    zero_centered_gamma: bool = False,
) -> jax.Array:
    """``x / sqrt(mean(x^2) + epsilon) * gamma`` over the last axis.

    Args:
      x: input of shape [..., H] (float32, float16 or bfloat16).
      gamma: scale of shape [H] (any of the same dtypes).
      epsilon: added to the mean of squares; a static float >= 0.
      backward: "fused" (default) runs the backward as one kernel;
        "chained" computes dx and res_for_gamma = x * rstd, then dgamma with
        `layer_norm_grad_beta`.
      zero_centered_gamma: scale by ``1 + gamma`` (Gemma's RMSNorm, gamma
        initialised to zero), the sum formed in float32 (a bfloat16 gamma of
        2^-9 still scales by 1 + 2^-9); the gamma gradient is unchanged in form.

    Returns:
      y, with x's shape and dtype.
    """
    fn = "rms_norm"
    zc = check_bool(fn, "zero_centered_gamma", zero_centered_gamma)
    x, gamma = jnp.asarray(x), jnp.asarray(gamma)
    check_rank(fn, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_kernel_dtype(fn, "gamma", gamma.dtype)
    check_shape(fn, "gamma", gamma.shape, (x.shape[-1],), "[H], H = x.shape[-1]")
    eps = check_epsilon(fn, epsilon)
    mode = check_choice(fn, "backward", backward, BACKWARDS)
    y, _ = rms_norm_forward_p.bind(x, gamma, epsilon=eps, batch_dims=0, backward=mode, zero_centered_gamma=zc)
    return y


def rms_norm_ref(x, gamma, *, epsilon: float = 1e-6, zero_centered_gamma: bool = False) -> np.ndarray:
    """Oracle: float64 NumPy RMSNorm."""
    x64 = np.asarray(x, np.float64)
    ms = (x64 * x64).mean(-1, keepdims=True) if x64.shape[-1] else np.zeros(x64.shape[:-1] + (1,))
    scale = np.asarray(gamma, np.float64) + (1.0 if zero_centered_gamma else 0.0)
    return x64 / np.sqrt(ms + epsilon) * scale


def rms_norm_jnp(x, gamma, *, epsilon: float = 1e-6, zero_centered_gamma: bool = False) -> jax.Array:
    """Plain jax.numpy RMSNorm (float32 statistics): what XLA autodiff sees."""
    x32 = x.astype(jnp.float32)
    ms = jnp.mean(jnp.square(x32), -1, keepdims=True)
    scale = gamma.astype(jnp.float32)
    if zero_centered_gamma:
        scale = scale + 1.0
    return (x32 * jax.lax.rsqrt(ms + epsilon) * scale).astype(x.dtype)
