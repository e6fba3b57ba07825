"""`jax_lngb.equinox.LayerNorm`: a drop-in for `equinox.nn.LayerNorm` whose
backward runs jax_lngb's kernels.

It *is* an `equinox.nn.LayerNorm` (a subclass; only `__call__` differs):
same constructor (`shape`, `eps=1e-5`, `use_weight`, `use_bias`, `dtype`)
and fields (`weight`, `bias`, `shape`, `eps`, `use_weight`, `use_bias`), so
`eqx.tree_deserialise_leaves` of an Equinox checkpoint, or
`convert(model)` of a built model, gives the same parameters.

    from jax_lngb.equinox import LayerNorm  # instead of equinox.nn.LayerNorm

Equinox's semantics: the input is one unbatched example of exactly `shape`;
mean and variance are taken over the whole of it (compute dtype
`result_type(x.dtype, float32)`), the weight and bias have `shape` too, and
the output has the input's dtype. Batches go through `jax.vmap(layer)`: then
the LayerNorm gradient primitive's batching rule is what runs, one kernel
call for the whole batch, with per-example parameter gradients (summed by
JAX when the parameters were not mapped, kept apart under `vmap(grad(...))`).

Needs Equinox: `pip install 'jax_lngb[equinox]'`.
"""

from __future__ import annotations

import math
from typing import Any

try:
    import equinox as _eqx
except ImportError as e:
    raise ImportError(
        "jax_lngb.equinox needs Equinox, which is not installed: install it with "
        "`pip install 'jax_lngb[equinox]'` (or `pip install equinox`). "
        f"Cause: {e}"
    ) from e

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import KERNEL_DTYPES
from .norm import layer_norm

__all__ = ["LayerNorm", "convert"]

_OWNER = "jax_lngb.equinox.LayerNorm"


class _NoState:
    """Marks `state` as not passed (None is a value a caller may pass)."""

    def __repr__(self) -> str:
        return "<no state>"


_NO_STATE = _NoState()


class LayerNorm(_eqx.nn.LayerNorm):
    """`equinox.nn.LayerNorm` with jax_lngb's LayerNorm backward (see the module docstring)."""

    def __call__(self, x: jax.Array, state: Any = _NO_STATE, *, key: Any = None) -> Any:
        """Normalizes the unbatched `x` (shape == self.shape) over all its elements.

        `state` is passed through and `key` ignored, as in Equinox: with
        `state` the result is `(output, state)`.
        """
        del key
        with jax.named_scope("jax_lngb.equinox.LayerNorm"):
            out = self._normalize(x)
        return out if state is _NO_STATE else (out, state)

    def _normalize(self, x: jax.Array) -> jax.Array:
        x = jnp.asarray(x)
        if x.shape != self.shape:
            raise ValueError(
                f"{_OWNER}: the input must have exactly the layer's shape {self.shape} (one unbatched "
                f"example); got {x.shape}. For a batch use jax.vmap(layer)(x)."
            )
        with jax.numpy_dtype_promotion("standard"):
            compute = np.dtype(jnp.result_type(x.dtype, jnp.float32))
        if compute != np.dtype(jnp.float32):
            raise TypeError(
                f"{_OWNER}: inputs must compute in float32 (float32, float16, bfloat16 or integer "
                f"inputs); got {x.dtype.name}, which computes in {compute.name}"
            )
        orig = x.dtype
        n = math.prod(self.shape)
        # Equinox casts the parameters to the compute dtype before use; so do
        # we, which also keeps per-example gradients float32 until JAX has
        # summed them and they meet the parameter's own dtype.
        gamma = self.weight.astype(jnp.float32).reshape(n) if self.use_weight else jnp.ones((n,), jnp.float32)
        beta = self.bias.astype(jnp.float32).reshape(n) if self.use_bias else jnp.zeros((n,), jnp.float32)
        # layer_norm rounds its float32 result once to its input's dtype:
        # 16-bit and float32 inputs go in as they are, others (integers) as
        # float32 like Equinox, and the result is cast back like Equinox.
        x_in = x if np.dtype(orig) in KERNEL_DTYPES else x.astype(jnp.float32)
        y = layer_norm(x_in.reshape(n), gamma, beta, epsilon=self.eps)
        return y.reshape(self.shape).astype(orig)


def convert(tree: Any) -> Any:
    """Returns `tree` with every `equinox.nn.LayerNorm` in it replaced by this
    module's LayerNorm carrying the same parameters and settings."""

    def swap(node: Any) -> Any:
        if isinstance(node, _eqx.nn.LayerNorm) and not isinstance(node, LayerNorm):
            new = LayerNorm(node.shape, eps=node.eps, use_weight=node.use_weight, use_bias=node.use_bias)
            # Same fields, so the same tree: carry the leaves over as they are
            # (None counted as a leaf, so partitioned models convert too).
            is_none = lambda v: v is None  # noqa: E731
            leaves = jax.tree_util.tree_leaves(node, is_leaf=is_none)
            return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(new, is_leaf=is_none), leaves)
        return node

    return jax.tree_util.tree_map(swap, tree, is_leaf=lambda n: isinstance(n, _eqx.nn.LayerNorm))
