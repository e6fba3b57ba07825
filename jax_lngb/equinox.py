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
the output has the input's dtype. Every input Equinox accepts works: the
kernel serves non-empty inputs of exactly `shape` that compute in float32
(float32, float16, bfloat16 or integer inputs) with weights that do not
bring in float64 or complex values (and a static `eps` >= 0); anything else
(float64 under jax_enable_x64, complex, a wrong shape, ...) runs Equinox's
own `LayerNorm.__call__`, with its results and errors.

Batches go through `jax.vmap(layer)` (or `jax.vmap(jax.vmap(layer))` over
batch and sequence): with the weight and bias not mapped, the forward's
batching rule makes the mapped axes more rows of the same problem, so the
whole batch is one kernel call over all its rows, and reverse mode gives
dweight/dbias as one reduction over all rows. Under `vmap(grad(...))` the
parameter gradients stay per example.

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

from ._equinox_common import NO_STATE as _NO_STATE
from ._equinox_common import carry_leaves, dispatch, example_fits, params_and_eps_serve
from ._validate import KERNEL_DTYPES
from .norm import layer_norm

from ._equinox_rms import RMSNorm  # noqa: E402  (the RMSNorm drop-in, same rules)
from ._equinox_rms import from_equinox as _rms_from_equinox  # noqa: E402

__all__ = ["LayerNorm", "RMSNorm", "convert"]

class LayerNorm(_eqx.nn.LayerNorm):
    """`equinox.nn.LayerNorm` with jax_lngb's LayerNorm backward (see the module docstring)."""

    def __call__(self, x: jax.Array, state: Any = _NO_STATE, *, key: Any = None) -> Any:
        """Normalizes the unbatched `x` (shape == self.shape) over all its elements.

        `state` is passed through and `key` ignored, as in Equinox: with
        `state` the result is `(output, state)`.
        """
        return dispatch(self, super().__call__, x, state, key, "jax_lngb.equinox.LayerNorm")

    def _kernel_serves(self, x: Any) -> bool:
        """Whether Equinox's computation for `x` is one the kernel does: float32
        compute, a non-empty input of exactly the layer's shape, float32 /
        16-bit / integer parameters and a usable eps."""
        if not example_fits(self, x):
            return False
        try:
            with jax.numpy_dtype_promotion("standard"):
                compute = np.dtype(jnp.result_type(x.dtype, jnp.float32))
        except TypeError:
            return False
        return compute == np.dtype(jnp.float32) and params_and_eps_serve(self)

    def _normalize(self, x: jax.Array) -> jax.Array:
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
    """Returns `tree` with every `equinox.nn.LayerNorm` and `equinox.nn.RMSNorm`
    in it replaced by this module's drop-in carrying the same parameters and
    settings."""

    def swap(node: Any) -> Any:
        if isinstance(node, _eqx.nn.RMSNorm):
            return _rms_from_equinox(node)
        if isinstance(node, _eqx.nn.LayerNorm) and not isinstance(node, LayerNorm):
            new = LayerNorm(node.shape, eps=node.eps, use_weight=node.use_weight, use_bias=node.use_bias)
            return carry_leaves(node, new)
        return node

    return jax.tree_util.tree_map(swap, tree, is_leaf=lambda n: isinstance(n, (_eqx.nn.LayerNorm, _eqx.nn.RMSNorm)))
