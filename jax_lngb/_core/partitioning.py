"""How our primitives split over a device mesh under `jit` with shardings.

XLA cannot look inside a custom call: left alone, the SPMD partitioner would
all-gather every operand of our kernels onto every device. Every primitive
of this package is instead a pair:

* the *public* primitive (e.g. `layer_norm_grad_beta_p`): abstract
  evaluation, JVP and batching rules, and one lowering, registered here by
  `register_row_partitioning`, for every platform;
* its *local* twin (e.g. `layer_norm_grad_beta_local_p`): the same abstract
  evaluation, with the kernel lowerings (C++ through XLA FFI on the CPU, the
  `jax.numpy` form elsewhere). It computes on whatever block of rows one
  device holds.

The public lowering wraps the local primitive in
`jax.experimental.custom_partitioning` with a Shardy sharding rule derived
from a `RowLayout`, which names the role of every operand and result axis:

    G  leading "group" axes added by vmap: independent problems, split freely
    R  row axes: split freely; results summed over rows get a psum
    H  the last axis: never split (CANN needs whole rows); if the caller
       shards it, it is resharded to replicated with a `ShardingWarning`

When the partitioner asks (at compile time, once it knows the shardings),
each device runs the local primitive on its own rows; results that are sums
over rows (`SUM_H`) are computed in float32 on each device (the primitive
says how through `widen_params`), summed with one `psum` over exactly the
mesh axes that split the rows, then narrowed once to their dtype. Row-shaped
results stay sharded like their inputs. Nothing is gathered.

Without a multi-device mesh (one device, or inside a `shard_map` whose axes
are all manual) `custom_partitioning` inlines the local primitive: the
single-device program is exactly the kernel call. Two cases lower the
primitive's `jax.numpy` reference instead, which XLA partitions itself
(local reductions and an all-reduce, no gather): a multi-device module being
*exported* (the partitioning callbacks are Python objects of this process
and cannot be serialized), and the inside of a `shard_map` that leaves some
mesh axes to XLA (`axis_names=` a subset), where the partitioner gives the
callback no mesh axis names to split rows over.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.custom_partitioning import ArrayMapping, SdyShardingRule, custom_partitioning
from jax.interpreters import mlir
from jax.sharding import NamedSharding, PartitionSpec

__all__ = [
    "ShardingWarning",
    "PARAM_H",
    "ROWS",
    "ROWS_H",
    "RowLayout",
    "SUM_H",
    "float32_sums",
    "register_row_partitioning",
]

# Roles of an operand or result, by its axes ([*G] are the vmap group axes,
# [*R] the row axes).
ROWS_H = "rows_h"  # [*G, *R, H]  activations: dy, x, res_for_gamma, dx
ROWS = "rows"  # [*G, *R]         per-row statistics: mean, variance, rstd
PARAM_H = "param_h"  # [*G, H]    parameters, the same for every row: gamma
SUM_H = "sum_h"  # [*G, H]        sums over rows (results only): dgamma, dbeta

_ROLES = (ROWS_H, ROWS, PARAM_H, SUM_H)


class ShardingWarning(UserWarning):
    """A kernel operand had to be resharded (gathered) to run the kernel:
    its H axis was split, or its sharding named no mesh axes."""


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """The axes of a primitive's operands and results, by role."""

    group_dims: int
    row_dims: int
    operands: tuple[str, ...]
    results: tuple[str, ...]

    def __post_init__(self):
        for r in self.operands + self.results:
            if r not in _ROLES:
                raise ValueError(f"unknown axis role {r!r}; expected one of {_ROLES}")
        if SUM_H in self.operands:
            raise ValueError("SUM_H describes results only")

    def factors(self, role: str) -> tuple[str, ...]:
        """Shardy factor names of the axes of an operand/result of `role`."""
        g = tuple(f"g{i}" for i in range(self.group_dims))
        r = tuple(f"r{i}" for i in range(self.row_dims))
        return {ROWS_H: g + r + ("h",), ROWS: g + r, PARAM_H: g + ("h",), SUM_H: g + ("h",)}[role]

    def sharding_rule(self) -> SdyShardingRule:
        rows = tuple(f"r{i}" for i in range(self.row_dims))
        # Row factors missing from every result are reductions (each device
        # holds partial sums). If some result keeps the rows (dx), the row
        # factors are pass-through for propagation; the partition callback
        # below still psums the SUM_H results.
        rows_in_results = any(role in (ROWS_H, ROWS) for role in self.results)
        return SdyShardingRule(
            tuple(ArrayMapping(*self.factors(r)) for r in self.operands),
            tuple(ArrayMapping(*self.factors(r)) for r in self.results),
            reduction_factors=() if rows_in_results else rows,
        )


def _spec(sharding: Any, ndim: int) -> tuple | None:
    """The per-axis mesh axes of a NamedSharding, padded to `ndim`."""
    if not isinstance(sharding, NamedSharding):
        return None
    spec = tuple(sharding.spec)
    return spec + (None,) * (ndim - len(spec))


def _axes(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    if isinstance(entry, (tuple, list)):
        return tuple(entry)
    return (entry,)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Chosen shardings: mesh axes per factor; H is always replicated."""

    factor_axes: dict[str, Any]
    reduce_axes: tuple[str, ...]
    h_axes: tuple[str, ...]

    def spec(self, layout: RowLayout, role: str) -> PartitionSpec:
        return PartitionSpec(*(None if f == "h" else self.factor_axes.get(f) for f in layout.factors(role)))


def _plan(name: str, layout: RowLayout, mesh: Any, arg_shapes: Sequence[Any]) -> _Plan:
    """Takes the group/row shardings of the first activation operand.

    Shardy has already made the operands agree through the sharding rule;
    taking one operand as the reference keeps the choice consistent (no mesh
    axis used twice) even when they do not.
    """
    lead = next(
        (i for role in (ROWS_H, ROWS, PARAM_H) for i, r in enumerate(layout.operands) if r == role),
        None,
    )
    factor_axes: dict[str, Any] = {}
    if lead is not None:
        spec = _spec(arg_shapes[lead].sharding, len(arg_shapes[lead].shape))
        if spec is not None:
            for f, entry in zip(layout.factors(layout.operands[lead]), spec):
                if f != "h" and entry is not None:
                    factor_axes[f] = entry
    h_axes: list[str] = []
    for role, a in zip(layout.operands, arg_shapes):
        spec = _spec(a.sharding, len(a.shape))
        if spec is not None and "h" in layout.factors(role):
            h_axes += [ax for ax in _axes(spec[layout.factors(role).index("h")]) if ax not in h_axes]
    unnamed = [
        i
        for i, a in enumerate(arg_shapes)
        if not isinstance(a.sharding, NamedSharding) and not a.sharding.is_fully_replicated
    ]
    if unnamed:
        warnings.warn(
            f"{name}: operands {unnamed} arrive with shardings that name no mesh axes "
            f"({arg_shapes[unnamed[0]].sharding}); "
            "they are gathered to run the kernel. Pass NamedSharding inputs (jax.sharding.Mesh axes) to keep "
            "the rows local.",
            ShardingWarning,
            stacklevel=2,
        )
    if h_axes:
        warnings.warn(
            f"{name}: the last (H) axis of its inputs is sharded over mesh axes {tuple(h_axes)}, but the "
            "kernel needs whole rows; they are resharded to replicate H (an all-gather of the activations "
            "over those axes). Shard the leading (row) axes instead, e.g. PartitionSpec('data', None).",
            ShardingWarning,
            stacklevel=2,
        )
    used = set()
    for f, entry in list(factor_axes.items()):
        axes = _axes(entry)
        if used.intersection(axes):  # a mesh axis may split one factor only
            del factor_axes[f]
        used.update(axes)
    reduce_axes = tuple(
        ax for ax in mesh.axis_names if any(ax in _axes(factor_axes.get(f"r{i}")) for i in range(layout.row_dims))
    )
    return _Plan(factor_axes, reduce_axes, tuple(h_axes))


_EMPTY_MESH = jax.sharding.AbstractMesh((), ())


def _make_partitioned(
    name: str,
    local: jax.extend.core.Primitive,
    layout: RowLayout,
    params: dict[str, Any],
    out_dtypes: tuple[np.dtype, ...],
    widen_params: Callable[[dict[str, Any]], dict[str, Any]] | None,
) -> Callable[..., Any]:
    def local_call(*args):
        return tuple(local.bind(*args, **params))

    fn = custom_partitioning(local_call)

    def shardings(mesh, arg_shapes):
        plan = _plan(name, layout, mesh, arg_shapes)
        args = tuple(NamedSharding(mesh, plan.spec(layout, r)) for r in layout.operands)
        results = tuple(NamedSharding(mesh, plan.spec(layout, r)) for r in layout.results)
        return plan, args, results

    def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
        # Only used by the GSPMD propagation (Shardy uses the rule).
        return shardings(mesh, arg_shapes)[2]

    def partition(mesh, arg_shapes, result_shape):
        plan, arg_shardings, result_shardings = shardings(mesh, arg_shapes)
        reduce_axes = plan.reduce_axes if SUM_H in layout.results else ()
        local_params = widen_params(params) if (reduce_axes and widen_params) else params

        def lower_fn(*args):
            # Traced per device, with every mesh axis manual: no sharding
            # context applies (jax 0.7 would otherwise annotate the psum's
            # reducer under an explicit-axes mesh, which XLA rejects).
            with jax.sharding.use_abstract_mesh(_EMPTY_MESH):
                outs = local.bind(*args, **local_params)
                done = []
                for role, out, dtype in zip(layout.results, outs, out_dtypes):
                    if role == SUM_H and reduce_axes:
                        out = jax.lax.psum(out, reduce_axes)
                    done.append(out.astype(dtype) if out.dtype != dtype else out)
            return tuple(done)

        return mesh, lower_fn, result_shardings, arg_shardings

    fn.def_partition(
        partition=partition,
        infer_sharding_from_operands=infer_sharding_from_operands,
        sharding_rule=layout.sharding_rule(),
    )
    return fn


def _auto_devices(ac: Any) -> int:
    """How many devices the axes XLA partitions (not manual ones) span."""
    if hasattr(ac, "num_devices"):  # ShardingContext: plain jit
        return ac.num_devices
    mesh = getattr(ac, "mesh", None)  # SPMDAxisContext: inside shard_map
    if mesh is None:
        return 1
    manual = set(getattr(ac, "manual_axes", ()))
    return math.prod(s for n, s in mesh.shape.items() if n not in manual)


def _use_reference(ctx: mlir.LoweringRuleContext) -> bool:
    """Whether partitioning callbacks cannot serve this lowering.

    * a jax.export over several devices: the callbacks would not survive
      serialization;
    * inside a shard_map that leaves some mesh axes to XLA: the partitioner
      hands the callback shardings of a device subgroup with no mesh axis
      names, so it could not split the rows and would gather them.
    In both cases the jax.numpy reference, which XLA partitions itself, keeps
    the rows local.
    """
    mc = ctx.module_context
    ac = mc.axis_context
    if _auto_devices(ac) <= 1:
        return False
    if getattr(getattr(mc, "lowering_parameters", None), "for_export", False):
        return True
    return bool(getattr(ac, "manual_axes", ()))


def register_row_partitioning(
    public: jax.extend.core.Primitive,
    local: jax.extend.core.Primitive,
    layout: Callable[..., RowLayout],
    *,
    reference: Callable[..., Sequence[jax.Array]],
    widen_params: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """Makes `public` lower to `local`, split over rows on a device mesh.

    Args:
      public: the primitive users bind; gets a lowering for every platform
        (do not register platform-specific lowerings on it: they would
        bypass the partitioning; register them on `local`).
      local: its per-device twin, with the same abstract evaluation and the
        kernel lowerings.
      layout: `layout(*avals_in, **params) -> RowLayout`.
      reference: `reference(*args, **params)`, the jax.numpy form of the op,
        lowered for multi-device exports (see the module docstring).
      widen_params: maps the parameters to ones that make the local kernel
        return float32 sums (e.g. `out_dtype=float32`); used when rows are
        split, so partial sums are added in float32 and narrowed once.
    """
    cache: dict[Any, Callable[..., Any]] = {}

    def lowering(ctx, *args, **params):
        if _use_reference(ctx):
            return mlir.lower_fun(functools.partial(reference, **params), multiple_results=True)(ctx, *args)
        lay = layout(*ctx.avals_in, **params)
        out_dtypes = tuple(np.dtype(a.dtype) for a in ctx.avals_out)
        key = (lay, tuple(sorted(params.items())), out_dtypes)
        fn = cache.get(key)
        if fn is None:
            fn = cache[key] = _make_partitioned(public.name, local, lay, params, out_dtypes, widen_params)
        return mlir.lower_fun(fn, multiple_results=True)(ctx, *args)

    mlir.register_lowering(public, lowering)
    # custom_partitioning needs the concrete devices while lowering; jit
    # only provides them for primitives listed here (a private registry that
    # jax's own cuDNN attention uses the same way).
    from jax._src import dispatch

    needs_devices = getattr(dispatch, "prim_requires_devices_during_lowering", None)
    if needs_devices is not None:
        needs_devices.update((public, local))


def float32_sums(params: dict[str, Any]) -> dict[str, Any]:
    """`widen_params` for primitives whose sums follow an `out_dtype` param."""
    return {**params, "out_dtype": np.dtype(jnp.float32)}
