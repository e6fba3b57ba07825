"""`jax_lngb.nnx.LayerNorm`: a drop-in for `flax.nnx.LayerNorm` whose
backward runs jax_lngb's kernels.

It *is* a `flax.nnx.LayerNorm` (a subclass; only `__call__` differs): same
constructor (`num_features`, `epsilon=1e-6`, `dtype=None`,
`param_dtype=float32`, `use_bias`, `use_scale`, initializers, axes, `rngs`,
...), same `scale`/`bias` parameters and the same state tree, so
`nnx.state(original)` loads into it with `nnx.update` unchanged.

    from jax_lngb.nnx import LayerNorm      # instead of flax.nnx.LayerNorm

Every configuration Flax accepts works: the kernel serves what
`jax_lngb.flax.LayerNorm` serves (float32 statistics and arithmetic, every
feature axis among the reduction axes, no `mask`, no `axis_name`), every
other call runs Flax's own `LayerNorm.__call__`. On the kernel path the
input and both parameters are first promoted together with the module's
`promote_dtype` (to `dtype` when given), as Flax does; statistics are
float32; the output dtype follows Flax's rules; the variance is two-pass
whatever `use_fast_variance` says.

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

from .flax_common import statistics_dtype
from .flax_layer_norm import flax_layer_norm, layer_norm_declines
from .flax_rms_norm import flax_rms_norm, rms_norm_declines

__all__ = ["LayerNorm", "RMSNorm"]


class LayerNorm(_nnx.LayerNorm):
    """`flax.nnx.LayerNorm` with jax_lngb's LayerNorm backward (see the module docstring)."""

    def __call__(self, x: Any, *, mask: jax.Array | None = None) -> jax.Array:
        """Normalizes `x` over `reduction_axes`; same contract as Flax's."""
        if not hasattr(x, "ndim") or not hasattr(x, "dtype"):
            return super().__call__(x, mask=mask)
        scale = self.scale[...] if self.scale is not None else None
        bias = self.bias[...] if self.bias is not None else None
        promote = getattr(self, "promote_dtype", None)
        try:
            if promote is not None:
                xp, scale, bias = promote((x, scale, bias), dtype=self.dtype)
            else:
                xp = x
            xp = jnp.asarray(xp)
            out_dtype = _nnx_dtypes.canonicalize_dtype(xp, scale, bias, dtype=self.dtype)
        except (TypeError, ValueError):
            return super().__call__(x, mask=mask)  # Flax's own error, if any
        stats_dtype = statistics_dtype(self.dtype, xp.dtype, True)
        params = [p for p in (scale, bias) if p is not None]
        why = layer_norm_declines(
            xp,
            mask=mask,
            axis_name=self.axis_name,
            reduction_axes=self.reduction_axes,
            feature_axes=self.feature_axes,
            epsilon=self.epsilon,
            stats_dtype=stats_dtype,
            arith_dtypes=(xp.dtype, stats_dtype, *(p.dtype for p in params)),
            out_dtype=out_dtype,
            param_sizes=tuple(p.size for p in params),
        )
        if why is not None:
            return super().__call__(x, mask=mask)
        return flax_layer_norm(
            xp,
            scale,
            bias,
            reduction_axes=self.reduction_axes,
            feature_axes=self.feature_axes,
            epsilon=self.epsilon,
            out_dtype=out_dtype,
        )


class RMSNorm(_nnx.RMSNorm):
    """`flax.nnx.RMSNorm` computed by `rms_norm` (see the module docstring);
    exported as `jax_lngb.nnx.RMSNorm` (nnx state is keyed by attribute
    paths, not class names, so the name does not reach checkpoints)."""

    def __call__(self, x: Any, mask: jax.Array | None = None) -> jax.Array:
        """Normalizes `x` over `reduction_axes`; same contract as Flax's."""
        if not hasattr(x, "ndim") or not hasattr(x, "dtype"):
            return super().__call__(x, mask)
        scale = self.scale[...] if self.scale is not None else None
        try:
            # Flax's first step: x and the scale promoted together (to
            # `dtype` when given) by the module's promote_dtype.
            # (Flax releases before the module attribute had the function only.)
            promote = getattr(self, "promote_dtype", _nnx_dtypes.promote_dtype)
            xp, scale = promote((x, scale), dtype=self.dtype)
            xp = jnp.asarray(xp)
            out_dtype = _nnx_dtypes.canonicalize_dtype(xp, scale, dtype=self.dtype)
        except (TypeError, ValueError):
            return super().__call__(x, mask)  # Flax's own error, if any
        stats_dtype = statistics_dtype(self.dtype, xp.dtype, True)
        why = rms_norm_declines(
            xp,
            mask=mask,
            axis_name=self.axis_name,
            reduction_axes=self.reduction_axes,
            feature_axes=self.feature_axes,
            epsilon=self.epsilon,
            stats_dtype=stats_dtype,
            scale_dtype=scale.dtype if scale is not None else None,
            out_dtype=out_dtype,
            scale_size=scale.size if scale is not None else None,
        )
        if why is not None:
            return super().__call__(x, mask)
        return flax_rms_norm(
            xp,
            scale,
            reduction_axes=self.reduction_axes,
            feature_axes=self.feature_axes,
            epsilon=self.epsilon,
            out_dtype=out_dtype,
        )
