"""jax_lngb: CANN AscendC's LayerNormGradBeta (and the LayerNorm backward
built on it) as JAX primitives with native kernels.

    layer_norm_grad_beta(res_for_gamma, dy) -> (pd_gamma, pd_beta)
    layer_norm(x, gamma, beta, epsilon=1e-5)   # VJP uses the primitive
    layer_norm_grad(dy, x, variance, mean, gamma) -> (pd_x, res_for_gamma)
"""

from __future__ import annotations

from ._version import __version__
from .grad_beta import layer_norm_grad_beta, layer_norm_grad_beta_p, layer_norm_grad_beta_ref
from .backward import layer_norm_backward_p, layer_norm_backward_ref
from .forward import layer_norm_forward_p, layer_norm_forward_ref
from .grad import layer_norm_grad, layer_norm_grad_p, layer_norm_grad_ref
from .norm import layer_norm, layer_norm_jnp, layer_norm_ref
from .tangent import layer_norm_tangent_p, layer_norm_tangent_ref

__all__ = [
    "__version__",
    "layer_norm",
    "layer_norm_backward_p",
    "layer_norm_backward_ref",
    "layer_norm_forward_p",
    "layer_norm_forward_ref",
    "layer_norm_grad",
    "layer_norm_grad_beta",
    "layer_norm_grad_beta_p",
    "layer_norm_grad_beta_ref",
    "layer_norm_grad_p",
    "layer_norm_grad_ref",
    "layer_norm_jnp",
    "layer_norm_ref",
    "layer_norm_tangent_p",
    "layer_norm_tangent_ref",
]
