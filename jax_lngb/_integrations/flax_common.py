"""What the Flax LayerNorm (`flax_layer_norm`) and RMSNorm (`flax_rms_norm`) drop-ins
share: Flax's axis canonicalization, the decision steps both
`kernel_declines` take (the structural ones first, then statistics,
arithmetic, output dtype and epsilon), and the mapping of Flax's
reduction / feature axes onto the kernels' [rows, H] form.

Any reduction axes map onto that form (move them last and flatten them into
H) as long as every feature axis is also a reduction axis: then the
parameters broadcast over the reduced block and flatten the same way, and
autodiff of the broadcast sums their gradients back.

Under `jax.numpy_dtype_promotion("strict")` Flax's own arithmetic refuses
to mix dtypes (bfloat16 activations with float32 statistics or
parameters, ...): the decisions ask JAX in the caller's mode whether Flax's
steps go through (`promotion.upstream_promotes`) and send the calls it
refuses to Flax, which raises its own error; our own questions about the
dtypes are answered under standard promotion in every mode.

Nothing here imports Flax.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.validate import KERNEL_DTYPES, check_epsilon
from .promotion import standard_promotion, upstream_promotes

F32 = np.dtype(jnp.float32)


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


# ------------------------------------------------------------- decisions


def structure_declines(
    x: Any, *, mask: Any, axis_name: Any, reduction_axes: Any, feature_axes: Any, param_sizes: tuple[int, ...] = ()
) -> str | None:
    """The steps both norms take first: a non-empty array, no mask, no
    cross-device statistics, valid axes with the feature axes among the
    reduction axes, and parameters of the feature axes' size."""
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
    return None


def statistics_dtype(requested: Any, x_dtype: Any, force_float32: bool) -> np.dtype | None:
    """The dtype Flax computes the statistics in: `requested` (the module's
    `dtype`) or x's, promoted with float32 when `force_float32` (linen's
    `force_float32_reductions`, always in nnx); None where the caller's
    promotion mode refuses that promotion (strict, with a 16-bit or float64
    dtype), as it refuses Flax's own."""
    dtype = requested if requested is not None else x_dtype
    if not force_float32:
        return upstream_promotes(jnp.result_type, dtype)
    return upstream_promotes(jnp.promote_types, dtype, jnp.float32)


def stats_and_arith_declines(stats_dtype: Any, arith_dtypes: tuple[Any, ...]) -> str | None:
    """float32 statistics, and float32 arithmetic once `arith_dtypes` (the
    dtypes taking part in Flax's arithmetic) meet float32.

    Flax's arithmetic combines x, the statistics and the parameters pairwise
    (x - mean, mul * scale, y + bias), and those pairs chain every dtype to
    every other: where the caller's promotion mode refuses to combine
    `arith_dtypes` (strict, with any two of them different), Flax raises."""
    if stats_dtype is None:
        return "statistics dtype refused by the promotion mode"
    if np.dtype(stats_dtype) != F32:
        return f"{np.dtype(stats_dtype).name} statistics"
    combined = upstream_promotes(jnp.result_type, *arith_dtypes)
    if combined is None:
        return "dtypes the promotion mode does not combine"
    arith = standard_promotion(combined, jnp.float32)
    if arith != F32:
        return f"{arith.name} arithmetic"
    return None


def epsilon_declines(epsilon: Any, stats_dtype: Any = F32) -> str | None:
    """A static finite float >= 0 (finite in float32) that the caller's
    promotion mode adds to a `stats_dtype` variance (strict refuses a NumPy
    float64 one under jax_enable_x64, as in Flax's `var + epsilon`)."""
    try:
        check_epsilon("", epsilon)
    except (TypeError, ValueError):
        return "epsilon"
    if upstream_promotes(jnp.result_type, stats_dtype, epsilon) is None:
        return "epsilon of a dtype the promotion mode does not add to the statistics"
    return None


# ---------------------------------------------------------------- layout


def kernel_input(x: jax.Array, out_dtype: np.dtype) -> jax.Array:
    """x in the dtype to hand the kernel, which rounds its float32 result
    once to its input's dtype: the output dtype when that holds x exactly,
    else float32 (then the one rounding is the caller's cast to out_dtype)."""
    if np.dtype(x.dtype) in KERNEL_DTYPES and standard_promotion(x.dtype, out_dtype) == out_dtype:
        return x.astype(out_dtype)
    return x.astype(jnp.float32)


def normalize_as_rows(
    x: jax.Array,
    params: tuple[tuple[jax.Array | None, float], ...],
    *,
    reduction_axes: Any,
    feature_axes: Any,
    out_dtype: Any,
    kernel: Callable[..., jax.Array],
) -> jax.Array:
    """`kernel(x2d, *rows)` over Flax's reduction axes, cast to `out_dtype`.

    x's reduction axes are moved last (in order) and flattened into H; each
    (parameter, fill) in `params` becomes a float32 [H] row: the parameter
    (as Flax stores it, sized by the feature axes) broadcast over the
    reduced block, or `fill` where it is None (None where both are). The caller's kernel_declines
    must have accepted the call."""
    red = canonical_axes(reduction_axes, x.ndim)
    feat = canonical_axes(feature_axes, x.ndim)
    assert red is not None and feat is not None and set(feat) <= set(red), "kernel_declines said no"
    out_dtype = np.dtype(out_dtype)
    x_in = kernel_input(x, out_dtype)

    keep = [a for a in range(x.ndim) if a not in red]
    perm = keep + sorted(red)
    identity = perm == list(range(x.ndim))
    xt = x_in if identity else jnp.transpose(x_in, perm)
    lead = xt.shape[: len(keep)]
    h = math.prod(xt.shape[len(keep) :])
    feature_shape = [x.shape[a] if a in feat else 1 for a in range(x.ndim)]
    block_shape = [x.shape[a] if a in red else 1 for a in range(x.ndim)]

    def as_row(p: jax.Array | None, fill: float | None) -> jax.Array | None:
        if p is None:
            # fill None: the kernel takes no such row (a LayerNorm without bias).
            return None if fill is None else jnp.full((h,), fill, jnp.float32)
        # float32, like the arithmetic Flax does with the parameters: the
        # gradient stays float32 until it meets the parameter's own dtype.
        p = jnp.broadcast_to(p.astype(jnp.float32).reshape(feature_shape), block_shape)
        if not identity:
            p = jnp.transpose(p, perm)
        return p.reshape(h)

    y = kernel(xt.reshape(*lead, h), *(as_row(p, fill) for p, fill in params)).reshape(xt.shape)
    if not identity:
        y = jnp.transpose(y, np.argsort(perm))
    return y.astype(out_dtype)
