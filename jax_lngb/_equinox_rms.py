"""`RMSNorm` drop-in for Equinox (`jax_lngb.equinox.RMSNorm`) whose forward
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
inputs of exactly `shape` (non-empty) with weight/bias that do not bring in
float64 or complex values and a static `eps` >= 0: the example flattens to
one row of H = prod(shape), the weight to [H]; the bias is added outside the
kernel, in float32, before the one rounding to x's dtype. Everything else
(integer inputs, whose cast back truncates; float64 under jax_enable_x64;
a wrong shape, ...) runs Equinox's own `__call__`, results and errors.

Batches go through `jax.vmap(layer)` or `jax.vmap(jax.vmap(layer))`: with
the weight not mapped, `rms_norm`'s batching rule makes the mapped axes
more rows of the same problem, so the whole batch is one forward and one
backward kernel call over all its tokens, and dweight comes out of the
kernel already summed.

Importing this module imports Equinox; `import jax_lngb` does not.
"""

from __future__ import annotations

import math
from typing import Any

try:
    import equinox as _eqx
except ImportError as e:
    raise ImportError(
        "jax_lngb's Equinox RMSNorm needs Equinox, which is not installed: install it with "
        "`pip install 'jax_lngb[equinox]'` (or `pip install equinox`). "
        f"Cause: {e}"
    ) from e

import jax
import jax.numpy as jnp
import numpy as np

from ._equinox_common import NO_STATE as _NO_STATE
from ._equinox_common import carry_leaves, dispatch, example_fits, params_and_eps_serve
from ._validate import KERNEL_DTYPES
from .rms_norm import rms_norm

__all__ = ["RMSNorm", "from_equinox"]


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


def from_equinox(layer: _eqx.nn.RMSNorm) -> RMSNorm:
    """This module's RMSNorm with `layer`'s settings and its parameter leaves
    as they are (same arrays, same dtypes)."""
    if not isinstance(layer, _eqx.nn.RMSNorm):
        raise TypeError(f"from_equinox: layer must be an equinox.nn.RMSNorm; got {type(layer).__name__}")
    if isinstance(layer, RMSNorm):
        return layer
    new = RMSNorm(layer.shape, eps=layer.eps, use_weight=layer.use_weight, use_bias=layer.use_bias)
    return carry_leaves(layer, new)
