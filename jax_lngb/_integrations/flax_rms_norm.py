"""The kernel route of the `RMSNorm` drop-ins for Flax, linen
(`jax_lngb.flax.RMSNorm`, in `linen`) and nnx (`jax_lngb.nnx.RMSNorm`, in
`nnx`): when `rms_norm` serves a call (`rms_norm_declines`) and how
(`flax_rms_norm`).

Each *is* the Flax class (a subclass; only `__call__` differs): the same
attributes / constructor with the same defaults (`epsilon=1e-6`,
`dtype=None`, `param_dtype=float32`, `use_scale=True`, `scale_init=ones`,
`reduction_axes=-1`, `feature_axes=-1`, `axis_name`, `axis_index_groups`,
`use_fast_variance`, linen's `force_float32_reductions`, nnx's
`num_features`, `promote_dtype`, `rngs`, `scale_metadata`), the same `scale`
parameter (name, shape, initializer, dtype) and, in linen, the same
auto-generated module name (`RMSNorm_0`, ...), so checkpoints of a Flax
model load unchanged.

Flax's RMSNorm computes, over `reduction_axes`,

    y = x * (rsqrt(mean(x^2) + epsilon) * scale)

with the mean of squares in the statistics dtype (float32 for float32 and
16-bit work, as `force_float32_reductions=True` and nnx always do), the
arithmetic after it in the promotion of x, the statistics and the scale,
and the result cast to `dtype` (None: the promotion of x and the scale).
`use_fast_variance` changes nothing for RMSNorm (there is no mean to
subtract). Whenever all of that is float32 work the kernel computes the
same value to float32 rounding (its y = (x * rstd) * scale associates the
product the other way), rounded once to the output dtype; every other call
runs Flax's own `__call__`, so it behaves exactly as Flax does, errors
included. DECISION_TABLE lists the rules in the order they are tried.

Any reduction axes map onto `rms_norm`'s last-axis form when every feature
axis is also a reduction axis: the reduction axes move last (in order) and
flatten into H, the scale broadcasts over the reduced block and flattens the
same way, and autodiff of the broadcast sums its gradient back.

This module needs no Flax; the modules that use it import it.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.validate import KERNEL_DTYPES
from .._ops.rms_norm.api import rms_norm
from .flax_common import (
    canonical_axes,
    epsilon_declines,
    normalize_as_rows,
    stats_and_arith_declines,
    structure_declines,
)

__all__ = ["DECISION_TABLE", "flax_rms_norm", "rms_norm_declines"]

# (condition, where the call goes), in the order `rms_norm_declines` tries them.
DECISION_TABLE = (
    ("x is not an array (no .ndim / .dtype), is a scalar, or is empty", "Flax"),
    ("mask is given", "Flax"),
    ("axis_name is set (statistics averaged across devices; axis_index_groups with it)", "Flax"),
    ("reduction_axes / feature_axes are not valid integer axes of x", "Flax (its own error)"),
    ("a feature axis is not among the reduction axes", "Flax"),
    ("the scale's size does not match the feature axes (nnx num_features)", "Flax (its own error)"),
    ("x is bool, complex or float64 (under jax_enable_x64)", "Flax"),
    (
        "the promotion mode refuses Flax's dtype steps (strict promotion with a 16-bit "
        "or integer dtype/input, or x, statistics and scale not all of one dtype)",
        "Flax (its own error)",
    ),
    (
        "the statistics dtype is not float32 (linen force_float32_reductions=False with a "
        "16-bit or integer dtype/input; float64 dtype)",
        "Flax",
    ),
    ("x, the statistics or the scale bring in float64 or complex arithmetic", "Flax"),
    ("the output dtype is not float32, float16 or bfloat16", "Flax"),
    (
        "epsilon is not a static finite float >= 0 (finite in float32), or one the "
        "promotion mode does not add to the float32 mean of squares",
        "Flax",
    ),
    (
        "otherwise: float32/float16/bfloat16/integer x, any reduction axes holding the "
        "feature axes, use_scale either way, use_fast_variance either way, scale and "
        "dtype in float32/float16/bfloat16",
        "the kernel",
    ),
)


def rms_norm_declines(
    x: Any,
    *,
    mask: Any,
    axis_name: Any,
    reduction_axes: Any,
    feature_axes: Any,
    epsilon: Any,
    stats_dtype: Any,
    scale_dtype: Any,
    out_dtype: Any,
    scale_size: int | None = None,
) -> str | None:
    """Why the kernel does not serve this call (the caller then runs Flax's
    own `__call__`), or None when it does.

    Args:
      x: the input as Flax's arithmetic sees it (nnx: after promote_dtype).
      mask, axis_name: Flax's call argument and attribute.
      reduction_axes, feature_axes, epsilon: the module's attributes.
      stats_dtype: the dtype Flax computes the mean of squares in (None:
        the caller's promotion mode refuses Flax's step to it).
      scale_dtype: the scale's dtype in Flax's arithmetic (None: no scale).
      out_dtype: the output dtype Flax's rules give, or None when they fail.
      scale_size: the scale's size where it is fixed already (nnx).
    """
    why = structure_declines(
        x, mask=mask, axis_name=axis_name, reduction_axes=reduction_axes, feature_axes=feature_axes
    )
    if why is not None:
        return why
    feat = canonical_axes(feature_axes, x.ndim)
    if scale_size is not None and scale_size != math.prod(x.shape[a] for a in feat):
        return "scale size does not match the feature axes"
    x_dtype = np.dtype(jnp.result_type(x))
    if not (x_dtype in KERNEL_DTYPES or (np.issubdtype(x_dtype, np.integer) and x_dtype != np.bool_)):
        return f"{x_dtype.name} input"
    arith = (x_dtype, stats_dtype) + ((scale_dtype,) if scale_dtype is not None else ())
    why = stats_and_arith_declines(stats_dtype, arith)
    if why is not None:
        return why
    if out_dtype is None or np.dtype(out_dtype) not in KERNEL_DTYPES:
        return "output dtype"
    return epsilon_declines(epsilon, stats_dtype)


def flax_rms_norm(
    x: jax.Array,
    scale: jax.Array | None,
    *,
    reduction_axes: Any,
    feature_axes: Any,
    epsilon: float,
    out_dtype: Any,
) -> jax.Array:
    """Flax's RMSNorm output for `x`, computed by `rms_norm`.

    Args:
      x: an input rms_norm_declines accepted.
      scale: the scale as Flax's arithmetic uses it (its size is the product
        of the feature axes' sizes), or None.
      reduction_axes, feature_axes: as the Flax module holds them.
      epsilon: added to the mean of squares.
      out_dtype: the output dtype Flax's dtype rules give for this call.
    """
    return normalize_as_rows(
        x,
        ((scale, 1.0),),
        reduction_axes=reduction_axes,
        feature_axes=feature_axes,
        out_dtype=out_dtype,
        kernel=lambda x2d, g: rms_norm(x2d, g, epsilon=float(epsilon)),
    )
