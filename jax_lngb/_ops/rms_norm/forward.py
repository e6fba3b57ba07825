"""`rms_norm_forward_p`: the RMSNorm forward as a primitive.

    y = (x * rstd) * gamma,   rstd = 1 / sqrt(sum(x^2) * (1/H) + epsilon)

over the last axis (CANN RmsNorm's order of operations), returning y (x's
dtype) and the float32 rstd of each row, which the backward reuses (CANN's
RmsNormGrad takes rstd, not epsilon). On the CPU a C++ kernel reads each row
once (the output pass hits the cache); other platforms run the same
formulas in jax.numpy.

Differentiation: the JVP binds `rms_norm_tangent_p`, the linear map whose
transpose is the backward ("fused" or "chained"), so reverse mode runs the
kernels and forward mode, linearize and higher orders work too.

A public/local pair like every kernel primitive (see `_core.partitioning`): on a
mesh each device normalises its own rows; nothing is exchanged.

Parameters of the primitive:
    epsilon:    static float added to the mean of squares.
    batch_dims: leading axes that are independent problems (added by vmap
                when gamma is mapped); gamma is then [*G, H].
    backward:   "fused" or "chained": which backward the JVP's transpose runs
                (see `jax_lngb.rms_norm`); never changes the forward.
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
from ..layer_norm.formulas import kernel_gamma
from ..primitives import (
    BACKWARDS,
    RMS_NORM_FORWARD_TARGET,
    rms_norm_forward_local_p,
    rms_norm_forward_p,
    rms_norm_tangent_p,
)
from .formulas import forward_jnp

# --------------------------------------------------------- abstract evaluation


def _abstract_eval(x, gamma, *, epsilon, batch_dims, backward, zero_centered_gamma=False):
    fn = "rms_norm"
    check_bool(fn, "zero_centered_gamma", zero_centered_gamma)
    batch_dims = check_batch_dims(fn, batch_dims, "x", x.shape)
    check_kernel_dtype(fn, "x", x.dtype)
    check_kernel_dtype(fn, "gamma", gamma.dtype)
    check_param(fn, "gamma", gamma.shape, x.shape, batch_dims)
    check_epsilon(fn, epsilon)  # a primitive bound directly must not reach the kernel with a bad one
    check_choice(fn, "backward", backward, BACKWARDS)
    y = derived_aval(x, x.shape, x.dtype, range(x.ndim), inputs=(gamma,))
    rstd = derived_aval(x, x.shape[:-1], jnp.float32, range(x.ndim - 1), inputs=(gamma,))
    return y, rstd


for _p in (rms_norm_forward_p, rms_norm_forward_local_p):
    _p.def_abstract_eval(_abstract_eval)
    _p.def_impl(apply_impl(_p))


# ------------------------------------------------------------------ lowerings


def _forward_jnp(x, gamma, *, epsilon, batch_dims, backward, zero_centered_gamma=False):
    return list(forward_jnp(x, gamma, epsilon=epsilon, batch_dims=batch_dims, zero_centered_gamma=zero_centered_gamma))


def _cpu_call(x, gamma, *, epsilon, batch_dims, backward, zero_centered_gamma=False):
    """gamma in float32 (1 + gamma when zero-centered, see layer_norm's formulas.kernel_gamma)."""
    outs = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape[:-1], jnp.float32))
    g = kernel_gamma(gamma, zero_centered_gamma)
    return jax.ffi.ffi_call(RMS_NORM_FORWARD_TARGET, outs)(x, g, epsilon=np.float32(epsilon))


mlir.register_lowering(rms_norm_forward_local_p, mlir.lower_fun(_forward_jnp, multiple_results=True))
mlir.register_lowering(rms_norm_forward_local_p, mlir.lower_fun(_cpu_call, multiple_results=True), platform="cpu")


# -------------------------------------------------------------- partitioning


def _layout(x, gamma, *, epsilon, batch_dims, backward, zero_centered_gamma=False):
    """Row-wise: x and y [*G, *rows, H], rstd [*G, *rows]."""
    return RowLayout(
        group_dims=batch_dims,
        row_dims=x.ndim - 1 - batch_dims,
        operands=(ROWS_H, PARAM_H),
        results=(ROWS_H, ROWS_ROLE),
    )


register_row_partitioning(rms_norm_forward_p, rms_norm_forward_local_p, _layout, reference=_forward_jnp)


# ----------------------------------------------------------------------- JVP


def _jvp(primals, tangents, *, epsilon, batch_dims, backward, **flags):

    x, gamma = primals
    y, rstd = rms_norm_forward_p.bind(x, gamma, epsilon=epsilon, batch_dims=batch_dims, backward=backward, **flags)
    t_x, t_gamma = tangents
    if all(type(t) is ad.Zero for t in tangents):
        return (y, rstd), [ad.Zero(jax.typeof(a).to_tangent_aval()) for a in (y, rstd)]
    t_y, t_rstd = rms_norm_tangent_p.bind(
        ad.instantiate_zeros(t_x),
        ad.instantiate_zeros(t_gamma),
        x,
        rstd,
        gamma,
        batch_dims=batch_dims,
        backward=backward,
        **flags,
    )
    return (y, rstd), (t_y, t_rstd)


ad.primitive_jvps[rms_norm_forward_p] = _jvp


# ------------------------------------------------------------------ batching

_KINDS = (ROWS, PARAM)


# y and rstd are per row: with gamma not mapped the mapped axis is more
# rows, and AD then sums dgamma over all of them (see _core.batching).
batching.primitive_batchers[rms_norm_forward_p] = row_wise_batcher(rms_norm_forward_p, _KINDS)

native.register_cpu_targets()
