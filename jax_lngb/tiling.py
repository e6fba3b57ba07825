"""CANN's host tiling and the Ascend kernels' plans, under the name they had
before the Ascend route became a subpackage: this module *is*
`jax_lngb.ascend.tiling` (the same module object; see there)."""

import sys

from .ascend import tiling as _tiling

sys.modules[__name__] = _tiling
