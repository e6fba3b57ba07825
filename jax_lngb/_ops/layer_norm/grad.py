"""`layer_norm_grad_p`: CANN AscendC's LayerNormGrad as a JAX primitive.

Per row of x (the last axis is H), with variance and mean given:

    x1 = dy * gamma              x2 = x - mean
    rstd = 1 / sqrt(variance + epsilon)
    res_for_gamma = x2 * rstd
    pd_var  = sum_h(-0.5 * x1 * x2 * rstd^3)
    pd_mean = sum_h(-x1 * rstd) + pd_var * (1/H) * sum_h(-2 * x2)
    pd_x    = pd_var * (2/H) * x2 + pd_mean * (1/H) + x1 * rstd

Both outputs have x's dtype; all arithmetic is float32 (the kernel takes
the per-row constants out of the sums). res_for_gamma is what
`layer_norm_grad_beta` consumes: the two chained are CANN's LayerNorm
backward, which `jax_lngb.layer_norm(..., backward="chained")` runs.

Everything about the primitive is in this file: abstract evaluation (all
argument checks, at trace time), the CPU lowering to the C++ kernel, the
jax.numpy lowering of every other platform, the partitioning rule, the JVP
(the jax.numpy formulas, so every order of derivative works) and the
batching rule. As every kernel primitive of the package it is a pair (see
`_partitioning`): `layer_norm_grad_p`, which users bind, lowers to
`layer_norm_grad_local_p`, the kernel on one device's rows; on a mesh each
device runs it on its own rows (the op is row-wise: nothing is exchanged).

Parameters of the primitive:
    epsilon:    static float added to the variance.
    batch_dims: leading axes that are independent problems (added by vmap);
                gamma is then [*G, H].
"""

from __future__ import annotations

import functools
from typing import Any

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
    check_bool,
    check_epsilon,
    check_kernel_dtype,
    check_param,
    check_row_stats,
    check_same_dtype,
    check_same_shape,
)
from ..primitives import (
    LAYER_NORM_GRAD_TARGET,
    layer_norm_grad_local_p,
    layer_norm_grad_p,
)
from .formulas import grad_jnp, kernel_gamma

# The kernel on the rows one device holds (bound only by the lowering of
# layer_norm_grad_p; same parameters, same abstract evaluation).


# ---------------------------------------------------------------- public API


def layer_norm_grad(
    dy: jax.typing.ArrayLike,
    x: jax.typing.ArrayLike,
    variance: jax.typing.ArrayLike,
    mean: jax.typing.ArrayLike,
    gamma: jax.typing.ArrayLike,
    *,
    epsilon: float = 1e-5,
) -> tuple[jax.Array, jax.Array]:
    """CANN `LayerNormGrad`: the input gradient of LayerNorm and res_for_gamma.

    Args:
      dy: upstream gradient, shape [..., H], same shape and dtype as ``x``.
      x: the LayerNorm input (float32, float16 or bfloat16).
      variance, mean: the per-row statistics of the forward, shape
        ``x.shape[:-1]`` (float32 or a 16-bit dtype; computed in float32).
      gamma: the scale, shape [H].
      epsilon: the forward's epsilon (static float >= 0).

    Returns:
      ``(pd_x, res_for_gamma)``, both of x's shape and dtype. Feed
      ``res_for_gamma`` and ``dy`` to `layer_norm_grad_beta` for the
      gamma/beta gradients.
    """
    dy, x, variance, mean, gamma = map(jnp.asarray, (dy, x, variance, mean, gamma))
    eps = check_epsilon(_FN, epsilon)
    # Checked here too, not only in abstract evaluation: under vmap the
    # primitive sees batched shapes, and the error must speak of the user's.
    _check_operands(dy, x, variance, mean, gamma, batch_dims=0)
    pd_x, res = layer_norm_grad_p.bind(dy, x, variance, mean, gamma, epsilon=eps, batch_dims=0)
    return pd_x, res


def layer_norm_grad_ref(dy: Any, x: Any, variance: Any, mean: Any, gamma: Any, *, epsilon: float = 1e-5):
    """Oracle: CANN's formulas, term by term as SPEC section 3 writes them,
    in float64 NumPy. Returns (pd_x, res_for_gamma) as float64."""
    dy, x = np.asarray(dy, np.float64), np.asarray(x, np.float64)
    var = np.asarray(variance, np.float64)[..., None]
    mean = np.asarray(mean, np.float64)[..., None]
    gamma = np.asarray(gamma, np.float64)
    h = x.shape[-1]
    x1 = dy * gamma
    x2 = x - mean
    rstd = 1.0 / np.sqrt(var + epsilon)
    res_for_gamma = x2 * rstd
    pd_var = np.sum(-0.5 * x1 * x2 * rstd**3, -1, keepdims=True)
    x3 = x1 * rstd
    pd_mean = np.sum(-x3, -1, keepdims=True) + pd_var * (1.0 / h) * np.sum(-2.0 * x2, -1, keepdims=True)
    pd_x = pd_var * (2.0 / h) * x2 + pd_mean * (1.0 / h) + x3
    return pd_x, res_for_gamma


# --------------------------------------------------------- abstract evaluation


_FN = "layer_norm_grad"


def _check_operands(dy, x, variance, mean, gamma, *, batch_dims):
    fn = _FN
    batch_dims = check_batch_dims(fn, batch_dims, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_same_shape(fn, "x", x.shape, "dy", dy.shape)
    check_same_dtype(fn, "x", x.dtype, "dy", dy.dtype)
    for name, s in (("variance", variance), ("mean", mean)):
        check_kernel_dtype(fn, name, s.dtype)
        check_row_stats(fn, name, s.shape, x.shape)
    check_kernel_dtype(fn, "gamma", gamma.dtype)
    check_param(fn, "gamma", gamma.shape, x.shape, batch_dims)


def _abstract_eval(dy, x, variance, mean, gamma, *, epsilon, batch_dims, zero_centered_gamma=False):
    # zero_centered_gamma (optional, False): x1 = dy * (1 + gamma), the
    # chained backward of layer_norm(..., zero_centered_gamma=True).
    check_bool(_FN, "zero_centered_gamma", zero_centered_gamma)
    _check_operands(dy, x, variance, mean, gamma, batch_dims=batch_dims)
    check_epsilon(_FN, epsilon)  # the primitive may be bound directly
    # Typed like x: row-sharded like it, varying over its manual axes.
    out = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=(dy, variance, mean, gamma))
    return out, out


for _p in (layer_norm_grad_p, layer_norm_grad_local_p):
    _p.def_abstract_eval(_abstract_eval)
    _p.def_impl(apply_impl(_p))


# ------------------------------------------------------------------ lowerings


def _grad_jnp(dy, x, variance, mean, gamma, *, epsilon, batch_dims, zero_centered_gamma=False):
    return list(
        grad_jnp(
            dy,
            x,
            variance,
            mean,
            gamma,
            epsilon=epsilon,
            batch_dims=batch_dims,
            zero_centered_gamma=zero_centered_gamma,
        )
    )


def _cpu_call(dy, x, variance, mean, gamma, *, epsilon, batch_dims, zero_centered_gamma=False):
    """Statistics and gamma in float32 (1 + gamma when zero-centered, see formulas.kernel_gamma)."""
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    f32 = jnp.float32
    return jax.ffi.ffi_call(LAYER_NORM_GRAD_TARGET, (out, out))(
        dy,
        x,
        variance.astype(f32),
        mean.astype(f32),
        kernel_gamma(gamma, zero_centered_gamma),
        epsilon=np.float32(epsilon),
    )


mlir.register_lowering(layer_norm_grad_local_p, mlir.lower_fun(_grad_jnp, multiple_results=True))
mlir.register_lowering(layer_norm_grad_local_p, mlir.lower_fun(_cpu_call, multiple_results=True), platform="cpu")


# -------------------------------------------------------------- partitioning


def _layout(dy, x, variance, mean, gamma, *, epsilon, batch_dims, zero_centered_gamma=False):
    """Row-wise: [*G, *rows(, H)] in, [*G, *rows, H] out, gamma [*G, H]."""
    return RowLayout(
        group_dims=batch_dims,
        row_dims=x.ndim - 1 - batch_dims,
        operands=(ROWS_H, ROWS_H, ROWS_ROLE, ROWS_ROLE, PARAM_H),
        results=(ROWS_H, ROWS_H),
    )


register_row_partitioning(layer_norm_grad_p, layer_norm_grad_local_p, _layout, reference=_grad_jnp)


# ----------------------------------------------------------------------- JVP


def _jvp(primals, tangents, **params):
    """Primal from the kernel; tangents from the jax.numpy formulas, which JAX
    can transpose and differentiate again."""
    outs = layer_norm_grad_p.bind(*primals, **params)
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    f = functools.partial(_grad_jnp, **params)
    _, t_outs = jax.jvp(f, tuple(primals), tuple(tangents))
    return outs, t_outs


ad.primitive_jvps[layer_norm_grad_p] = _jvp


# ------------------------------------------------------------------ batching


# Every output is per row: with the parameters shared (not mapped), the
# mapped axis is more rows of the same problem (see _core.batching).
batching.primitive_batchers[layer_norm_grad_p] = row_wise_batcher(layer_norm_grad_p, (ROWS, ROWS, ROWS, ROWS, PARAM))

native.register_cpu_targets()
