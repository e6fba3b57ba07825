"""Flax's LayerNorm semantics mapped onto `layer_norm`, shared by the linen
(`jax_lngb.flax`) and nnx (`jax_lngb.nnx`) drop-ins.

Flax normalizes over `reduction_axes` and learns one scale/bias per element
of `feature_axes`; `layer_norm` normalizes over the last axis with a [H]
scale and bias. `flax_common` maps the one onto the other (as long as
every feature axis is also a reduction axis) and holds the decision steps
this module shares with the RMSNorm drop-ins (`flax_rms_norm`).

`layer_norm_declines` says which calls the kernel does not serve (feature axes
outside the reduction axes, masks, cross-device statistics, statistics or
arithmetic in anything but float32, ...); the drop-ins run Flax's own
implementation for those, so every configuration Flax accepts works, with
Flax's results. DECISION_TABLE lists the rules in the order they are tried.

Nothing here imports Flax: the callers pass in the dtypes Flax would use,
computed with Flax's own helpers.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .._core.validate import KERNEL_DTYPES
from .._ops.layer_norm.api import layer_norm
from .flax_common import (
    epsilon_declines,
    normalize_as_rows,
    stats_and_arith_declines,
    structure_declines,
)

# (condition, where the call goes): the rules layer_norm_declines applies, for
# the documentation and the tests.
DECISION_TABLE = (
    ("x is not an array (no .ndim), is a scalar, or is empty", "Flax"),
    ("mask is given", "Flax"),
    ("axis_name is set (statistics averaged across devices)", "Flax"),
    ("reduction_axes / feature_axes are not valid integer axes of x", "Flax (its own error)"),
    ("a feature axis is not among the reduction axes", "Flax"),
    (
        "the promotion mode refuses Flax's dtype steps (strict promotion with a 16-bit "
        "dtype/input, or x, statistics, scale and bias not all of one dtype)",
        "Flax (its own error)",
    ),
    (
        "the statistics dtype is not float32 (force_float32_reductions=False with "
        "16-bit dtype/input, float64 under jax_enable_x64)",
        "Flax",
    ),
    (
        "x, scale, bias or dtype bring in float64 or complex arithmetic, or the output "
        "dtype is not float32/float16/bfloat16",
        "Flax",
    ),
    (
        "epsilon is not a static finite float >= 0 (finite in float32), or one the "
        "promotion mode does not add to the float32 variance",
        "Flax",
    ),
    (
        "otherwise (any reduction axes, use_fast_variance either way, use_scale/use_bias, "
        "dtype/param_dtype in float32/float16/bfloat16)",
        "the kernel",
    ),
)


def layer_norm_declines(
    x: Any,
    *,
    mask: Any,
    axis_name: Any,
    reduction_axes: Any,
    feature_axes: Any,
    epsilon: Any,
    stats_dtype: Any,
    arith_dtypes: tuple[Any, ...],
    out_dtype: Any = None,
    param_sizes: tuple[int, ...] = (),
) -> str | None:
    """Why the kernel does not serve this call (the caller then runs Flax's
    own implementation), or None when it does.

    Args:
      x: the input as the caller received it.
      mask, axis_name: Flax's options of the same names.
      reduction_axes, feature_axes, epsilon: the module's attributes.
      stats_dtype: the dtype Flax computes the statistics in (None: the
        caller's promotion mode refuses Flax's step to it).
      arith_dtypes: the dtypes taking part in Flax's arithmetic after the
        statistics (x, scale, bias, as Flax holds them).
      out_dtype: the output dtype Flax's rules give, when already known.
      param_sizes: the sizes of the scale/bias in use (each must match the
        feature axes).
    """
    why = structure_declines(
        x,
        mask=mask,
        axis_name=axis_name,
        reduction_axes=reduction_axes,
        feature_axes=feature_axes,
        param_sizes=param_sizes,
    )
    if why is None:
        why = stats_and_arith_declines(stats_dtype, arith_dtypes)
    if why is None and out_dtype is not None and np.dtype(out_dtype) not in KERNEL_DTYPES:
        why = f"{np.dtype(out_dtype).name} output"
    return why if why is not None else epsilon_declines(epsilon, stats_dtype)


def flax_layer_norm(
    x: jax.Array,
    scale: jax.Array | None,
    bias: jax.Array | None,
    *,
    reduction_axes: Any,
    feature_axes: Any,
    epsilon: float,
    out_dtype: Any,
) -> jax.Array:
    """Flax's LayerNorm output for `x`, computed by `layer_norm`.

    Args:
      x: an input layer_norm_declines accepted.
      scale, bias: the parameters as Flax stores them (their size is the
        product of the feature axes' sizes), or None when unused (without a
        bias the kernel reads none and forms no bias gradient).
      reduction_axes, feature_axes: as Flax's LayerNorm takes them.
      epsilon: added to the variance.
      out_dtype: the output dtype Flax's dtype rules give for this call.
    """
    return normalize_as_rows(
        x,
        ((scale, 1.0), (bias, None)),
        reduction_axes=reduction_axes,
        feature_axes=feature_axes,
        out_dtype=out_dtype,
        kernel=lambda x2d, g, b: layer_norm(x2d, g, b, epsilon=epsilon),
    )
