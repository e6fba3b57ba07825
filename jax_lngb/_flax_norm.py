"""Flax's LayerNorm semantics mapped onto `layer_norm`, shared by the linen
(`jax_lngb.flax`) and nnx (`jax_lngb.nnx`) drop-ins.

Flax normalizes over `reduction_axes` and learns one scale/bias per element
of `feature_axes`; `layer_norm` normalizes over the last axis with a [H]
scale and bias. Any reduction axes map onto that form (move them last and
flatten them into H) as long as every feature axis is also a reduction axis:
then the parameters broadcast over the reduced block and flatten the same
way, and autodiff of the broadcast sums their gradients back.

`kernel_declines` says which calls the kernel does not serve (feature axes
outside the reduction axes, masks, cross-device statistics, statistics or
arithmetic in anything but float32, ...); the drop-ins run Flax's own
implementation for those, so every configuration Flax accepts works, with
Flax's results. DECISION_TABLE lists the rules in the order they are tried.

Nothing here imports Flax: the callers pass in the dtypes Flax would use,
computed with Flax's own helpers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import KERNEL_DTYPES, check_epsilon
from .norm import layer_norm

_F32 = np.dtype(jnp.float32)

# (condition, where the call goes): the rules kernel_declines applies, for
# the documentation and the tests.
DECISION_TABLE = (
    ("x is not an array (no .ndim), is a scalar, or is empty", "Flax"),
    ("mask is given", "Flax"),
    ("axis_name is set (statistics averaged across devices)", "Flax"),
    ("reduction_axes / feature_axes are not valid integer axes of x", "Flax (its own error)"),
    ("a feature axis is not among the reduction axes", "Flax"),
    ("the statistics dtype is not float32 (force_float32_reductions=False with "
     "16-bit dtype/input, float64 under jax_enable_x64)", "Flax"),
    ("x, scale, bias or dtype bring in float64 or complex arithmetic, or the output "
     "dtype is not float32/float16/bfloat16", "Flax"),
    ("epsilon is not a static finite float >= 0 (finite in float32)", "Flax"),
    ("otherwise (any reduction axes, use_fast_variance either way, use_scale/use_bias, "
     "dtype/param_dtype in float32/float16/bfloat16)", "the kernel"),
)


def canonical_axes(axes: Any, ndim: int) -> tuple[int, ...] | None:
    """Flax's axis canonicalization (deduplicated, non-negative), or None when
    `axes` are not valid integer axes of a rank-`ndim` input.

    The order is Flax's (iteration order of the set it builds), because the
    linen parameter shape is read off it.
    """
    if not isinstance(axes, Iterable):
        axes = (axes,)
    axes = tuple(axes)
    for a in axes:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            return None
    return tuple({ndim + int(a) if a < 0 else int(a) for a in axes})


def kernel_declines(
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
      stats_dtype: the dtype Flax computes the statistics in.
      arith_dtypes: the dtypes taking part in Flax's arithmetic after the
        statistics (x, scale, bias, as Flax holds them).
      out_dtype: the output dtype Flax's rules give, when already known.
      param_sizes: the sizes of the scale/bias in use (each must match the
        feature axes).
    """
    if not hasattr(x, "ndim") or not hasattr(x, "dtype") or x.ndim == 0 or x.size == 0:
        return "x is not a non-empty array of rank >= 1"
    if mask is not None:
        return "mask"
    if axis_name is not None:
        return "axis_name"
    red = canonical_axes(reduction_axes, x.ndim)
    feat = canonical_axes(feature_axes, x.ndim)
    if red is None or feat is None:
        return "invalid axes"
    if not set(feat) <= set(red):
        return "feature axes outside the reduction axes"
    n_feat = math.prod(x.shape[a] for a in feat)
    if any(n != n_feat for n in param_sizes):
        return "parameter sizes that do not match the feature axes"
    if np.dtype(stats_dtype) != _F32:
        return f"{np.dtype(stats_dtype).name} statistics"
    try:
        wanted = np.dtype(jnp.promote_types(jnp.result_type(*arith_dtypes), jnp.float32))
    except TypeError:
        return "dtypes without a common promotion"
    if wanted != _F32:
        return f"{wanted.name} arithmetic"
    if out_dtype is not None and np.dtype(out_dtype) not in KERNEL_DTYPES:
        return f"{np.dtype(out_dtype).name} output"
    try:
        check_epsilon("", epsilon)
    except (TypeError, ValueError):
        return "epsilon"
    return None


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
      x: an input kernel_declines accepted.
      scale, bias: the parameters as Flax stores them (their size is the
        product of the feature axes' sizes), or None when unused.
      reduction_axes, feature_axes: as Flax's LayerNorm takes them.
      epsilon: added to the variance.
      out_dtype: the output dtype Flax's dtype rules give for this call.
    """
    red = canonical_axes(reduction_axes, x.ndim)
    feat = canonical_axes(feature_axes, x.ndim)
    assert red is not None and feat is not None and set(feat) <= set(red), "kernel_declines said no"
    out_dtype = np.dtype(out_dtype)
    # Hand layer_norm the input in a dtype that holds both x exactly and the
    # output without a second rounding: layer_norm rounds its float32 result
    # once to its input's dtype.
    if np.dtype(x.dtype) in KERNEL_DTYPES and np.dtype(jnp.promote_types(x.dtype, out_dtype)) == out_dtype:
        x_in = x.astype(out_dtype)
    else:
        x_in = x.astype(jnp.float32)

    # Move the reduction axes last (in order) and flatten them into H.
    red_sorted = sorted(red)
    keep = [a for a in range(x.ndim) if a not in red]
    perm = keep + red_sorted
    identity = perm == list(range(x.ndim))
    xt = x_in if identity else jnp.transpose(x_in, perm)
    lead = xt.shape[: len(keep)]
    h = math.prod(xt.shape[len(keep):])

    feature_shape = [x.shape[a] if a in feat else 1 for a in range(x.ndim)]
    block_shape = [x.shape[a] if a in red else 1 for a in range(x.ndim)]

    def as_row(p: jax.Array | None, fill: float) -> jax.Array:
        if p is None:
            return jnp.full((h,), fill, jnp.float32)
        # float32, like the arithmetic Flax does with the parameters: the
        # gradient stays float32 until it meets the parameter's own dtype.
        p = jnp.broadcast_to(p.astype(jnp.float32).reshape(feature_shape), block_shape)
        if not identity:
            p = jnp.transpose(p, perm)
        return p.reshape(h)

    gamma = as_row(scale, 1.0)
    beta = as_row(bias, 0.0)
    y = layer_norm(xt.reshape(*lead, h), gamma, beta, epsilon=epsilon).reshape(xt.shape)
    if not identity:
        y = jnp.transpose(y, np.argsort(perm))
    return y.astype(out_dtype)
