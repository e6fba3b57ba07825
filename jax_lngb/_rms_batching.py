"""vmap for the row-wise RMSNorm primitives: unmapped parameters join the rows.

When gamma (and its tangent) are not mapped, every row of every mapped
example is normalised with the same parameters, so the mapped axis is just
more rows: it moves next to the existing group axes (the first row axis)
and the primitive runs once over all the rows, with gamma [H] untouched.
That is exact for outputs that are per row (y, rstd, t_y, dx,
res_for_gamma); AD of the result then sums dgamma over all those rows, as
it must for an unmapped gamma. Where a result is a sum over rows that must
stay per example (the fused backward's pd_gamma under `vmap(grad(...))`),
the primitives keep the group semantics of `_batching.move_to_groups`.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from ._batching import PARAM, ROWS


def params_unmapped(dims: Sequence[int | None], kinds: Sequence[str]) -> bool:
    """Whether no parameter operand is mapped."""
    return all(d is None for d, k in zip(dims, kinds) if k == PARAM)


def join_rows(
    args: Sequence[jax.Array], dims: Sequence[int | None], kinds: Sequence[str], batch_dims: int
) -> list[jax.Array]:
    """Operands for the same primitive and `batch_dims` with the mapped axis
    at position `batch_dims` of every row operand (a new first row axis);
    parameters (all unmapped) as they are."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    out = []
    for a, d, k in zip(args, dims, kinds):
        if k != ROWS:
            out.append(a)
        elif d is None:
            a = jnp.expand_dims(a, batch_dims)
            out.append(jnp.broadcast_to(a, a.shape[:batch_dims] + (size,) + a.shape[batch_dims + 1 :]))
        else:
            out.append(jnp.moveaxis(a, d, batch_dims))
    return out
