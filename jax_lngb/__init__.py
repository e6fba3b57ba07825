"""jax_lngb: CANN AscendC's LayerNormGradBeta (and the LayerNorm backward
built on it) as JAX primitives with native kernels.

    layer_norm_grad_beta(res_for_gamma, dy) -> (pd_gamma, pd_beta)
    layer_norm(x, gamma, beta, epsilon=1e-5)   # VJP uses the primitive
    layer_norm_grad(dy, x, variance, mean, gamma) -> (pd_x, res_for_gamma)
    retain_host_memory() -> bool               # opt-in, see jax_lngb.host_memory
"""

from __future__ import annotations

# First, before anything imports JAX: JAX_LNGB_RETAIN_HOST_MEMORY=1 must set
# glibc's malloc up before JAX (or NumPy) maps any large block.
from .host_memory import apply_env as _apply_host_memory_env
from . import host_memory
from .host_memory import retain_host_memory

_apply_host_memory_env()

from . import export  # noqa: E402
from ._avals import psum_to_match  # noqa: E402
from ._partitioning import ShardingWarning
from ._version import __version__
from .grad_beta import layer_norm_grad_beta, layer_norm_grad_beta_p, layer_norm_grad_beta_ref
from .backward import layer_norm_backward_p, layer_norm_backward_ref
from .forward import layer_norm_forward_p, layer_norm_forward_ref
from .grad import layer_norm_grad, layer_norm_grad_p, layer_norm_grad_ref
from .norm import layer_norm, layer_norm_jnp, layer_norm_ref
from .tangent import layer_norm_tangent_p, layer_norm_tangent_ref

# The Ascend NPU lowering registers itself for the Ascend platform, now or
# when a PJRT plugin registers it later; `tiling` is CANN's host tiling.
from . import ascend, tiling  # noqa: E402  (after the primitive exists)

__all__ = [
    "ShardingWarning",
    "__version__",
    "ascend",
    "export",
    "host_memory",
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
    "psum_to_match",
    "retain_host_memory",
    "tiling",
]

# Drop-in LayerNorm modules for optional libraries (jax_lngb.flax: linen,
# jax_lngb.nnx, jax_lngb.equinox), imported on first attribute access so that
# `import jax_lngb` never imports Flax or Equinox.
_LAZY_SUBMODULES = ("flax", "nnx", "equinox")


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY_SUBMODULES])
