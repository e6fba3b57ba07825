"""Trace-time argument checks shared by every primitive and public function.

Errors name the argument, what it got and what it needs, and are raised while
tracing (abstract evaluation), never from inside a kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# The storage dtypes the kernels compute on (always accumulating in float32).
KERNEL_DTYPES: tuple[np.dtype, ...] = (
    np.dtype(jnp.float32),
    np.dtype(jnp.float16),
    np.dtype(jnp.bfloat16),
)
_KERNEL_DTYPE_NAMES = ", ".join(d.name for d in KERNEL_DTYPES)


def _shape_str(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + (",)" if len(shape) == 1 else ")")


def check_kernel_dtype(fn: str, name: str, dtype: Any) -> np.dtype:
    """`dtype` must be one the kernels support; returns it as np.dtype."""
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{fn}: {name} must be a floating dtype ({_KERNEL_DTYPE_NAMES}); got {dtype!r}") from e
    if d not in KERNEL_DTYPES:
        raise TypeError(f"{fn}: {name} must have dtype {_KERNEL_DTYPE_NAMES}; got {d.name}")
    return d


def check_rank(fn: str, name: str, shape: Sequence[int], min_rank: int = 1) -> None:
    if len(shape) < min_rank:
        raise ValueError(
            f"{fn}: {name} must have rank >= {min_rank} (the last axis is H); "
            f"got shape {_shape_str(shape)} of rank {len(shape)}"
        )


def check_same_shape(fn: str, name_a: str, shape_a: Sequence[int], name_b: str, shape_b: Sequence[int]) -> None:
    if tuple(shape_a) != tuple(shape_b):
        raise ValueError(
            f"{fn}: {name_b} must have the shape of {name_a} {_shape_str(shape_a)}; got {_shape_str(shape_b)}"
        )


def check_same_dtype(fn: str, name_a: str, dtype_a: Any, name_b: str, dtype_b: Any) -> None:
    if np.dtype(dtype_a) != np.dtype(dtype_b):
        raise TypeError(
            f"{fn}: {name_b} must have the dtype of {name_a} ({np.dtype(dtype_a).name}); got {np.dtype(dtype_b).name}"
        )


def check_shape(fn: str, name: str, shape: Sequence[int], expected: Sequence[int], why: str) -> None:
    if tuple(shape) != tuple(expected):
        raise ValueError(f"{fn}: {name} must have shape {_shape_str(expected)} ({why}); got {_shape_str(shape)}")


def check_epsilon(fn: str, epsilon: Any) -> float:
    """epsilon is a static hyperparameter: a real scalar, finite and >= 0."""
    if isinstance(epsilon, jax.core.Tracer):
        raise TypeError(f"{fn}: epsilon must be a static Python float, not a traced value ({epsilon.aval})")
    shape = getattr(epsilon, "shape", None)
    if shape == () and not isinstance(epsilon, (bool, np.bool_)):
        epsilon = np.asarray(epsilon).item()  # 0-d NumPy/JAX arrays
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"{fn}: epsilon must be a real scalar >= 0; got {type(epsilon).__name__}"
            + (f" of shape {_shape_str(shape)}" if shape is not None else "")
        )
    eps = float(epsilon)
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"{fn}: epsilon must be finite and >= 0; got {eps}")
    return eps


def check_row_stats(fn: str, name: str, shape: Sequence[int], x_shape: Sequence[int]) -> None:
    """Per-row statistics (mean, variance) have x's shape without the last axis."""
    check_shape(fn, name, shape, tuple(x_shape[:-1]), "x.shape[:-1], one value per row")


def check_param(fn: str, name: str, shape: Sequence[int], x_shape: Sequence[int], batch_dims: int = 0) -> None:
    """A LayerNorm parameter is [H]; under vmap it may also be one [H] per
    mapped element, [*G, H] with G = x.shape[:batch_dims]."""
    h = x_shape[-1]
    allowed = [(h,)]
    if batch_dims:
        allowed.append(tuple(x_shape[:batch_dims]) + (h,))
    if tuple(shape) not in allowed:
        need = " or ".join(_shape_str(s) for s in allowed)
        raise ValueError(f"{fn}: {name} must have shape {need} ([H], H = x.shape[-1]); got {_shape_str(shape)}")


def check_choice(fn: str, name: str, value: Any, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{fn}: {name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value
