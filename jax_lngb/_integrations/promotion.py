"""Dtype questions the drop-ins ask, answered the same way under every
`jax_numpy_dtype_promotion` mode and with or without `jax_enable_x64`.

The drop-ins ask two kinds of question, and they need different answers
under `jax.numpy_dtype_promotion("strict")`:

* What upstream's own arithmetic does with its operands. That arithmetic
  runs in the caller's mode, where "strict" refuses to mix dtypes
  (bfloat16 with float32, a NumPy float64 epsilon with a float32
  variance under x64, ...) with a `TypePromotionError`. `upstream_promotes`
  asks JAX in the caller's mode and gives None where it refuses: the
  drop-in then runs upstream's code, which raises its own error.
* Questions of our own (do these dtypes compute in float32? does the output
  dtype hold x exactly?). They are facts about the dtypes, not arithmetic
  the caller wrote, so `standard_promotion` answers them under standard
  promotion whatever the caller's mode is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def upstream_promotes(fn: Callable[..., Any], *operands: Any) -> np.dtype | None:
    """`fn(*operands)` (`jnp.result_type` or `jnp.promote_types`, as
    upstream calls it) in the caller's promotion mode, or None where that
    mode refuses the combination or an operand is no dtype at all."""
    try:
        return np.dtype(fn(*operands))
    except (TypeError, ValueError):  # jax.dtypes.TypePromotionError is a ValueError
        return None


def standard_promotion(*dtypes: Any) -> np.dtype:
    """The dtype `dtypes` promote to under JAX's standard rules, whatever
    promotion mode the caller runs in."""
    with jax.numpy_dtype_promotion("standard"):
        return np.dtype(jnp.result_type(*dtypes))
