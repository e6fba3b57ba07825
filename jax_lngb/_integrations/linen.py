"""`jax_lngb.flax.LayerNorm`: a drop-in for `flax.linen.LayerNorm` whose
backward runs jax_lngb's kernels.

It *is* a `flax.linen.LayerNorm` (a subclass; only `__call__` differs), so it
takes the same attributes with the same defaults (`epsilon=1e-6`,
`dtype=None`, `param_dtype=float32`, `use_bias`, `use_scale`, `bias_init`,
`scale_init`, `reduction_axes`, `feature_axes`, `axis_name`,
`use_fast_variance`, `force_float32_reductions`, ...), creates the same
parameters (`scale`, `bias`, same shapes, same order, so the same values from
the same initializer and key) and gets the same auto-generated name
(`LayerNorm_0`, ...): swapping the import in a model definition keeps its
checkpoints loadable.

    from jax_lngb.flax import LayerNorm     # instead of flax.linen.LayerNorm

Every configuration Flax accepts works. The kernel serves the calls whose
statistics and arithmetic are float32 (float32/float16/bfloat16 inputs,
parameters and outputs), with every feature axis among the reduction axes
(any reduction axes: they are moved last and flattened), without `mask` or
`axis_name`; every other call (see `flax_layer_norm.DECISION_TABLE`) runs Flax's
own `LayerNorm.__call__`, so it behaves exactly as Flax does, errors
included.

Semantics kept from Flax on the kernel path: statistics in float32; the
output dtype is `dtype`, or with `dtype=None` the promotion of the input's
and the parameters' dtypes (bfloat16 activations with float32 parameters
give float32); parameters are used in float32 arithmetic. One difference:
the variance is always computed two-pass, E[(x - E[x])^2], and the mean
relative to each row's first element; `use_fast_variance=True` (Flax's
default, E[x^2] - E[x]^2) gives the result Flax gives with
`use_fast_variance=False` (equal within float32 rounding for
well-conditioned data, far more accurate when |mean| >> std).

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

from .flax_common import canonical_axes, statistics_dtype
from .flax_layer_norm import flax_layer_norm, layer_norm_declines
from .flax_rms_norm import flax_rms_norm, rms_norm_declines

__all__ = ["LayerNorm", "RMSNorm"]


class LayerNorm(nn.LayerNorm):
    """`flax.linen.LayerNorm` with jax_lngb's LayerNorm backward (see the module docstring)."""

    @nn.compact
    def __call__(self, x: Any, *, mask: jax.Array | None = None) -> jax.Array:
        """Normalizes `x` over `reduction_axes`; same contract as Flax's."""
        if self._declines(x, mask) is not None:
            return super().__call__(x, mask=mask)
        x = jnp.asarray(x)
        feat = canonical_axes(self.feature_axes, x.ndim)
        # The parameters exactly as Flax creates them: shape read off the
        # canonical feature axes in Flax's order, scale before bias.
        param_shape = [x.shape[a] for a in feat]
        scale = self.param("scale", self.scale_init, param_shape, self.param_dtype) if self.use_scale else None
        bias = self.param("bias", self.bias_init, param_shape, self.param_dtype) if self.use_bias else None
        out_dtype = _flax_dtypes.canonicalize_dtype(x, scale, bias, dtype=self.dtype)
        return flax_layer_norm(
            x,
            scale,
            bias,
            reduction_axes=self.reduction_axes,
            feature_axes=self.feature_axes,
            epsilon=self.epsilon,
            out_dtype=out_dtype,
        )

    def _declines(self, x: Any, mask: Any) -> str | None:
        """Why the kernel does not serve this call (None: it does). Decided
        before any parameter is created, from the dtypes Flax would use."""
        if not hasattr(x, "ndim") or not hasattr(x, "dtype"):
            return "x is not an array"
        x_dtype = jnp.result_type(x)
        stats_dtype = statistics_dtype(self.dtype, x_dtype, getattr(self, "force_float32_reductions", True))
        feat = canonical_axes(self.feature_axes, getattr(x, "ndim", 0))
        params = []
        if feat is not None:
            shape = [x.shape[a] for a in feat]
            for use, name, init in (
                (self.use_scale, "scale", self.scale_init),
                (self.use_bias, "bias", self.bias_init),
            ):
                if use:
                    params.append(self._param_dtype(name, init, shape))
        try:
            out_dtype = _flax_dtypes.canonicalize_dtype(
                jnp.zeros((), x_dtype), *(jnp.zeros((), d) for d in params), dtype=self.dtype
            )
        except (TypeError, ValueError):
            return "no valid output dtype"
        return layer_norm_declines(
            x,
            mask=mask,
            axis_name=self.axis_name,
            reduction_axes=self.reduction_axes,
            feature_axes=self.feature_axes,
            epsilon=self.epsilon,
            stats_dtype=stats_dtype,
            arith_dtypes=(x_dtype, stats_dtype, *params),
            out_dtype=out_dtype,
        )

    def _param_dtype(self, name: str, init: Any, shape: list[int]) -> Any:
        """The dtype `self.param(name, ...)` will return: the stored value's
        when there is one, else what the initializer gives (shape only)."""
        if self.has_variable("params", name):
            return jnp.result_type(nn.meta.unbox(self.get_variable("params", name)))
        try:
            out = jax.eval_shape(lambda k: init(k, shape, self.param_dtype), jax.random.key(0))
            return nn.meta.unbox(out).dtype
        except Exception:
            return self.param_dtype


class RMSNorm(nn.RMSNorm):
    """`flax.linen.RMSNorm` computed by `rms_norm` (see the module
    docstring); exported as `jax_lngb.flax.RMSNorm`. The class name is
    Flax's own because linen derives the auto-generated module name
    (`RMSNorm_0`, the checkpoint key) from it."""

    @nn.compact
    def __call__(self, x: Any, *, mask: jax.Array | None = None) -> jax.Array:
        """Normalizes `x` over `reduction_axes`; same contract as Flax's."""
        # Decided before the scale is created: Flax creates it only once.
        if self._declines(x, mask) is not None:
            return super().__call__(x, mask=mask)
        x = jnp.asarray(x)
        feat = canonical_axes(self.feature_axes, x.ndim)
        scale = None
        if self.use_scale:
            # Exactly Flax's call: the shape read off the canonical feature axes
            # in Flax's order.
            scale = self.param("scale", self.scale_init, [x.shape[a] for a in feat], self.param_dtype)
            if not self.force_float32_reductions:
                scale = jnp.asarray(scale, self.param_dtype)
        out_dtype = _flax_dtypes.canonicalize_dtype(x, scale, dtype=self.dtype)
        return flax_rms_norm(
            x,
            scale,
            reduction_axes=self.reduction_axes,
            feature_axes=self.feature_axes,
            epsilon=self.epsilon,
            out_dtype=out_dtype,
        )

    def _declines(self, x: Any, mask: Any) -> str | None:
        """Why the kernel does not serve this call (None: it does), from the
        dtypes Flax would use, without creating anything."""
        if not hasattr(x, "ndim") or not hasattr(x, "dtype"):
            return "x is not an array"
        x_dtype = jnp.result_type(x)
        stats_dtype = statistics_dtype(self.dtype, x_dtype, self.force_float32_reductions)
        scale_dtype = None
        feat = canonical_axes(self.feature_axes, x.ndim)
        if self.use_scale and feat is not None:
            if self.force_float32_reductions:
                scale_dtype = self._scale_dtype([x.shape[a] for a in feat])
            else:
                scale_dtype = self.param_dtype
        try:
            args = [jnp.zeros((), x_dtype)] + ([jnp.zeros((), scale_dtype)] if scale_dtype is not None else [])
            out_dtype = _flax_dtypes.canonicalize_dtype(*args, dtype=self.dtype)
        except (TypeError, ValueError):
            out_dtype = None
        return rms_norm_declines(
            x,
            mask=mask,
            axis_name=self.axis_name,
            reduction_axes=self.reduction_axes,
            feature_axes=self.feature_axes,
            epsilon=self.epsilon,
            stats_dtype=stats_dtype,
            scale_dtype=scale_dtype,
            out_dtype=out_dtype,
        )

    def _scale_dtype(self, shape: list[int]) -> Any:
        """The dtype `self.param("scale", ...)` will return: the stored
        value's when there is one, else what the initializer gives."""
        if self.has_variable("params", "scale"):
            return jnp.result_type(nn.meta.unbox(self.get_variable("params", "scale")))
        try:
            out = jax.eval_shape(lambda k: self.scale_init(k, shape, self.param_dtype), jax.random.key(0))
            return nn.meta.unbox(out).dtype
        except Exception:
            return self.param_dtype
