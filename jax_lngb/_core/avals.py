"""Output types of our primitives under `shard_map`, across jax versions.

Inside `jax.shard_map(..., check_vma=True)` every value carries the set of
manual mesh axes it varies over ("vma"). A primitive whose abstract
evaluation builds its outputs from scratch types them as *invariant* (the
same on every device), which is a lie for a per-shard partial sum: a
`custom_vjp` returning it as the gradient of a replicated parameter then
passes JAX's type check without the psum it needs, and every device keeps
its own partial. So every abstract evaluation derives its outputs from an
input with `derived_aval`, which keeps the memory space, maps the sharding
to the output's axes, and sets the varying axes to the union of the inputs'
ones (outside `shard_map` that set is empty).

A `jax.custom_vjp` whose backward returns such a partial sum as the
cotangent of a replicated (invariant) parameter must then sum it itself: JAX
checks that each cotangent has its primal's type. `psum_to_match` does that
one psum, and nothing outside shard_map or with check_vma=False (where the
types carry no varying axes and shard_map's own transpose sums instead).

jax 0.7 keeps the set in `ShapedArray.vma`; later versions keep it in
`ShapedArray.manual_axis_type.varying`. Nothing else here depends on the
version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
from jax.sharding import PartitionSpec

__all__ = ["derived_aval", "psum_to_match", "varying_axes"]


def varying_axes(aval: Any) -> frozenset:
    """The manual mesh axes `aval` varies over (empty outside shard_map)."""
    mat = getattr(aval, "manual_axis_type", None)
    if mat is not None:
        return frozenset(mat.varying)
    return frozenset(getattr(aval, "vma", frozenset()))


def _with_varying(aval: Any, axes: frozenset) -> Any:
    if varying_axes(aval) == axes:
        return aval
    mat = getattr(aval, "manual_axis_type", None)
    if mat is not None:
        return aval.update(manual_axis_type=mat.update(varying=axes))
    return aval.update(vma=axes)


def derived_aval(
    like: Any,
    shape: Sequence[int],
    dtype: Any,
    spec_dims: Sequence[int | None],
    inputs: Sequence[Any] = (),
) -> jax.core.ShapedArray:
    """A ShapedArray of `shape`/`dtype` typed like the input aval `like`.

    Args:
      like: the input aval whose mesh and memory space the output shares.
      spec_dims: for each output axis, the axis of `like` whose sharding it
        inherits (explicit-sharding mode), or None for a replicated axis.
      inputs: every input aval; the output varies over the union of their
        manual axes.
    """
    sharding = getattr(like, "sharding", None)
    kwargs: dict[str, Any] = {}
    if sharding is not None and getattr(sharding, "spec", None) is not None:
        spec = tuple(sharding.spec) + (None,) * (len(like.shape) - len(sharding.spec))
        out_spec = PartitionSpec(*(None if d is None else spec[d] for d in spec_dims))
        kwargs["sharding"] = sharding.update(spec=out_spec)
    out = like.update(shape=tuple(shape), dtype=dtype, weak_type=False, **kwargs)
    axes = frozenset().union(*(varying_axes(a) for a in (like, *inputs)))
    return _with_varying(out, axes)


def psum_to_match(ct: jax.Array, primal: Any) -> jax.Array:
    """Sums the cotangent `ct` over the manual axes it varies over and its
    primal does not, so it gets the primal's type (one psum, or none).

    `primal` is the primal value (or its aval) the cotangent belongs to.
    """
    like = primal if isinstance(primal, jax.core.AbstractValue) else jax.typeof(primal)
    extra = varying_axes(jax.typeof(ct)) - varying_axes(like)
    if not extra:
        return ct
    return jax.lax.psum(ct, tuple(sorted(extra, key=str)))
