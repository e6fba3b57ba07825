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
(float32, float16, bfloat16 or integer inputs) with real weights (Equinox
casts them to float32 first, float64 ones under jax_enable_x64 included, and
so does the kernel) and a static `eps` >= 0; anything else (float64 inputs
under jax_enable_x64, complex, a wrong shape, ...) runs Equinox's own
`LayerNorm.__call__`, with its results and errors. Equinox casts
explicitly, so all of this holds under strict dtype promotion too.

Batches go through `jax.vmap(layer)` (or `jax.vmap(jax.vmap(layer))` over
batch and sequence): with the weight and bias not mapped, the forward's
batching rule makes the mapped axes more rows of the same problem, so the
whole batch is one kernel call over all its rows, and reverse mode gives
dweight/dbias as one reduction over all rows. Under `vmap(grad(...))` the
parameter gradients stay per example.

Needs Equinox: `pip install 'jax_lngb[equinox]'`.

## RMSNorm

`RMSNorm` drop-in for Equinox (`jax_lngb.equinox.RMSNorm`) whose forward
and backward run `rms_norm`.

It *is* an `equinox.nn.RMSNorm` (a subclass; only `__call__` differs): same
constructor (`shape`, `eps=1e-5`, `use_weight=True`, `use_bias=True`,
`dtype`) and fields (`shape`, `eps`, `use_weight`, `use_bias`, `weight`,
`bias`), so `eqx.tree_deserialise_leaves` of an Equinox checkpoint, or
`from_equinox(layer)` of a built layer, gives the same parameters.

Equinox's semantics: the input is one unbatched example of exactly `shape`;
compute dtype c = result_type(x.dtype, float32); over the whole example,

    out = weight.astype(c) * (rsqrt(mean(x^2) + eps) * x) + bias.astype(c)

cast back to x's dtype. The kernel serves float32, float16 and bfloat16
inputs of exactly `shape` (non-empty) with real weight/bias (cast to float32
as Equinox casts them; float64 ones under jax_enable_x64 too) and a static
`eps` >= 0: the example flattens to one row of H = prod(shape), the weight
to [H]; the bias is added outside the kernel, in float32, before the one
rounding to x's dtype. Everything else (integer inputs, whose cast back
truncates; float64 inputs under jax_enable_x64; complex; a wrong shape, ...)
runs Equinox's own `__call__`, results and errors.

Batches go through `jax.vmap(layer)` or `jax.vmap(jax.vmap(layer))`: with
the weight not mapped, `rms_norm`'s batching rule makes the mapped axes
more rows of the same problem, so the whole batch is one forward and one
backward kernel call over all its tokens, and dweight comes out of the
kernel already summed.
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

from .._core.validate import KERNEL_DTYPES
from .._ops.layer_norm.api import layer_norm
from .._ops.rms_norm.api import rms_norm
from .equinox_common import NO_STATE as _NO_STATE
from .equinox_common import carry_leaves, dispatch, example_fits, params_and_eps_serve

__all__ = ["LayerNorm", "RMSNorm", "convert", "from_equinox"]


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
        compute, a non-empty input of exactly the layer's shape, real
        parameters and a usable eps."""
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
        # Without a bias the kernel reads none and forms no bias gradient.
        beta = self.bias.astype(jnp.float32).reshape(n) if self.use_bias else None
        # layer_norm rounds its float32 result once to its input's dtype:
        # 16-bit and float32 inputs go in as they are, others (integers) as
        # float32 like Equinox, and the result is cast back like Equinox.
        x_in = x if np.dtype(orig) in KERNEL_DTYPES else x.astype(jnp.float32)
        y = layer_norm(x_in.reshape(n), gamma, beta, epsilon=self.eps)
        return y.reshape(self.shape).astype(orig)


class RMSNorm(_eqx.nn.RMSNorm):
    """`equinox.nn.RMSNorm` computed by `rms_norm` (see the module docstring)."""

    def __call__(self, x: jax.Array, state: Any = _NO_STATE, *, key: Any = None) -> Any:
        """Normalizes the unbatched `x` (shape == self.shape) over all its elements.

        `state` is passed through and `key` ignored, as in Equinox: with
        `state` the result is `(output, state)`.
        """
        return dispatch(self, super().__call__, x, state, key, "jax_lngb.equinox.RMSNorm")

    def _kernel_serves(self, x: Any) -> bool:
        """Whether Equinox's computation for `x` is one the kernel does."""
        return example_fits(self, x) and np.dtype(x.dtype) in KERNEL_DTYPES and params_and_eps_serve(self)

    def _normalize(self, x: jax.Array) -> jax.Array:
        n = math.prod(self.shape)
        # float32 like Equinox's cast to the compute dtype, which also keeps the
        # gradient float32 until it meets the parameter's own dtype.
        gamma = self.weight.astype(jnp.float32).reshape(n) if self.use_weight else jnp.ones((n,), jnp.float32)
        if not self.use_bias:
            # rms_norm rounds its float32 result once to x's dtype, as Equinox does.
            return rms_norm(x.reshape(n), gamma, epsilon=float(self.eps)).reshape(self.shape)
        # With a bias the one rounding comes after the float32 sum.
        y = rms_norm(x.astype(jnp.float32).reshape(n), gamma, epsilon=float(self.eps))
        y = y + self.bias.astype(jnp.float32).reshape(n)
        return y.reshape(self.shape).astype(x.dtype)


def from_equinox(layer: Any) -> Any:
    """This module's drop-in for one `equinox.nn.LayerNorm` or
    `equinox.nn.RMSNorm`, with `layer`'s settings and its parameter leaves as
    they are (same arrays, same dtypes); a drop-in comes back unchanged."""
    if isinstance(layer, (LayerNorm, RMSNorm)):
        return layer
    if isinstance(layer, _eqx.nn.RMSNorm):
        new = RMSNorm(layer.shape, eps=layer.eps, use_weight=layer.use_weight, use_bias=layer.use_bias)
    elif isinstance(layer, _eqx.nn.LayerNorm):
        new = LayerNorm(layer.shape, eps=layer.eps, use_weight=layer.use_weight, use_bias=layer.use_bias)
    else:
        raise TypeError(
            f"from_equinox: layer must be an equinox.nn.LayerNorm or equinox.nn.RMSNorm; got {type(layer).__name__}"
        )
    return carry_leaves(layer, new)


def convert(tree: Any) -> Any:
    """Returns `tree` with every `equinox.nn.LayerNorm` and `equinox.nn.RMSNorm`
    in it replaced by this module's drop-in carrying the same parameters and
    settings."""

    def swap(node: Any) -> Any:
        if isinstance(node, (_eqx.nn.LayerNorm, _eqx.nn.RMSNorm)):
            return from_equinox(node)
        return node

    return jax.tree_util.tree_map(swap, tree, is_leaf=lambda n: isinstance(n, (_eqx.nn.LayerNorm, _eqx.nn.RMSNorm)))
