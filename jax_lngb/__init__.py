"""jax_lngb: CANN AscendC's LayerNormGradBeta (and the LayerNorm backward
built on it) as JAX primitives with native kernels.

    layer_norm_grad_beta(res_for_gamma, dy) -> (pd_gamma, pd_beta)
    layer_norm(x, gamma, beta, epsilon=1e-5)   # VJP uses the primitive
    layer_norm_grad(dy, x, variance, mean, gamma) -> (pd_x, res_for_gamma)
    rms_norm(x, gamma, epsilon=1e-6)           # dgamma through the same reduction
    add_layer_norm(x, residual, gamma, beta=None) -> (y, h)   # h = x + residual, fused
    add_rms_norm(x, residual, gamma) -> (y, h)
    retain_host_memory() -> bool               # opt-in, see jax_lngb.host_memory
"""

from __future__ import annotations

import importlib.machinery as _machinery
import importlib.metadata as _metadata
from pathlib import Path as _Path


def _fall_through_to_installed_copy() -> None:
    """Lets a source checkout find the compiled extensions of an installed copy.

    `python -m jax_lngb` (or `python -c "import jax_lngb"`) at the root of a
    checkout puts the checkout first on sys.path, so these sources are what
    gets imported, and they hold no compiled extension: `pip install .` put
    it into site-packages beside another copy of the same files. Appending
    that copy's folder to this package's search path makes `from . import
    _cpu` (and the other extensions) resolve there while every Python module
    still comes from here. Only a copy of the same version qualifies, and
    only when no extension sits beside these sources (a cpp/dev_build.sh
    build links them here, and then nothing changes).
    """
    here = _Path(__file__).resolve().parent
    suffixes = tuple(_machinery.EXTENSION_SUFFIXES)
    if any(p.name.startswith("_cpu") and p.name.endswith(suffixes) for p in here.iterdir()):
        return
    try:
        dist = _metadata.distribution("jax_lngb")
    except _metadata.PackageNotFoundError:
        return  # nothing installed: _core.native's ImportError says what to run
    from ._version import __version__ as ours

    installed = _Path(str(dist.locate_file("jax_lngb"))).resolve()
    if dist.version == ours and installed != here and installed.is_dir():
        __path__.append(str(installed))


_fall_through_to_installed_copy()

# Before anything imports JAX: JAX_LNGB_RETAIN_HOST_MEMORY=1 must set
# glibc's malloc up before JAX (or NumPy) maps any large block.
from . import host_memory
from .host_memory import apply_env as _apply_host_memory_env
from .host_memory import retain_host_memory

_apply_host_memory_env()

# The Ascend NPU lowering registers itself for the Ascend platform, now or
# when a PJRT plugin registers it later; `tiling` is CANN's host tiling.
from . import (
    ascend,
    export,
    tiling,
)
from ._core.avals import psum_to_match
from ._core.partitioning import ShardingWarning
from ._ops.add_norm.api import add_layer_norm, add_layer_norm_ref, add_rms_norm, add_rms_norm_ref
from ._ops.add_norm.backward import add_norm_backward_p, add_norm_backward_ref
from ._ops.add_norm.forward import add_norm_forward_p
from ._ops.add_norm.tangent import add_norm_tangent_p
from ._ops.grad_beta import layer_norm_grad_beta, layer_norm_grad_beta_p, layer_norm_grad_beta_ref
from ._ops.layer_norm.api import layer_norm, layer_norm_jnp, layer_norm_ref
from ._ops.layer_norm.backward import layer_norm_backward_p, layer_norm_backward_ref
from ._ops.layer_norm.forward import layer_norm_forward_p, layer_norm_forward_ref
from ._ops.layer_norm.grad import layer_norm_grad, layer_norm_grad_p, layer_norm_grad_ref
from ._ops.layer_norm.tangent import layer_norm_tangent_p, layer_norm_tangent_ref
from ._ops.rms_norm.api import rms_norm, rms_norm_jnp, rms_norm_ref
from ._ops.rms_norm.backward import rms_norm_backward_p
from ._ops.rms_norm.forward import rms_norm_forward_p
from ._ops.rms_norm.grad import rms_norm_grad_p
from ._ops.rms_norm.tangent import rms_norm_tangent_p, rms_norm_tangent_ref
from ._version import __version__

__all__ = [
    "ShardingWarning",
    "__version__",
    "add_layer_norm",
    "add_layer_norm_ref",
    "add_norm_backward_p",
    "add_norm_backward_ref",
    "add_norm_forward_p",
    "add_norm_tangent_p",
    "add_rms_norm",
    "add_rms_norm_ref",
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
    "rms_norm",
    "rms_norm_backward_p",
    "rms_norm_forward_p",
    "rms_norm_grad_p",
    "rms_norm_jnp",
    "rms_norm_ref",
    "rms_norm_tangent_p",
    "rms_norm_tangent_ref",
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
