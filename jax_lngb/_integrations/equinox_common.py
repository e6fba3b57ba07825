"""What the Equinox drop-ins (`jax_lngb.equinox.LayerNorm` and
`jax_lngb.equinox.RMSNorm`) share: the marker for "no `state` passed", the
`__call__` dispatch between the kernel and Equinox's own computation, the
checks on the example, parameters and eps that both kernels need, and the
conversion of an Equinox layer that carries its parameter leaves over.

Nothing here imports Equinox: the layers hand themselves (and their
upstream `__call__`) in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.validate import check_epsilon
from .promotion import standard_promotion, upstream_promotes

# What a real (bool, integer or floating) parameter dtype promotes to with float32.
_REAL = (np.dtype(jnp.float32), np.dtype(jnp.float64))


class _NoState:
    """Marks `state` as not passed (None is a value a caller may pass)."""

    def __repr__(self) -> str:
        return "<no state>"


NO_STATE = _NoState()


def dispatch(layer: Any, upstream: Callable[..., Any], x: Any, state: Any, key: Any, scope: str) -> Any:
    """`layer(x[, state], key=key)`: the kernel (`layer._normalize`) where
    `layer._kernel_serves(x)`, else Equinox's `upstream` call with the same
    arguments (its results and errors). `state` is passed through and `key`
    ignored, as in Equinox: with `state` the result is `(output, state)`."""
    if not layer._kernel_serves(x):
        if state is NO_STATE:
            return upstream(x, key=key)
        return upstream(x, state, key=key)
    with jax.named_scope(scope):
        out = layer._normalize(jnp.asarray(x))
    return out if state is NO_STATE else (out, state)


def example_fits(layer: Any, x: Any) -> bool:
    """Whether `x` is an array of exactly the layer's (non-empty) shape."""
    if not hasattr(x, "shape") or not hasattr(x, "dtype") or tuple(x.shape) != tuple(layer.shape):
        return False
    return math.prod(layer.shape) != 0


def params_and_eps_serve(layer: Any) -> bool:
    """Whether the layer's weight / bias (where used) and eps are ones the
    kernel computes with as Equinox does."""
    for use, p in ((layer.use_weight, layer.weight), (layer.use_bias, layer.bias)):
        if not use:
            continue
        if p is None or not hasattr(p, "dtype") or tuple(p.shape) != tuple(layer.shape):
            return False
        # Equinox casts the parameter to the (float32) compute dtype before
        # use, and so does the kernel path: any real dtype gives the same
        # float32 arithmetic (float64 included, which is what Equinox's
        # default dtype is under jax_enable_x64). A complex parameter loses
        # its imaginary part in that cast, with a warning: left to Equinox.
        # A question about the dtype, not arithmetic: asked under standard
        # promotion, since strict refuses bfloat16 with float32 where
        # Equinox's explicit cast does not.
        if standard_promotion(p.dtype, jnp.float32) not in _REAL:
            return False
    try:
        check_epsilon("", layer.eps)
    except (TypeError, ValueError):
        return False
    # Equinox adds eps to its float32 statistics in the caller's promotion
    # mode: an eps that mode does not add (strict, a NumPy float64 under
    # jax_enable_x64) is Equinox's error to raise.
    return upstream_promotes(jnp.result_type, jnp.float32, layer.eps) is not None


def carry_leaves(layer: Any, new: Any) -> Any:
    """`new` (a drop-in built with `layer`'s settings) with `layer`'s leaves
    as they are (same arrays, same dtypes). Same fields, so the same tree;
    None counts as a leaf, so partitioned models convert too."""
    is_none = lambda v: v is None
    leaves = jax.tree_util.tree_leaves(layer, is_leaf=is_none)
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(new, is_leaf=is_none), leaves)
