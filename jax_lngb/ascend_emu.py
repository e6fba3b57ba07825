"""The AscendC kernels on the CPU emulation, under the name they had before
the Ascend route became a subpackage: this module *is*
`jax_lngb.ascend.emulator` (the same module object; see there)."""

import sys

from .ascend import emulator as _emulator

sys.modules[__name__] = _emulator
