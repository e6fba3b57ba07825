"""`jax_lngb.flax.LayerNorm`: a drop-in for `flax.linen.LayerNorm` whose
backward runs jax_lngb's kernels.

It *is* a `flax.linen.LayerNorm` (a subclass; only `__call__` differs), so it
takes the same attributes with the same defaults (`epsilon=1e-6`,
`dtype=None`, `param_dtype=float32`, `use_bias`, `use_scale`, `bias_init`,
`scale_init`, `reduction_axes`, `feature_axes`, ...), creates the same
parameters (`scale`, `bias`, same shapes, same order, so the same values from
the same initializer and key) and gets the same auto-generated name
(`LayerNorm_0`, ...): swapping the import in a model definition keeps its
checkpoints loadable.

    from jax_lngb.flax import LayerNorm     # instead of flax.linen.LayerNorm

Semantics kept from Flax: statistics in float32; the output dtype is `dtype`,
or with `dtype=None` the promotion of the input's and the parameters' dtypes
(bfloat16 activations with float32 parameters give float32); parameters are
used in float32 arithmetic. Differences:

* the variance is always computed two-pass, E[(x - E[x])^2];
  `use_fast_variance=True` (Flax's default, E[x^2] - E[x]^2) is accepted and
  changes nothing, the result is the one Flax gives with
  `use_fast_variance=False` (equal within float32 rounding for
  well-conditioned data, more accurate when |mean| >> std);
* `mask`, `axis_name`/`axis_index_groups` and `force_float32_reductions=False`
  with 16-bit statistics raise `NotImplementedError`;
* feature axes must be among the reduction axes (`ValueError` otherwise);
  any reduction axes work (they are moved last and flattened);
* float64/complex configurations (only possible under `jax_enable_x64`)
  raise `TypeError`: the kernels compute in float32.

Needs Flax: `pip install 'jax_lngb[flax]'`.
"""

from __future__ import annotations

from typing import Any

try:
    import flax.linen as nn
    from flax.linen import dtypes as _flax_dtypes
except ImportError as e:
    raise ImportError(
        "jax_lngb.flax needs Flax, which is not installed: install it with "
        "`pip install 'jax_lngb[flax]'` (or `pip install flax`). "
        f"Cause: {e}"
    ) from e

import jax
import jax.numpy as jnp
import numpy as np

from ._flax_norm import canonical_axes, flax_layer_norm, refuse_unsupported

__all__ = ["LayerNorm"]

_OWNER = "jax_lngb.flax.LayerNorm"


class LayerNorm(nn.LayerNorm):
    """`flax.linen.LayerNorm` with jax_lngb's LayerNorm backward (see the module docstring)."""

    @nn.compact
    def __call__(self, x: Any, *, mask: jax.Array | None = None) -> jax.Array:
        """Normalizes `x` over `reduction_axes`; same contract as Flax's."""
        refuse_unsupported(_OWNER, mask=mask, axis_name=self.axis_name, axis_index_groups=self.axis_index_groups)
        x = jnp.asarray(x)
        if not getattr(self, "force_float32_reductions", True):
            stats_dtype = self.dtype if self.dtype is not None else x.dtype
            if np.dtype(jnp.promote_types(stats_dtype, jnp.float32)) != np.dtype(stats_dtype):
                raise NotImplementedError(
                    f"{_OWNER}: force_float32_reductions=False asks for {np.dtype(stats_dtype).name} "
                    "statistics; jax_lngb always computes them in float32 (leave it True)"
                )
        # The parameters exactly as Flax creates them: shape read off the
        # canonical feature axes in Flax's order, scale before bias.
        if x.ndim == 0:
            raise ValueError(f"{_OWNER}: the input must have rank >= 1; got a scalar")
        feat = canonical_axes(_OWNER, "feature_axes", x.ndim, self.feature_axes)
        param_shape = [x.shape[a] for a in feat]
        scale = self.param("scale", self.scale_init, param_shape, self.param_dtype) if self.use_scale else None
        bias = self.param("bias", self.bias_init, param_shape, self.param_dtype) if self.use_bias else None
        out_dtype = _flax_dtypes.canonicalize_dtype(x, scale, bias, dtype=self.dtype)
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
