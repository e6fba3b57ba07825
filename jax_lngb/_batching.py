"""vmap support shared by the LayerNorm primitives.

vmap adds an independent problem, never more rows: the mapped axis becomes a
new leading group axis of every operand (``batch_dims`` counts them), so
the gamma/beta reductions return one [H] per mapped element and per-example
gradients stay per example (SPEC section 5). Operands that are not mapped
are broadcast: row operands and per-row statistics to the new group axis,
parameters to one [H] row per group ([*G, H], the layout the row
partitioning of `_partitioning` describes; it costs G * H values).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

ROWS = "rows"  # [*G, *rows, H] row operands and [*G, *rows] statistics
PARAM = "param"  # [H] or [*G, H]


def move_to_groups(
    args: Sequence[jax.Array], dims: Sequence[int | None], kinds: Sequence[str], batch_dims: int
) -> list[jax.Array]:
    """Operands for the same primitive with ``batch_dims + 1`` group axes."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
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
