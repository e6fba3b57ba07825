"""`layer_norm_grad_beta_p`: AscendC's LayerNormGradBeta as a JAX primitive.

    pd_gamma[h] = sum over rows r of res_for_gamma[r, h] * dy[r, h]
    pd_beta[h]  = sum over rows r of dy[r, h]

Every leading axis of the inputs is a row axis; H is the last axis.
Accumulation is float32 whatever the input dtype; results are narrowed once.

Everything about the primitive lives in this file: abstract evaluation (all
argument checks happen here, at trace time), the CPU lowering to the C++
kernel through XLA FFI, the `jax.numpy` lowering every other platform uses,
the JVP, the batching rule and the partitioning rule.

The op is two primitives (see `_core.partitioning`): `layer_norm_grad_beta_p`,
which users and `layer_norm`'s VJP bind, and `layer_norm_grad_beta_local_p`,
the kernel on one device's rows. The public one lowers to the local one,
wrapped so that on a device mesh each device reduces its own rows and the
float32 partials are psum'd over the row-sharding axes. Kernel lowerings
(the Ascend NPU one in `jax_lngb.ascend` included) belong on the local one.

Parameters of the primitive:
    out_dtype:  dtype of pd_gamma and pd_beta.
    batch_dims: how many leading axes are *independent problems* rather than
                rows (added by vmap): inputs [*G, *rows, H] give outputs [*G, H].
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, mlir

from .._core import native
from .._core.avals import derived_aval
from .._core.partitioning import ROWS_H, SUM_H, RowLayout, float32_sums, register_row_partitioning
from .._core.validate import (
    check_batch_dims,
    check_kernel_dtype,
    check_same_dtype,
    check_same_shape,
)
from .primitives import (
    LAYER_NORM_GRAD_BETA_TARGET,
    layer_norm_grad_beta_local_p,
    layer_norm_grad_beta_p,
)

# The kernel on the rows one device holds (bound only by the lowering of
# layer_norm_grad_beta_p; same parameters, same abstract evaluation).


# ---------------------------------------------------------------- public API


def layer_norm_grad_beta(
    res_for_gamma: jax.typing.ArrayLike,
    dy: jax.typing.ArrayLike,
    *,
    out_dtype: jax.typing.DTypeLike | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Gradients of LayerNorm's gamma and beta (AscendC `LayerNormGradBeta`).

    Args:
      res_for_gamma: the normalised input ``(x - mean) * rstd``, shape [..., H].
      dy: the upstream gradient, same shape and dtype as ``res_for_gamma``.
      out_dtype: dtype of the results; defaults to the input dtype. Pass
        ``jnp.float32`` to get the float32 sums of 16-bit inputs unrounded.

    Returns:
      ``(pd_gamma, pd_beta)``, each of shape [H].
    """
    res_for_gamma = jnp.asarray(res_for_gamma)
    dy = jnp.asarray(dy)
    # Checked here too, not only in abstract evaluation: under vmap the
    # primitive sees batched shapes, and the error must speak of the user's.
    _check_operands(res_for_gamma, dy, batch_dims=0)
    out = res_for_gamma.dtype if out_dtype is None else check_kernel_dtype(_FN, "out_dtype", out_dtype)
    pd_gamma, pd_beta = layer_norm_grad_beta_p.bind(res_for_gamma, dy, out_dtype=out, batch_dims=0)
    return pd_gamma, pd_beta


def layer_norm_grad_beta_ref(res_for_gamma: Any, dy: Any) -> tuple[np.ndarray, np.ndarray]:
    """Oracle: the float64 NumPy sums over every leading axis."""
    res = np.asarray(res_for_gamma, dtype=np.float64)
    d = np.asarray(dy, dtype=np.float64)
    h = d.shape[-1]
    return (res * d).reshape(-1, h).sum(0), d.reshape(-1, h).sum(0)


# --------------------------------------------------------- abstract evaluation


_FN = "layer_norm_grad_beta"


def _check_operands(res, dy, *, batch_dims) -> int:
    batch_dims = check_batch_dims(_FN, batch_dims, "res_for_gamma", res.shape)
    check_kernel_dtype(_FN, "res_for_gamma", res.dtype)
    check_same_shape(_FN, "res_for_gamma", res.shape, "dy", dy.shape)
    check_same_dtype(_FN, "res_for_gamma", res.dtype, "dy", dy.dtype)
    return batch_dims


def _abstract_eval(res, dy, *, out_dtype, batch_dims):
    batch_dims = _check_operands(res, dy, batch_dims=batch_dims)
    check_kernel_dtype(_FN, "out_dtype", out_dtype)
    out_shape = res.shape[:batch_dims] + res.shape[-1:]
    # Typed like the inputs: inside shard_map the sums vary over the manual
    # axes the inputs vary over (see _core.avals); group axes keep their sharding.
    aval = derived_aval(res, out_shape, out_dtype, (*range(batch_dims), None), inputs=(dy,))
    return aval, aval


layer_norm_grad_beta_p.def_abstract_eval(_abstract_eval)
layer_norm_grad_beta_local_p.def_abstract_eval(_abstract_eval)


# Eager calls compile and run the primitive alone through the same lowering
# (dispatch.apply_primitive also handles jax.disable_jit() without recursing).
def _impl(*args, _prim, **params):
    from jax._src import dispatch

    return dispatch.apply_primitive(_prim, *args, **params)


layer_norm_grad_beta_p.def_impl(functools.partial(_impl, _prim=layer_norm_grad_beta_p))
layer_norm_grad_beta_local_p.def_impl(functools.partial(_impl, _prim=layer_norm_grad_beta_local_p))


# ------------------------------------------------------------------ lowerings


def _grad_beta_jnp(res, dy, *, out_dtype, batch_dims):
    """The same math in jax.numpy, float32 accumulation (non-CPU platforms)."""
    rows = tuple(range(batch_dims, res.ndim - 1))
    d = dy.astype(jnp.float32)
    pd_gamma = jnp.sum(res.astype(jnp.float32) * d, axis=rows)
    pd_beta = jnp.sum(d, axis=rows)
    return [pd_gamma.astype(out_dtype), pd_beta.astype(out_dtype)]


_ffi_rule = jax.ffi.ffi_lowering(LAYER_NORM_GRAD_BETA_TARGET)


def _cpu_lowering(ctx, res, dy, *, out_dtype, batch_dims):
    # The kernel reads every size, batch_dims included (from the output
    # rank), from its buffers: no attributes, so symbolic shapes export.
    return _ffi_rule(ctx, res, dy)


mlir.register_lowering(layer_norm_grad_beta_local_p, mlir.lower_fun(_grad_beta_jnp, multiple_results=True))
mlir.register_lowering(layer_norm_grad_beta_local_p, _cpu_lowering, platform="cpu")
# The Ascend NPU lowering (jax_lngb/ascend.py) registers on the local
# primitive too.


# -------------------------------------------------------------- partitioning


def _layout(res, dy, *, out_dtype, batch_dims):
    """[*G, *rows, H] operands, [*G, H] sums over the rows."""
    return RowLayout(
        group_dims=batch_dims,
        row_dims=res.ndim - 1 - batch_dims,
        operands=(ROWS_H, ROWS_H),
        results=(SUM_H, SUM_H),
    )


# Split rows: every device sums its rows in float32 (out_dtype=float32), the
# partials are psum'd over the row-sharding axes and narrowed once.
register_row_partitioning(
    layer_norm_grad_beta_p,
    layer_norm_grad_beta_local_p,
    _layout,
    reference=_grad_beta_jnp,
    widen_params=float32_sums,
)


# ----------------------------------------------------------------------- JVP


def _jvp(primals, tangents, *, out_dtype, batch_dims):
    """The op is bilinear: d(sum res*dy) = sum(dres*dy) + sum(res*ddy).

    Tangents use the jax.numpy form, which JAX can transpose and differentiate
    again; the primal uses the kernel.
    """
    res, dy = primals
    dres, ddy = tangents
    params = dict(out_dtype=out_dtype, batch_dims=batch_dims)
    outs = layer_norm_grad_beta_p.bind(res, dy, **params)
    zero = jnp.zeros(outs[0].shape, jnp.float32)
    t_gamma, t_beta = zero, zero
    if type(dres) is not ad.Zero:
        t_gamma = t_gamma + _grad_beta_jnp(dres, dy, out_dtype=jnp.float32, batch_dims=batch_dims)[0]
    if type(ddy) is not ad.Zero:
        g, b = _grad_beta_jnp(res, ddy, out_dtype=jnp.float32, batch_dims=batch_dims)
        t_gamma, t_beta = t_gamma + g, t_beta + b
    return outs, [t_gamma.astype(out_dtype), t_beta.astype(out_dtype)]


ad.primitive_jvps[layer_norm_grad_beta_p] = _jvp


# ------------------------------------------------------------------ batching


def _batch(args, dims, *, out_dtype, batch_dims):
    """vmap adds an independent problem, never more rows.

    The mapped axis becomes a new leading group axis, so the kernel returns
    one [H] result per mapped element ([G, H]). Folding it into the rows would
    sum over examples and silently break per-example gradients. (The row-wise
    primitives fold instead when their parameters are shared; see _core.batching.
    A reduction over rows that were folded there comes out of reverse mode
    of the folded computation, where summing over all rows is right.)
    """
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    moved = [jnp.broadcast_to(x, (size, *x.shape)) if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    outs = layer_norm_grad_beta_p.bind(*moved, out_dtype=out_dtype, batch_dims=batch_dims + 1)
    return outs, (0, 0)


batching.primitive_batchers[layer_norm_grad_beta_p] = _batch

native.register_cpu_targets()
