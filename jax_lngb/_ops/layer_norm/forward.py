"""`layer_norm_forward_p`: the LayerNorm forward as a primitive.

    y = (x - mean) * rstd * gamma + beta,   rstd = 1 / sqrt(variance + epsilon)

over the last axis, returning y (x's dtype) and the float32 per-row mean
and (biased) variance, which the backward reuses. On the CPU a C++ kernel
reads each row once (its two statistics passes and the output pass hit the
cache); other platforms run the same formulas in jax.numpy.

Differentiation: the JVP binds `layer_norm_tangent_p`, the linear map whose
transpose is the fused backward, so reverse mode (jax.grad, jax.vjp) runs
the fused kernel and forward mode, linearize and higher orders work too.

A public/local pair like every kernel primitive (see `_core.partitioning`): on a
mesh each device normalizes its own rows; nothing is exchanged.

Parameters of the primitive:
    epsilon:    static float added to the variance.
    batch_dims: leading axes that are independent problems (added by vmap);
                gamma and beta are then [*G, H].
    backward:   "fused" or "chained": which backward the JVP's transpose runs
                (see `jax_lngb.layer_norm`); never changes the forward.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, mlir

from ..._core import native
from ..._core.avals import derived_aval
from ..._core.batching import PARAM, ROWS, row_wise_batcher
from ..._core.partitioning import PARAM_H, ROWS_H, RowLayout, register_row_partitioning
from ..._core.partitioning import ROWS as ROWS_ROLE
from ..._core.ffi_call import apply_impl, cpu_lowering
from .formulas import forward_jnp
from ..._core.validate import check_batch_dims, check_choice, check_epsilon, check_kernel_dtype, check_param
from ..primitives import (
    BACKWARDS,
    LAYER_NORM_FORWARD_TARGET,
    layer_norm_forward_local_p,
    layer_norm_forward_p,
    layer_norm_tangent_p,
)


def layer_norm_forward_ref(x, gamma, beta, *, epsilon: float = 1e-5):
    """Oracle: float64 NumPy (y, mean, variance) of the last axis."""
    x64 = np.asarray(x, np.float64)
    mean = x64.mean(-1)
    var = ((x64 - mean[..., None]) ** 2).mean(-1)
    y = (x64 - mean[..., None]) / np.sqrt(var[..., None] + epsilon)
    return y * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64), mean, var


# --------------------------------------------------------- abstract evaluation


def _abstract_eval(x, gamma, beta, *, epsilon, batch_dims, backward):
    fn = "layer_norm"
    batch_dims = check_batch_dims(fn, batch_dims, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    for name, p in (("gamma", gamma), ("beta", beta)):
        check_kernel_dtype(fn, name, p.dtype)
        check_param(fn, name, p.shape, x.shape, batch_dims)
    # Checked here too (not only in `layer_norm`): a primitive bound directly
    # must not reach the kernel with an epsilon it would silently misuse.
    check_epsilon(fn, epsilon)
    check_choice(fn, "backward", backward, BACKWARDS)
    y = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=(gamma, beta))
    stats = derived_aval(x, x.shape[:-1], jnp.float32, range(x.ndim - 1), inputs=(gamma, beta))
    return y, stats, stats


for _p in (layer_norm_forward_p, layer_norm_forward_local_p):
    _p.def_abstract_eval(_abstract_eval)
    _p.def_impl(apply_impl(_p))


# ------------------------------------------------------------------ lowerings


def _forward_jnp(x, gamma, beta, *, epsilon, batch_dims, backward):
    return list(forward_jnp(x, gamma, beta, epsilon=epsilon, batch_dims=batch_dims))


def _result_avals(x, gamma, beta, *, batch_dims, backward):
    stats = jax.ShapeDtypeStruct(x.shape[:-1], jnp.float32)
    return (jax.ShapeDtypeStruct(x.shape, x.dtype), stats, stats)


mlir.register_lowering(layer_norm_forward_local_p, mlir.lower_fun(_forward_jnp, multiple_results=True))
mlir.register_lowering(
    layer_norm_forward_local_p, cpu_lowering(LAYER_NORM_FORWARD_TARGET, _result_avals, float32_operands=(1, 2)), platform="cpu"
)


# -------------------------------------------------------------- partitioning


def _layout(x, gamma, beta, *, epsilon, batch_dims, backward):
    """Row-wise: x and y [*G, *rows, H], statistics [*G, *rows]."""
    return RowLayout(
        group_dims=batch_dims,
        row_dims=x.ndim - 1 - batch_dims,
        operands=(ROWS_H, PARAM_H, PARAM_H),
        results=(ROWS_H, ROWS_ROLE, ROWS_ROLE),
    )


register_row_partitioning(layer_norm_forward_p, layer_norm_forward_local_p, _layout, reference=_forward_jnp)


# ----------------------------------------------------------------------- JVP


def _jvp(primals, tangents, *, epsilon, batch_dims, backward):

    x, gamma, beta = primals
    y, mean, variance = layer_norm_forward_p.bind(
        x, gamma, beta, epsilon=epsilon, batch_dims=batch_dims, backward=backward
    )
    t_x, t_gamma, t_beta = tangents
    if all(type(t) is ad.Zero for t in tangents):
        return (y, mean, variance), [ad.Zero(jax.typeof(a).to_tangent_aval()) for a in (y, mean, variance)]
    t_y, t_mean, t_var = layer_norm_tangent_p.bind(
        ad.instantiate_zeros(t_x),
        ad.instantiate_zeros(t_gamma),
        ad.instantiate_zeros(t_beta),
        x,
        variance,
        mean,
        gamma,
        epsilon=epsilon,
        batch_dims=batch_dims,
        backward=backward,
    )
    return (y, mean, variance), (t_y, t_mean, t_var)


ad.primitive_jvps[layer_norm_forward_p] = _jvp


# ------------------------------------------------------------------ batching


# Every output is per row: with the parameters shared (not mapped), the
# mapped axis is more rows of the same problem (see _core.batching).
batching.primitive_batchers[layer_norm_forward_p] = row_wise_batcher(layer_norm_forward_p, (ROWS, PARAM, PARAM))

native.register_cpu_targets()
