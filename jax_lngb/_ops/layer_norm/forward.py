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
    zero_centered_gamma: the rows are scaled by 1 + gamma (formed in float32)
                instead of gamma. Optional (False).
    has_beta:   False: no beta operand (operands (x, gamma)) and no bias added;
                the CPU kernel then reads no bias at all. Optional (True).
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
from ..._core.validate import check_batch_dims, check_bool, check_choice, check_epsilon, check_kernel_dtype, check_param
from ..primitives import (
    BACKWARDS,
    LAYER_NORM_FORWARD_NO_BETA_TARGET,
    LAYER_NORM_FORWARD_TARGET,
    layer_norm_forward_local_p,
    layer_norm_forward_p,
    layer_norm_tangent_p,
)
from .formulas import forward_jnp, kernel_gamma


def layer_norm_forward_ref(x, gamma, beta, *, epsilon: float = 1e-5, zero_centered_gamma: bool = False):
    """Oracle: float64 NumPy (y, mean, variance) of the last axis (beta may be None)."""
    x64 = np.asarray(x, np.float64)
    mean = x64.mean(-1)
    var = ((x64 - mean[..., None]) ** 2).mean(-1)
    y = (x64 - mean[..., None]) / np.sqrt(var[..., None] + epsilon)
    scale = np.asarray(gamma, np.float64) + (1.0 if zero_centered_gamma else 0.0)
    shift = 0.0 if beta is None else np.asarray(beta, np.float64)
    return y * scale + shift, mean, var


# --------------------------------------------------------- abstract evaluation


def _split(args, has_beta):
    """(x, gamma, beta or None) of the operands, which omit beta without one."""
    if len(args) != 2 + bool(has_beta):
        raise TypeError(
            f"layer_norm: {len(args)} operands for has_beta={has_beta}: expected x, gamma"
            + (", beta" if has_beta else "")
        )
    return (*args, None) if not has_beta else tuple(args)


def _check_flags(fn, zero_centered_gamma, has_beta):
    check_bool(fn, "zero_centered_gamma", zero_centered_gamma)
    check_bool(fn, "has_beta", has_beta)


def _abstract_eval(*args, epsilon, batch_dims, backward, zero_centered_gamma=False, has_beta=True):
    fn = "layer_norm"
    _check_flags(fn, zero_centered_gamma, has_beta)
    x, gamma, beta = _split(args, has_beta)
    batch_dims = check_batch_dims(fn, batch_dims, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    params = (("gamma", gamma),) + ((("beta", beta),) if has_beta else ())
    for name, p in params:
        check_kernel_dtype(fn, name, p.dtype)
        check_param(fn, name, p.shape, x.shape, batch_dims)
    # Checked here too (not only in `layer_norm`): a primitive bound directly
    # must not reach the kernel with an epsilon it would silently misuse.
    check_epsilon(fn, epsilon)
    check_choice(fn, "backward", backward, BACKWARDS)
    inputs = tuple(p for _, p in params)
    y = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=inputs)
    stats = derived_aval(x, x.shape[:-1], jnp.float32, range(x.ndim - 1), inputs=inputs)
    return y, stats, stats


for _p in (layer_norm_forward_p, layer_norm_forward_local_p):
    _p.def_abstract_eval(_abstract_eval)
    _p.def_impl(apply_impl(_p))


# ------------------------------------------------------------------ lowerings


def _forward_jnp(*args, epsilon, batch_dims, backward, zero_centered_gamma=False, has_beta=True):
    x, gamma, beta = _split(args, has_beta)
    return list(
        forward_jnp(x, gamma, beta, epsilon=epsilon, batch_dims=batch_dims, zero_centered_gamma=zero_centered_gamma)
    )


def _cpu_call(*args, epsilon, batch_dims, backward, zero_centered_gamma=False, has_beta=True):
    """The kernel takes float32 parameters (1 + gamma when zero-centered, see
    formulas.kernel_gamma); without beta, the kernel variant that reads no
    bias (rather than a zero bias: y = xhat * gamma, with no add at all)."""
    x, gamma, beta = _split(args, has_beta)
    stats = jax.ShapeDtypeStruct(x.shape[:-1], jnp.float32)
    outs = (jax.ShapeDtypeStruct(x.shape, x.dtype), stats, stats)
    operands = [x, kernel_gamma(gamma, zero_centered_gamma)]
    if has_beta:
        operands.append(beta.astype(jnp.float32))
    target = LAYER_NORM_FORWARD_TARGET if has_beta else LAYER_NORM_FORWARD_NO_BETA_TARGET
    return jax.ffi.ffi_call(target, outs)(*operands, epsilon=np.float32(epsilon))


mlir.register_lowering(layer_norm_forward_local_p, mlir.lower_fun(_forward_jnp, multiple_results=True))
mlir.register_lowering(layer_norm_forward_local_p, mlir.lower_fun(_cpu_call, multiple_results=True), platform="cpu")


# -------------------------------------------------------------- partitioning


def _layout(*args, epsilon, batch_dims, backward, zero_centered_gamma=False, has_beta=True):
    """Row-wise: x and y [*G, *rows, H], statistics [*G, *rows]."""
    x = args[0]
    return RowLayout(
        group_dims=batch_dims,
        row_dims=x.ndim - 1 - batch_dims,
        operands=(ROWS_H, PARAM_H) + ((PARAM_H,) if has_beta else ()),
        results=(ROWS_H, ROWS_ROLE, ROWS_ROLE),
    )


register_row_partitioning(layer_norm_forward_p, layer_norm_forward_local_p, _layout, reference=_forward_jnp)


# ----------------------------------------------------------------------- JVP


def _jvp(primals, tangents, **params):
    has_beta = params.get("has_beta", True)
    y, mean, variance = layer_norm_forward_p.bind(*primals, **params)
    if all(type(t) is ad.Zero for t in tangents):
        return (y, mean, variance), [ad.Zero(jax.typeof(a).to_tangent_aval()) for a in (y, mean, variance)]
    x, gamma, _ = _split(primals, has_beta)
    # The tangent takes t_beta only when there is a beta.
    t_params = [ad.instantiate_zeros(t) for t in tangents[1:]]
    t_y, t_mean, t_var = layer_norm_tangent_p.bind(
        ad.instantiate_zeros(tangents[0]), *t_params, x, variance, mean, gamma, **params
    )
    return (y, mean, variance), (t_y, t_mean, t_var)


ad.primitive_jvps[layer_norm_forward_p] = _jvp


# ------------------------------------------------------------------ batching


# Every output is per row: with the parameters shared (not mapped), the
# mapped axis is more rows of the same problem (see _core.batching).
_batchers = {
    True: row_wise_batcher(layer_norm_forward_p, (ROWS, PARAM, PARAM)),
    False: row_wise_batcher(layer_norm_forward_p, (ROWS, PARAM)),
}


def _batch(args, dims, **params):
    return _batchers[bool(params.get("has_beta", True))](args, dims, **params)


batching.primitive_batchers[layer_norm_forward_p] = _batch

native.register_cpu_targets()
