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
# epsilon is added to a float32 variance: it must be finite in float32.
_F32_MAX = float(np.finfo(np.float32).max)


def _dtype_name(dtype: Any) -> str:
    """A readable name for anything used as a dtype (NumPy's, JAX's extended
    dtypes such as PRNG keys, float0, or an object that is no dtype at all)."""
    if dtype is jax.dtypes.float0 or (isinstance(dtype, np.dtype) and dtype == jax.dtypes.float0):
        return "float0"
    if isinstance(dtype, np.dtype):
        return dtype.name
    name = getattr(dtype, "name", None)
    return name if isinstance(name, str) else repr(dtype)


def _as_dtype(dtype: Any) -> Any:
    """np.dtype(dtype) where NumPy understands it; else the object itself
    (JAX's extended dtypes compare with ==)."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return dtype


def _shape_str(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + (",)" if len(shape) == 1 else ")")


def check_kernel_dtype(fn: str, name: str, dtype: Any) -> np.dtype:
    """`dtype` must be one the kernels support; returns it as np.dtype."""
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(
            f"{fn}: {name} must be a floating dtype ({_KERNEL_DTYPE_NAMES}); got {_dtype_name(dtype)}"
        ) from e
    if d not in KERNEL_DTYPES:
        raise TypeError(f"{fn}: {name} must have dtype {_KERNEL_DTYPE_NAMES}; got {_dtype_name(d)}")
    return d


def check_rank(fn: str, name: str, shape: Sequence[int], min_rank: int = 1) -> None:
    """`shape` must have at least `min_rank` axes (the last one is H)."""
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
    a, b = _as_dtype(dtype_a), _as_dtype(dtype_b)
    if type(a) is not type(b) or a != b:
        raise TypeError(f"{fn}: {name_b} must have the dtype of {name_a} ({_dtype_name(a)}); got {_dtype_name(b)}")


def check_shape(fn: str, name: str, shape: Sequence[int], expected: Sequence[int], why: str) -> None:
    if tuple(shape) != tuple(expected):
        raise ValueError(f"{fn}: {name} must have shape {_shape_str(expected)} ({why}); got {_shape_str(shape)}")


def check_batch_dims(fn: str, batch_dims: Any, name: str, shape: Sequence[int]) -> int:
    """A primitive's `batch_dims` parameter (leading axes of operand `name`
    that vmap turned into independent problems): an int, 0 <= it < rank."""
    if isinstance(batch_dims, (bool, np.bool_)) or not isinstance(batch_dims, (int, np.integer)):
        raise TypeError(f"{fn}: batch_dims must be an int >= 0; got {type(batch_dims).__name__} {batch_dims!r}")
    if batch_dims < 0:
        raise ValueError(f"{fn}: batch_dims must be >= 0; got {batch_dims}")
    check_rank(fn, name, shape, int(batch_dims) + 1)
    return int(batch_dims)


def check_epsilon(fn: str, epsilon: Any) -> float:
    """epsilon is a static hyperparameter: a real scalar, finite and >= 0.

    It is added to a float32 variance, so it must also be finite in float32
    (a larger value would silently turn every output into beta)."""
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
    try:
        eps = float(epsilon)
    except OverflowError as e:  # a Python int beyond the float range
        raise ValueError(
            f"{fn}: epsilon must be finite and >= 0; got an int of {int(epsilon).bit_length()} bits"
        ) from e
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"{fn}: epsilon must be finite and >= 0; got {eps}")
    with np.errstate(over="ignore"):
        finite_in_f32 = bool(np.isfinite(np.float32(eps)))
    if not finite_in_f32:
        raise ValueError(
            f"{fn}: epsilon must be finite in float32, the precision of the statistics (<= {_F32_MAX:.8g}); got {eps}"
        )
    return eps


def check_row_stats(fn: str, name: str, shape: Sequence[int], x_shape: Sequence[int]) -> None:
    """Per-row statistics (mean, variance) have x's shape without the last axis."""
    check_shape(fn, name, shape, tuple(x_shape[:-1]), "x.shape[:-1], one value per row")


def check_param(fn: str, name: str, shape: Sequence[int], x_shape: Sequence[int], batch_dims: int = 0) -> None:
    """A LayerNorm parameter is [H]; with vmap's group axes, one [H] per
    group: [*G, H] with G = x.shape[:batch_dims]."""
    h = x_shape[-1]
    need = tuple(x_shape[:batch_dims]) + (h,)
    if tuple(shape) != need:
        why = "[H], H = x.shape[-1]" + (", one per vmapped group" if batch_dims else "")
        raise ValueError(f"{fn}: {name} must have shape {_shape_str(need)} ({why}); got {_shape_str(shape)}")


def check_choice(fn: str, name: str, value: Any, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{fn}: {name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value


def check_bool(fn: str, name: str, value: Any) -> bool:
    """A static flag: a Python or NumPy bool (not a traced value, not 0/1,
    whose meaning as a flag would be a guess)."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(f"{fn}: {name} must be a static Python bool, not a traced value ({value.aval})")
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{fn}: {name} must be a bool; got {type(value).__name__} {value!r}")
    return bool(value)
