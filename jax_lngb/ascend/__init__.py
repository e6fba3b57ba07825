"""The Ascend NPU route: the lowering of our primitives to AscendC kernels
(`lowering`, re-exported here: `jax_lngb.ascend.register_platform`, ...),
CANN's host tiling and the kernels' launch plans (`tiling`, also
`jax_lngb.tiling`), and the kernels run on an emulation of AscendC on the
CPU (`emulator`, imported on demand; it needs the `_ascend_emu` extension).

See `jax_lngb.ascend.lowering` for which platform names, architectures and
cases the lowering serves.
"""

from . import lowering, tiling
from .lowering import *  # noqa: F403
from .lowering import __all__ as _lowering_all

__all__ = [*_lowering_all, "lowering", "tiling"]


def __getattr__(name: str):
    # The emulator loads a compiled extension of its own: only on first use.
    if name == "emulator":
        import importlib

        return importlib.import_module(f"{__name__}.emulator")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
