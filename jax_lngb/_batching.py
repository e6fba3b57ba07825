"""vmap support shared by the LayerNorm primitives.

vmap adds an independent problem, never more rows: the mapped axis becomes a
new leading group axis of every operand (``batch_dims`` counts them), so
the gamma/beta reductions return one [H] per mapped element and per-example
gradients stay per example (SPEC section 5). Row operands and per-row
statistics that are not mapped are broadcast; a parameter that is not
mapped stays [H] and is shared by every group, one that is mapped becomes
[*G, H].
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
        elif d is None:
            out.append(a if a.ndim == 1 else jnp.broadcast_to(a, (size, *a.shape)))
        else:
            a = jnp.moveaxis(a, d, 0)
            if batch_dims and a.ndim == 2:
                # Mapped here but shared by the existing groups: one [H] for
                # each (new, old) group pair.
                h = a.shape[-1]
                a = jnp.broadcast_to(a.reshape((size,) + (1,) * batch_dims + (h,)), (size, *groups, h))
            out.append(a)
    return out
