"""`add_norm_forward_p`: the residual add and the norm after it, one primitive.

    h = x + residual                       (float32 add, stored in residual's dtype)
    y = norm(h) * scale (+ beta)           (x's dtype)

with norm LayerNorm (kind "layer": saves the float32 mean and variance) or
RMSNorm (kind "rms": saves the float32 rstd). On the CPU one C++ kernel
reads x and residual once per row and writes h, y and the statistics; other
platforms run the formulas of `formulas.py`.

Differentiation: the JVP binds `add_norm_tangent_p`, whose transpose is the
fused backward `add_norm_backward_p`. A public/local pair like every kernel
primitive (see `_core.partitioning`): each device works on its own rows.

Operands: x, residual, gamma[, beta]. Results: y, h, *stats.

Parameters of the primitive:
    kind:          "layer" or "rms".
    epsilon:       static float added to the variance / mean square.
    zero_centered: the scale is 1 + gamma (formed in float32) instead of gamma.
    has_beta:      whether a beta operand follows gamma (kind "layer" only).
    batch_dims:    leading axes that are independent problems (added by vmap);
                   the parameters are then [*G, H].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, mlir

from ..._core import native
from ..._core.avals import derived_aval
from ..._core.batching import PARAM, ROWS, row_wise_batcher
from ..._core.ffi_call import apply_impl
from ..._core.partitioning import PARAM_H, ROWS_H, RowLayout, register_row_partitioning
from ..._core.partitioning import ROWS as ROWS_ROLE
from ..._core.validate import (
    check_batch_dims,
    check_choice,
    check_epsilon,
    check_kernel_dtype,
    check_param,
    check_same_shape,
)
from ..primitives import (
    ADD_LAYER_NORM_FORWARD_TARGET,
    ADD_NORM_KINDS,
    ADD_RMS_NORM_FORWARD_TARGET,
    add_norm_forward_local_p,
    add_norm_forward_p,
    add_norm_tangent_p,
)
from .formulas import forward_jnp, num_stats


def function_name(kind: str) -> str:
    return "add_layer_norm" if kind == "layer" else "add_rms_norm"


def check_flags(fn: str, kind, zero_centered, has_beta) -> None:
    """The static parameters every add_norm primitive carries."""
    check_choice(fn, "kind", kind, ADD_NORM_KINDS)
    for name, v in (("zero_centered_gamma", zero_centered), ("has_beta", has_beta)):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{fn}: {name} must be a bool; got {type(v).__name__} {v!r}")
    if kind == "rms" and has_beta:
        raise ValueError(f"{fn}: RMSNorm takes no beta (has_beta must be False)")


def split_params(params, has_beta: bool):
    """(gamma, beta or None) from the operands after the row operands."""
    return params[0], (params[1] if has_beta else None)


# --------------------------------------------------------- abstract evaluation


def _abstract_eval(x, residual, *params, kind, epsilon, zero_centered, has_beta, batch_dims):
    fn = function_name(kind)
    check_flags(fn, kind, zero_centered, has_beta)
    if len(params) != 1 + bool(has_beta):
        raise TypeError(f"{fn}: expected {1 + bool(has_beta)} parameter operands, got {len(params)}")
    batch_dims = check_batch_dims(fn, batch_dims, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_kernel_dtype(fn, "residual", residual.dtype)
    check_same_shape(fn, "x", x.shape, "residual", residual.shape)
    for name, p in zip(("gamma", "beta"), params):
        check_kernel_dtype(fn, name, p.dtype)
        check_param(fn, name, p.shape, x.shape, batch_dims)
    check_epsilon(fn, epsilon)
    inputs = (residual, *params)
    y = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=inputs)
    h = derived_aval(x, x.shape, residual.dtype, range(x.ndim), inputs=inputs)
    stat = derived_aval(x, x.shape[:-1], jnp.float32, range(x.ndim - 1), inputs=inputs)
    return (y, h) + (stat,) * num_stats(kind)


for _p in (add_norm_forward_p, add_norm_forward_local_p):
    _p.def_abstract_eval(_abstract_eval)
    _p.def_impl(apply_impl(_p))


# ------------------------------------------------------------------ lowerings


def _forward_jnp(x, residual, *params, kind, epsilon, zero_centered, has_beta, batch_dims):
    gamma, beta = split_params(params, has_beta)
    return list(
        forward_jnp(
            x, residual, gamma, beta, kind=kind, epsilon=epsilon, zero_centered=zero_centered, batch_dims=batch_dims
        )
    )


def _cpu_call(x, residual, *params, kind, epsilon, zero_centered, has_beta, batch_dims):
    # The kernel takes the parameters in float32 (exact widening of an [H]
    # or [*G, H] operand); without beta it gets an empty one and reads none.
    gamma, beta = split_params(params, has_beta)
    stat = jax.ShapeDtypeStruct(x.shape[:-1], jnp.float32)
    outs = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape, residual.dtype))
    outs += (stat,) * num_stats(kind)
    operands = [x, residual, gamma.astype(jnp.float32)]
    if kind == "layer":
        operands.append(beta.astype(jnp.float32) if has_beta else jnp.zeros((0,), jnp.float32))
    target = ADD_LAYER_NORM_FORWARD_TARGET if kind == "layer" else ADD_RMS_NORM_FORWARD_TARGET
    return jax.ffi.ffi_call(target, outs)(*operands, epsilon=np.float32(epsilon), zero_centered=bool(zero_centered))


mlir.register_lowering(add_norm_forward_local_p, mlir.lower_fun(_forward_jnp, multiple_results=True))
mlir.register_lowering(add_norm_forward_local_p, mlir.lower_fun(_cpu_call, multiple_results=True), platform="cpu")


# -------------------------------------------------------------- partitioning


def _layout(x, residual, *params, kind, epsilon, zero_centered, has_beta, batch_dims):
    """Row-wise: x, residual, y and h [*G, *rows, H], statistics [*G, *rows]."""
    return RowLayout(
        group_dims=batch_dims,
        row_dims=x.ndim - 1 - batch_dims,
        operands=(ROWS_H, ROWS_H) + (PARAM_H,) * len(params),
        results=(ROWS_H, ROWS_H) + (ROWS_ROLE,) * num_stats(kind),
    )


register_row_partitioning(add_norm_forward_p, add_norm_forward_local_p, _layout, reference=_forward_jnp)


# ----------------------------------------------------------------------- JVP


def _jvp(primals, tangents, **params):
    outs = add_norm_forward_p.bind(*primals, **params)
    if all(type(t) is ad.Zero for t in tangents):
        return outs, [ad.Zero(jax.typeof(a).to_tangent_aval()) for a in outs]
    y, h, *stats = outs
    gamma = primals[2]
    t_outs = add_norm_tangent_p.bind(*(ad.instantiate_zeros(t) for t in tangents), h, *stats, gamma, **params)
    return outs, t_outs


ad.primitive_jvps[add_norm_forward_p] = _jvp


# ------------------------------------------------------------------ batching


def _batch(args, dims, *, has_beta, **params):
    # Every output is per row: with the parameters shared (not mapped), the
    # mapped axis is more rows of the same problem (see _core.batching).
    kinds = (ROWS, ROWS) + (PARAM,) * (1 + bool(has_beta))
    return row_wise_batcher(add_norm_forward_p, kinds)(args, dims, has_beta=has_beta, **params)


batching.primitive_batchers[add_norm_forward_p] = _batch

native.register_cpu_targets()
