"""Flax's LayerNorm semantics mapped onto `layer_norm`, shared by the linen
(`jax_lngb.flax`) and nnx (`jax_lngb.nnx`) drop-ins.

Flax normalizes over `reduction_axes` and learns one scale/bias per element
of `feature_axes`; `layer_norm` normalizes over the last axis with a [H]
scale and bias. Any reduction axes map onto that form (move them last and
flatten them into H) as long as every feature axis is also a reduction axis:
then the parameters broadcast over the reduced block and flatten the same
way, and autodiff of the broadcast sums their gradients back. Feature axes
outside the reduction axes would need a different scale per normalized row,
which `layer_norm` does not have, so they are refused.

Nothing here imports Flax: the callers pass in the dtype Flax would give the
output, computed with Flax's own helpers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import KERNEL_DTYPES
from .norm import layer_norm

_F32 = np.dtype(jnp.float32)


def canonical_axes(owner: str, name: str, ndim: int, axes: Any) -> tuple[int, ...]:
    """Flax's axis canonicalization (deduplicated, non-negative), range-checked.

    The order is Flax's (iteration order of the set it builds), because the
    linen parameter shape is read off it.
    """
    if not isinstance(axes, Iterable):
        axes = (axes,)
    axes = tuple(axes)
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            raise ValueError(
                f"{owner}: {name} must be integer axes in [-{ndim}, {ndim}) for an input of rank {ndim}; "
                f"got {axes!r}"
            )
    return tuple({ndim + int(a) if a < 0 else int(a) for a in axes})


def refuse_unsupported(owner: str, *, mask: Any, axis_name: Any, axis_index_groups: Any) -> None:
    """The Flax options `layer_norm` has no equivalent for: refused by name."""
    if mask is not None:
        raise NotImplementedError(
            f"{owner}: `mask` is not supported (statistics always cover every element of the "
            "reduction axes); use flax's LayerNorm for masked statistics"
        )
    if axis_name is not None or axis_index_groups is not None:
        raise NotImplementedError(
            f"{owner}: axis_name/axis_index_groups (statistics averaged across devices with pmean) "
            f"are not supported; got axis_name={axis_name!r}, axis_index_groups={axis_index_groups!r}. "
            "Under jit with sharded arrays XLA partitions the computation without them."
        )


def _check_float32_compute(owner: str, *dtypes: Any) -> None:
    """The kernels compute in float32: refuse configurations that ask for more
    (float64 or complex under jax_enable_x64) instead of silently narrowing."""
    wanted = jnp.promote_types(jnp.result_type(*dtypes), jnp.float32)
    if np.dtype(wanted) != _F32:
        raise TypeError(
            f"{owner}: inputs, parameters and dtype must resolve to float32, float16 or bfloat16 "
            f"(jax_lngb computes LayerNorm in float32); this call resolves to {np.dtype(wanted).name}"
        )


def flax_layer_norm(
    owner: str,
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
      owner: the public class name, for error messages.
      x: the input, any rank >= 1.
      scale, bias: the parameters as Flax stores them (their size is the
        product of the feature axes' sizes), or None when unused.
      reduction_axes, feature_axes: as Flax's LayerNorm takes them.
      epsilon: added to the variance.
      out_dtype: the output dtype Flax's dtype rules give for this call.
    """
    if x.ndim == 0:
        raise ValueError(f"{owner}: the input must have rank >= 1; got a scalar")
    red = canonical_axes(owner, "reduction_axes", x.ndim, reduction_axes)
    feat = canonical_axes(owner, "feature_axes", x.ndim, feature_axes)
    if not set(feat) <= set(red):
        raise ValueError(
            f"{owner}: every feature axis must also be a reduction axis (one scale/bias per "
            f"normalized element, e.g. the default reduction_axes=-1, feature_axes=-1); got "
            f"reduction_axes={reduction_axes!r}, feature_axes={feature_axes!r} for rank {x.ndim}"
        )
    _check_float32_compute(owner, x.dtype, out_dtype, *(p.dtype for p in (scale, bias) if p is not None))

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

    def as_row(p: jax.Array | None, fill: float, name: str) -> jax.Array:
        if p is None:
            return jnp.full((h,), fill, jnp.float32)
        if p.size != math.prod(feature_shape):
            raise ValueError(
                f"{owner}: {name} has shape {tuple(p.shape)} but feature_axes={feature_axes!r} of an "
                f"input of shape {tuple(x.shape)} need {math.prod(feature_shape)} elements"
            )
        # float32, like the arithmetic Flax does with the parameters: the
        # gradient stays float32 until it meets the parameter's own dtype.
        p = jnp.broadcast_to(p.astype(jnp.float32).reshape(feature_shape), block_shape)
        if not identity:
            p = jnp.transpose(p, perm)
        return p.reshape(h)

    gamma = as_row(scale, 1.0, "scale")
    beta = as_row(bias, 0.0, "bias")
    y = layer_norm(xt.reshape(*lead, h), gamma, beta, epsilon=epsilon).reshape(xt.shape)
    if not identity:
        y = jnp.transpose(y, np.argsort(perm))
    return y.astype(out_dtype)
