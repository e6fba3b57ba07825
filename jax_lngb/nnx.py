"""`jax_lngb.nnx.LayerNorm`: a drop-in for `flax.nnx.LayerNorm` whose
backward runs jax_lngb's kernels.

It *is* a `flax.nnx.LayerNorm` (a subclass; only `__call__` differs): same
constructor (`num_features`, `epsilon=1e-6`, `dtype=None`,
`param_dtype=float32`, `use_bias`, `use_scale`, initializers, axes, `rngs`,
...), same `scale`/`bias` parameters and the same state tree, so
`nnx.state(original)` loads into it with `nnx.update` unchanged.

    from jax_lngb.nnx import LayerNorm      # instead of flax.nnx.LayerNorm

Semantics kept from the installed Flax: where its LayerNorm has a
`promote_dtype` attribute (newer Flax releases; 0.12.0 has none), the input
and both parameters are first promoted together (to `dtype` when given), as
Flax does; statistics are float32; the output dtype follows Flax's rules.
The differences are those of `jax_lngb.flax.LayerNorm`: two-pass variance
whatever `use_fast_variance` says; `mask` and `axis_name` refused; feature
axes must be reduction axes; float32 compute only.

Needs Flax: `pip install 'jax_lngb[flax]'`.
"""

from __future__ import annotations

from typing import Any

try:
    from flax import nnx as _nnx
    from flax.nnx.nn import dtypes as _nnx_dtypes
except ImportError as e:
    raise ImportError(
        "jax_lngb.nnx needs Flax (with nnx), which is not installed: install it with "
        "`pip install 'jax_lngb[flax]'` (or `pip install flax`). "
        f"Cause: {e}"
    ) from e

import jax
import jax.numpy as jnp

from ._flax_norm import flax_layer_norm, refuse_unsupported

__all__ = ["LayerNorm"]

_OWNER = "jax_lngb.nnx.LayerNorm"


class LayerNorm(_nnx.LayerNorm):
    """`flax.nnx.LayerNorm` with jax_lngb's LayerNorm backward (see the module docstring)."""

    def __call__(self, x: Any, *, mask: jax.Array | None = None) -> jax.Array:
        """Normalizes `x` over `reduction_axes`; same contract as Flax's."""
        refuse_unsupported(_OWNER, mask=mask, axis_name=self.axis_name, axis_index_groups=self.axis_index_groups)
        scale = self.scale[...] if self.scale is not None else None
        bias = self.bias[...] if self.bias is not None else None
        promote = getattr(self, "promote_dtype", None)
        if promote is not None:
            x, scale, bias = promote((x, scale, bias), dtype=self.dtype)
        x = jnp.asarray(x)
        out_dtype = _nnx_dtypes.canonicalize_dtype(x, scale, bias, dtype=self.dtype)
        return flax_layer_norm(
            _OWNER,
            x,
            scale,
            bias,
            reduction_axes=self.reduction_axes,
            feature_axes=self.feature_axes,
            epsilon=self.epsilon,
            out_dtype=out_dtype,
        )
