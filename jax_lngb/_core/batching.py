"""vmap support shared by the LayerNorm primitives.

Two ways to batch a primitive whose operands are rows ([*G, *rows, H], and
per-row statistics [*G, *rows]) and parameters ([H] or [*G, H]), where the
G leading axes (``batch_dims`` of them) are independent problems:

* more rows (`fold_into_rows`): when no parameter operand is mapped, the
  mapped axis becomes the first row axis, right after the group axes, and
  ``batch_dims`` stays. Exact for the primitives whose every output is per
  row (the forward, its tangent, LayerNormGrad): each row's result depends
  only on that row and the shared parameters. This is what keeps
  `vmap(vmap(layer))` of a per-example layer (Equinox) one problem over all
  its rows, with the parameters neither broadcast nor copied, and reverse
  mode of it then sums dgamma/dbeta over all those rows in one reduction,
  as the shared parameters need.
* a new problem (`move_to_groups`): the mapped axis becomes a new leading
  group axis of every operand (``batch_dims + 1``). Required for a
  reduction over rows (LayerNormGradBeta, the fused backward): there
  `vmap(grad(...))` asks for one gradient per mapped element, which summing
  the mapped axis into the rows would silently merge (SPEC section 5), and
  for any primitive whose parameters are mapped. Operands that are not
  mapped are broadcast: row operands and per-row statistics to the new group
  axis, parameters to one [H] row per group ([*G, H], the layout the row
  partitioning of `_core.partitioning` describes; it costs G * H values).

`row_wise_batcher` puts the two together for the primitives whose every
output is per row (LayerNorm's and RMSNorm's forward, tangent and
LayerNormGrad / RmsNormGrad); the reductions write their own batchers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

ROWS = "rows"  # [*G, *rows, H] row operands and [*G, *rows] statistics
PARAM = "param"  # [H] or [*G, H]


def _mapped_size(args: Sequence[jax.Array], dims: Sequence[int | None]) -> int:
    return next(a.shape[d] for a, d in zip(args, dims) if d is not None)


def fold_into_rows(
    args: Sequence[jax.Array], dims: Sequence[int | None], kinds: Sequence[str], batch_dims: int
) -> list[jax.Array] | None:
    """Operands for the same primitive with the mapped axis as the first row
    axis (position ``batch_dims``; ``batch_dims`` unchanged), or None when a
    parameter operand is mapped (the caller then uses `move_to_groups`).

    Only for primitives whose outputs are all per row; their outputs then
    carry the mapped axis at ``batch_dims``.
    """
    if any(d is not None for d, k in zip(dims, kinds) if k == PARAM):
        return None
    size = _mapped_size(args, dims)
    out = []
    for a, d, k in zip(args, dims, kinds):
        if k == PARAM:
            out.append(a)
        elif d is None:
            # An unmapped row operand (e.g. the primal x under vmap of a JVP
            # with only the tangent mapped): the same rows for every element.
            a = jnp.expand_dims(a, batch_dims)
            out.append(jnp.broadcast_to(a, a.shape[:batch_dims] + (size,) + a.shape[batch_dims + 1 :]))
        else:
            out.append(jnp.moveaxis(a, d, batch_dims))
    return out


def move_to_groups(
    args: Sequence[jax.Array], dims: Sequence[int | None], kinds: Sequence[str], batch_dims: int
) -> list[jax.Array]:
    """Operands for the same primitive with ``batch_dims + 1`` group axes."""
    size = _mapped_size(args, dims)
    # The existing group axes, from any row operand.
    groups = None
    for a, d, k in zip(args, dims, kinds):
        if k == ROWS:
            shape = a.shape if d is None else a.shape[:d] + a.shape[d + 1 :]
            groups = tuple(shape[:batch_dims])
            break
    assert groups is not None, "every LayerNorm primitive has a row operand"
    out = []
    for a, d, k in zip(args, dims, kinds):
        if k == ROWS:
            out.append(jnp.broadcast_to(a, (size, *a.shape)) if d is None else jnp.moveaxis(a, d, 0))
            continue
        h = a.shape[-1]
        if d is None:
            a = jnp.broadcast_to(a, (size, *a.shape))
        else:
            a = jnp.moveaxis(a, d, 0)
        if a.ndim == 2 and batch_dims:
            # One [H] per new group so far: the same for every existing group.
            a = jnp.broadcast_to(a.reshape((size,) + (1,) * batch_dims + (h,)), (size, *groups, h))
        out.append(a)
    return out


def row_wise_batcher(prim: Any, kinds: Sequence[str]) -> Callable[..., Any]:
    """A vmap rule for `prim` (multiple results, every one per row, a
    ``batch_dims`` parameter): the mapped axis is more rows when no
    parameter operand is mapped, a new group axis otherwise."""
    kinds = tuple(kinds)

    def batch(args, dims, *, batch_dims, **params):
        folded = fold_into_rows(args, dims, kinds, batch_dims)
        if folded is not None:
            outs = prim.bind(*folded, batch_dims=batch_dims, **params)
            return outs, (batch_dims,) * len(outs)
        moved = move_to_groups(args, dims, kinds, batch_dims)
        outs = prim.bind(*moved, batch_dims=batch_dims + 1, **params)
        return outs, (0,) * len(outs)

    return batch
