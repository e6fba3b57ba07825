"""The Ascend NPU lowerings of LayerNormGradBeta and of LayerNorm's forward,
LayerNormGrad and fused backward (the LayerNorm section below says how
those lower and when they keep the jax.numpy formulas: bfloat16, vmapped
problems with per-example parameters, symbolic or empty shapes, rows that
do not fit the unified buffer).

It is registered on ``layer_norm_grad_beta_local_p``, the per-device kernel
primitive that ``layer_norm_grad_beta_p`` lowers to (see
``jax_lngb._core.partitioning``), so sharded inputs keep the row partitioning.
On an Ascend platform the kernel primitive lowers to one XLA FFI custom call,
``jax_lngb_ascend_layer_norm_grad_beta``, that launches the AscendC kernels
of ``cpp/ascend/grad_beta_kernel.asc``:

* H is zero-padded to whole 32-byte blocks (8 float32 / 16 float16 columns)
  and the results are sliced back (the padding sums to zero);
* the kernel plan (``jax_lngb.tiling.plan_layer_norm_grad_beta_kernel``,
  including CANN's LayerNormGradBeta tilings) is computed at trace time and
  passed both as a uint32 constant operand, which the kernels read from
  device memory, and as custom-call attributes the launcher reads;
* a third result is the float32 workspace of per-group partials; the
  lowering drops it.

Cases the kernel does not cover keep the portable jax.numpy lowering:
bfloat16, vmapped problems (``batch_dims > 0``), symbolic or empty shapes,
and rows so wide that one row does not fit the unified buffer.

**Which platform.** JAX has no built-in Ascend backend; a PJRT plugin
registers one under its own name. The lowering is registered for the names
in ``$JAX_LNGB_ASCEND_PLATFORM`` (comma separated; default ``ascend``) as
soon as JAX knows the platform: at import if the plugin came first, else
from a hook on ``jax._src.xla_bridge.register_backend_factory`` (every
plugin registration goes through it). ``register()`` can also be called by
hand. The FFI handler itself is compiled only when the CANN toolkit was
found at build time (``jax_lngb._ascend``); without it the lowering and
``jax.export`` still work, but running needs a CANN build.

**Exporting for Ascend from a machine without the plugin.** Without the
plugin JAX does not know the platform, and ``jax.export(...,
platforms=["ascend"])`` lowers every primitive with its platform-independent
rule: the artifact would hold the jax.numpy reduction, not the AscendC
kernel. :func:`register_platform` registers a stand-in for the platform (a
backend factory that never yields a device) and our lowering for it, so the
export carries the Ascend custom call::

    import jax, jax_lngb
    jax_lngb.ascend.register_platform("ascend")   # before exporting
    exp = jax_lngb.export.export(jax.jit(step), platforms=["cpu", "ascend"])(*specs)

The artifact then runs on the CPU here and on an NPU where the plugin and a
CANN build of jax_lngb are installed. Plan it for the target's architecture
(``$JAX_LNGB_ASCEND_ARCH``, below): the tiling is baked into the artifact.

**Which architecture.** ``$JAX_LNGB_ASCEND_ARCH`` (``dav-2201``: Atlas
A2/A3, ``dav-3510``: Ascend 950, ``dav-2002``: Atlas inference series);
default: the one the FFI handler was built for, else ``dav-2201``. It fixes
the LayerNormGradBeta implementation the plan must suit, what block_dim
counts (vector cores; AI cores on dav-2002, whose kernels are AICORE
kernels) and the default core count and unified-buffer size
(:func:`jax_lngb.tiling.npu_arch_defaults`).

Tuning knobs (read at trace time; results do not depend on them, except the
unified-buffer size, which fixes the tiles and so the float32 association):
``$JAX_LNGB_ASCEND_NUM_CORES`` (cores to launch; default 40, 8 on
dav-2002) and ``$JAX_LNGB_ASCEND_UB_BYTES`` (unified buffer per core;
default 196608, 245760 on dav-3510, 262144 on dav-2002).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import xla_bridge
from jax.interpreters import mlir

from .._ops.grad_beta import _grad_beta_jnp
from .._ops.layer_norm.formulas import backward_jnp, forward_jnp, grad_jnp, kernel_gamma
from .._ops.primitives import (
    ASCEND_LAYER_NORM_BACKWARD_TARGET,
    ASCEND_LAYER_NORM_FORWARD_TARGET,
    ASCEND_LAYER_NORM_GRAD_BETA_TARGET,
    ASCEND_LAYER_NORM_GRAD_TARGET,
    ASCEND_RMS_NORM_BACKWARD_TARGET,
    ASCEND_RMS_NORM_FORWARD_TARGET,
    layer_norm_backward_local_p,
    layer_norm_forward_local_p,
    layer_norm_grad_beta_local_p,
    layer_norm_grad_local_p,
    rms_norm_backward_local_p,
    rms_norm_forward_local_p,
)
from .._ops.rms_norm.backward import _backward_via_grad_beta as _rms_norm_backward_portable
from .._ops.rms_norm.formulas import forward_jnp as _rms_norm_forward_jnp
from . import layer_norm_kernels, tiling

__all__ = [
    "ARCH_ENV",
    "DEFAULT_NUM_CORES",
    "DEFAULT_PLATFORMS",
    "DEFAULT_UB_BYTES",
    "FFI_TARGET",
    "NUM_CORES_ENV",
    "PLATFORM_ENV",
    "UB_BYTES_ENV",
    "handler_available",
    "npu_arch",
    "platform_names",
    "plan_for",
    "plan_rms_norm",
    "register",
    "register_platform",
    "registered_platforms",
]

FFI_TARGET = ASCEND_LAYER_NORM_GRAD_BETA_TARGET
PLATFORM_ENV = "JAX_LNGB_ASCEND_PLATFORM"
NUM_CORES_ENV = "JAX_LNGB_ASCEND_NUM_CORES"
UB_BYTES_ENV = "JAX_LNGB_ASCEND_UB_BYTES"
ARCH_ENV = "JAX_LNGB_ASCEND_ARCH"
DEFAULT_PLATFORMS = ("ascend",)
DEFAULT_ARCH = "dav-2201"
# dav-2201's defaults (jax_lngb.tiling.npu_arch_defaults has every architecture's).
DEFAULT_NUM_CORES = 40  # Atlas A2: 20 AI cores x 2 vector cores; more blocks than cores still run
DEFAULT_UB_BYTES = 196608  # unified buffer of an Atlas A2/A3 vector core

_KERNEL_DTYPES = {np.dtype(np.float32): 4, np.dtype(np.float16): 2}
_U32_MAX = 2**32 - 1

_lock = threading.Lock()
_registered: set[str] = set()

try:  # the FFI handler, present only in builds made with the CANN toolkit
    from .. import _ascend  # type: ignore[attr-defined]
except ImportError:
    _ascend = None


def handler_available() -> bool:
    """Whether this build contains the Ascend FFI handler (built with CANN)."""
    return _ascend is not None


def platform_names() -> tuple[str, ...]:
    """The JAX platform names treated as Ascend NPUs (``$JAX_LNGB_ASCEND_PLATFORM``)."""
    raw = os.environ.get(PLATFORM_ENV, "")
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    return names or DEFAULT_PLATFORMS


def npu_arch() -> str:
    """The NPU architecture the lowering plans for: ``$JAX_LNGB_ASCEND_ARCH``,
    else the one the FFI handler was built for, else ``dav-2201``."""
    raw = os.environ.get(ARCH_ENV, "").strip()
    if raw:
        tiling.npu_arch_defaults(raw)  # a clear error for a misspelt name
        return raw
    if _ascend is not None:
        return str(_ascend.npu_arch())
    return DEFAULT_ARCH


def registered_platforms() -> tuple[str, ...]:
    """The platforms the Ascend lowering is registered for so far."""
    with _lock:
        return tuple(sorted(_registered))


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise ValueError(f"${name} must be an integer; got {raw!r}") from None
    if v < 1:
        raise ValueError(f"${name} must be >= 1; got {v}")
    return v


def plan_for(shape: tuple[int, ...], in_dtype: Any, out_dtype: Any) -> tuple[int, tiling.GradBetaKernelPlan] | None:
    """(storage H, kernel plan) the lowering uses for inputs of ``shape``, or
    None when the jax.numpy fallback applies (see the module docstring)."""
    in_dt, out_dt = np.dtype(in_dtype), np.dtype(out_dtype)
    if in_dt not in _KERNEL_DTYPES or out_dt not in _KERNEL_DTYPES:
        return None
    if not shape or not all(isinstance(d, (int, np.integer)) for d in shape):
        return None  # symbolic dimensions: the tiling needs sizes at trace time
    h = int(shape[-1])
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    if rows < 1 or h < 1:
        return None
    per = max(32 // in_dt.itemsize, 32 // out_dt.itemsize)
    hp = -(-h // per) * per
    if rows > _U32_MAX or hp > _U32_MAX:
        return None  # beyond the kernel's uint32 tiling fields
    arch = npu_arch()
    defaults = tiling.npu_arch_defaults(arch)
    ub_bytes = _env_int(UB_BYTES_ENV, defaults.ub_bytes)
    num_cores = _env_int(NUM_CORES_ENV, defaults.num_cores)
    try:
        plan = tiling.plan_layer_norm_grad_beta_kernel(
            rows,
            hp,
            original_h=h,
            in_type_size=_KERNEL_DTYPES[in_dt],
            out_type_size=_KERNEL_DTYPES[out_dt],
            ub_bytes=ub_bytes,
            num_cores=num_cores,
            # The kernel's UB tiles are copies it owns: LayerNormGradBeta may
            # overwrite them, which leaves more UB for rows.
            is_reuse_source=in_dt == np.float32,
            npu_arch=arch,
        )
    except ValueError as e:
        if "cannot hold one row" in str(e):
            return None  # LayerNormGradBeta never splits H
        raise
    return hp, plan


def _ascend_rule(res, dy, *, out_dtype, batch_dims):
    """The lowering, written with jax.numpy and traced by mlir.lower_fun."""
    planned = None if batch_dims else plan_for(res.shape, res.dtype, out_dtype)
    if planned is None:
        return _grad_beta_jnp(res, dy, out_dtype=out_dtype, batch_dims=batch_dims)
    hp, plan = planned
    h = res.shape[-1]
    if hp != h:
        pad = [(0, 0)] * (res.ndim - 1) + [(0, hp - h)]
        res, dy = jnp.pad(res, pad), jnp.pad(dy, pad)
    out = jax.ShapeDtypeStruct((hp,), out_dtype)
    workspace = jax.ShapeDtypeStruct((plan.workspace_bytes // 4,), jnp.float32)
    pd_gamma, pd_beta, _ = jax.ffi.ffi_call(FFI_TARGET, (out, out, workspace))(
        res,
        dy,
        jnp.asarray(plan.to_array()),  # the kernels' tiling, a device-resident constant
        block_dim=np.uint32(plan.block_dim),
        combine_block_dim=np.uint32(plan.combine_block_dim),
        combine_cols_per_core=np.uint32(plan.combine_cols_per_core),
        rows=np.uint32(plan.rows),
        h_length=np.uint32(plan.h_length),
        original_h_length=np.uint32(h),
        tile_rows=np.uint32(plan.tile_rows),
        num_groups=np.uint32(plan.num_groups),
        stack_buffer_bytes=np.uint32(plan.stack_buffer_bytes),
        one_cal_size=np.uint32(plan.api_tile.one_cal_size),
    )
    return [pd_gamma[:h], pd_beta[:h]]


_lowering = mlir.lower_fun(_ascend_rule, multiple_results=True)


# ------------------------------------------------------------------ LayerNorm
#
# layer_norm_forward_local_p, layer_norm_grad_local_p and
# layer_norm_backward_local_p lower to the AscendC kernels of
# cpp/ascend/layer_norm_kernels.asc (CANN's LayerNorm, LayerNormGrad, and
# LayerNormGrad feeding LayerNormGradBeta), planned at trace time by
# jax_lngb.ascend.layer_norm_kernels for the architecture of npu_arch():
#
# * x (and dy) keep their dtype, float32 or float16; H is zero padded to
#   whole 32-byte blocks (the kernels neutralize the padded columns) and
#   sliced back; gamma and beta go in as float32;
# * the per-row statistics cross in the kernels' per-tile layout
#   (ceil8(tile_rows) float32 values per tile), converted here with pads,
#   reshapes and slices, never a reduction;
# * the kernels compute in float32 and round once: the same contract as the
#   CPU kernels (float32 mean and variance, pd_gamma / pd_beta as float32
#   sums per fixed group of rows, added in group order, narrowed once).
#
# The jax.numpy formulas stay the lowering for bfloat16 (CANN's APIs take
# half and float only), for vmapped problems with per-example parameters
# (batch_dims > 0; with shared parameters vmap folds the mapped axis into
# the rows and the kernels run), for symbolic or empty shapes, and where
# one row does not fit the unified buffer (LayerNormGrad keeps eight rows of
# float32 temporaries: on dav-2201, H above about 1100).


def _layer_norm_plan(kind, shape, dtype, epsilon, out_dtype=None):
    """(storage H, plan) for a LayerNorm kernel on inputs of ``shape``, or
    None when the jax.numpy formulas apply (see above)."""
    dt = np.dtype(dtype)
    if dt not in _KERNEL_DTYPES or (out_dtype is not None and np.dtype(out_dtype) not in _KERNEL_DTYPES):
        return None
    if not shape or not all(isinstance(d, (int, np.integer)) for d in shape):
        return None
    h = int(shape[-1])
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    if rows < 1 or h < 1:
        return None
    dtypes = (dt,) if out_dtype is None else (dt, np.dtype(out_dtype))
    hp = layer_norm_kernels.storage_h(h, *dtypes)
    if rows * hp > _U32_MAX:
        return None  # beyond CANN's uint32 tiling fields
    arch = npu_arch()
    defaults = tiling.npu_arch_defaults(arch)
    knobs = dict(
        original_h=h,
        dtype=dt,
        epsilon=float(epsilon),
        npu_arch=arch,
        ub_bytes=_env_int(UB_BYTES_ENV, defaults.ub_bytes),
        num_cores=_env_int(NUM_CORES_ENV, defaults.num_cores),
    )
    try:
        if kind == "forward":
            plan = layer_norm_kernels.plan_forward(rows, hp, **knobs)
        else:
            plan = layer_norm_kernels.plan_backward(rows, hp, fused=kind == "backward", out_dtype=out_dtype, **knobs)
    except ValueError as e:
        if "cannot hold one row" in str(e):
            return None  # the APIs never split H
        raise
    return hp, plan


def _pad_h(a, hp):
    h = a.shape[-1]
    return a if hp == h else jnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, hp - h)])


def _tile_attrs(plan):
    return dict(
        block_dim=np.uint32(plan.block_dim),
        rows=np.uint32(plan.rows),
        h_length=np.uint32(plan.h_length),
        original_h_length=np.uint32(plan.original_h_length),
        tile_rows=np.uint32(plan.tile_rows),
        num_tiles=np.uint32(plan.num_tiles),
        stat_stride=np.uint32(plan.stat_stride),
    )


def _layer_norm_forward_rule(*args, epsilon, batch_dims, backward, zero_centered_gamma=False, has_beta=True):
    x, gamma, beta = args if has_beta else (*args, None)
    planned = None if batch_dims else _layer_norm_plan("forward", x.shape, x.dtype, epsilon)
    if planned is None:
        return list(
            forward_jnp(x, gamma, beta, epsilon=epsilon, batch_dims=batch_dims, zero_centered_gamma=zero_centered_gamma)
        )
    # Without beta the kernel adds an [H] zero bias: AscendC::LayerNorm
    # always takes one (a [rows, H] zero is never materialised).
    if beta is None:
        beta = jnp.zeros(gamma.shape, jnp.float32)
    hp, plan = planned
    h = x.shape[-1]
    stats = jax.ShapeDtypeStruct((plan.stat_elems,), jnp.float32)
    y, mean, variance = jax.ffi.ffi_call(
        ASCEND_LAYER_NORM_FORWARD_TARGET,
        (jax.ShapeDtypeStruct(x.shape[:-1] + (hp,), x.dtype), stats, stats),
    )(
        _pad_h(x, hp),
        _pad_h(kernel_gamma(gamma, zero_centered_gamma), hp),
        _pad_h(beta.astype(jnp.float32), hp),
        jnp.asarray(plan.to_array()),
        **_tile_attrs(plan),
    )
    unstat = lambda v: layer_norm_kernels.stats_from_tiles(v, plan, jnp).reshape(x.shape[:-1])
    return [y[..., :h], unstat(mean), unstat(variance)]


def _backward_operands(dy, x, variance, mean, gamma, hp, plan, zero_centered_gamma):
    tiles = lambda v: layer_norm_kernels.stats_to_tiles(v, plan, jnp)
    return (
        _pad_h(dy, hp),
        _pad_h(x, hp),
        tiles(mean),
        tiles(variance),
        _pad_h(kernel_gamma(gamma, zero_centered_gamma), hp),
        jnp.asarray(plan.to_array()),
    )


def _layer_norm_grad_rule(dy, x, variance, mean, gamma, *, epsilon, batch_dims, zero_centered_gamma=False):
    planned = None if batch_dims else _layer_norm_plan("grad", x.shape, x.dtype, epsilon)
    if planned is None:
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
    hp, plan = planned
    h = x.shape[-1]
    out = jax.ShapeDtypeStruct(x.shape[:-1] + (hp,), x.dtype)
    pd_x, res = jax.ffi.ffi_call(ASCEND_LAYER_NORM_GRAD_TARGET, (out, out))(
        *_backward_operands(dy, x, variance, mean, gamma, hp, plan, zero_centered_gamma), **_tile_attrs(plan)
    )
    return [pd_x[..., :h], res[..., :h]]


def _layer_norm_backward_rule(
    dy, x, variance, mean, gamma, *, epsilon, batch_dims, out_dtype, zero_centered_gamma=False, has_beta=True
):
    planned = None if batch_dims else _layer_norm_plan("backward", x.shape, x.dtype, epsilon, out_dtype)
    if planned is None:
        return list(
            backward_jnp(
                dy,
                x,
                variance,
                mean,
                gamma,
                epsilon=epsilon,
                batch_dims=batch_dims,
                out_dtype=out_dtype,
                zero_centered_gamma=zero_centered_gamma,
                has_beta=has_beta,
            )
        )
    hp, plan = planned
    h = x.shape[-1]
    param = jax.ShapeDtypeStruct((hp,), out_dtype)
    workspace = jax.ShapeDtypeStruct((plan.workspace_bytes // 4,), jnp.float32)
    dx, pd_gamma, pd_beta, _ = jax.ffi.ffi_call(
        ASCEND_LAYER_NORM_BACKWARD_TARGET,
        (jax.ShapeDtypeStruct(x.shape[:-1] + (hp,), x.dtype), param, param, workspace),
    )(
        *_backward_operands(dy, x, variance, mean, gamma, hp, plan, zero_centered_gamma),
        **_tile_attrs(plan),
        combine_block_dim=np.uint32(plan.combine_block_dim),
        combine_cols_per_core=np.uint32(plan.combine_cols_per_core),
        num_groups=np.uint32(plan.num_groups),
    )
    # Without beta the kernel's pd_beta (LayerNormGradBeta forms it anyway) is dropped.
    return [dx[..., :h], pd_gamma[:h], pd_beta[:h]] if has_beta else [dx[..., :h], pd_gamma[:h]]


_LAYER_NORM_LOWERINGS = (
    (layer_norm_forward_local_p, mlir.lower_fun(_layer_norm_forward_rule, multiple_results=True)),
    (layer_norm_grad_local_p, mlir.lower_fun(_layer_norm_grad_rule, multiple_results=True)),
    (layer_norm_backward_local_p, mlir.lower_fun(_layer_norm_backward_rule, multiple_results=True)),
)


# ------------------------------------------------------------------ RMSNorm
#
# rms_norm_forward_local_p and rms_norm_backward_local_p lower to the
# AscendC kernels of cpp/ascend/rms_norm_kernel.asc:
#
# * jax_lngb_ascend_rms_norm_forward: AscendC::RmsNorm on float32 tiles for
#   y (x's dtype), and the float32 rstd of each row from the same tile
#   (CANN's RmsNorm does not return it);
# * jax_lngb_ascend_rms_norm_backward: dx from basic vector APIs and the
#   tile's pd_gamma from AscendC::LayerNormGradBeta on res_for_gamma =
#   x * rstd, per fixed group of tiles, then grad_beta_kernel.asc's combine
#   kernel adds the groups in group order (the bits do not depend on the
#   core count).
#
# H is zero-padded to 32-byte blocks of every operand's dtype; gamma goes in
# as float32, as for the CPU kernels. The kernels' rstd travels as
# [num_tiles, rstd_stride] floats (one 32-byte aligned slot per tile); the
# lowering lays it out and slices it back. float32 and float16 run on the
# kernels; bfloat16 (no AscendC RmsNorm on the products above takes it),
# batch_dims > 0 (gamma per problem, or a gradient taken inside vmap: one
# pd_gamma per example), symbolic or empty
# shapes, H = 1 (CANN's RmsNorm reduction needs two columns) and rows too
# wide for the unified buffer keep the jax.numpy formulas (the backward's
# pd_gamma then still goes through LayerNormGradBeta's lowering). A vmap
# with shared gamma folds the mapped axis into rows (batch_dims = 0): the
# kernels run. On dav-3510 the plan is made for the 950's unified buffer;
# the kernels there are type-checked against CANN's headers but CANN's 3510
# RmsNorm and Sum are not emulated, so emulated runs cover dav-2201 and
# dav-2002 only.

RMS_NORM_FORWARD_TARGET = ASCEND_RMS_NORM_FORWARD_TARGET
RMS_NORM_BACKWARD_TARGET = ASCEND_RMS_NORM_BACKWARD_TARGET


@dataclasses.dataclass(frozen=True)
class RmsNormKernelPlan:
    """What the RMSNorm lowerings need of a kernel plan
    (``cpp/tiling/rms_norm_kernel_plan.h``)."""

    backward: bool
    h: int  # storage H
    original_h: int
    rows: int
    tile_rows: int
    num_tiles: int
    rstd_stride: int
    block_dim: int
    ub_bytes_used: int
    tiling: bytes  # the kernel's tiling words, little-endian
    num_groups: int = 0  # backward only
    combine_block_dim: int = 0
    combine_cols_per_core: int = 0
    workspace_bytes: int = 0

    def to_array(self) -> np.ndarray:
        return np.frombuffer(self.tiling, dtype="<u4").astype(np.uint32)

    def attrs(self) -> dict[str, np.uint32]:
        """The custom call's attributes."""
        a = dict(
            block_dim=self.block_dim,
            rows=self.rows,
            h_length=self.h,
            original_h_length=self.original_h,
            tile_rows=self.tile_rows,
            num_tiles=self.num_tiles,
        )
        if self.backward:
            a.update(
                combine_block_dim=self.combine_block_dim,
                combine_cols_per_core=self.combine_cols_per_core,
                num_groups=self.num_groups,
            )
        return {k: np.uint32(v) for k, v in a.items()}


def plan_rms_norm(
    shape: tuple[int, ...],
    dtype: Any,
    *,
    backward: bool,
    out_dtype: Any = None,
    epsilon: float = 1e-6,
) -> RmsNormKernelPlan | None:
    """The RMSNorm kernel plan the lowering uses for x of ``shape`` and
    ``dtype`` (and, for the backward, pd_gamma of ``out_dtype``), or None
    when the jax.numpy route applies (see the section notes above)."""
    dt = np.dtype(dtype)
    out_dt = np.dtype(out_dtype) if out_dtype is not None else dt
    if dt not in _KERNEL_DTYPES or (backward and out_dt not in _KERNEL_DTYPES):
        return None
    if not shape or not all(isinstance(d, (int, np.integer)) for d in shape):
        return None  # symbolic dimensions: the tiling needs sizes at trace time
    h = int(shape[-1])
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    if rows < 1 or h < 2:
        return None
    per = max(32 // dt.itemsize, 32 // out_dt.itemsize if backward else 8)
    hp = -(-h // per) * per
    if rows * hp > _U32_MAX:
        return None  # beyond CANN's uint32 tiling fields
    arch = npu_arch()
    defaults = tiling.npu_arch_defaults(arch)
    try:
        d = tiling._tiling.plan_rms_norm_kernel(
            backward,
            rows,
            hp,
            h,
            _KERNEL_DTYPES[dt],
            _KERNEL_DTYPES[out_dt],
            float(epsilon),
            _env_int(UB_BYTES_ENV, defaults.ub_bytes),
            _env_int(NUM_CORES_ENV, defaults.num_cores),
            arch,
        )
    except ValueError as e:
        if "cannot hold one row" in str(e):
            return None  # the kernels never split H
        raise
    return RmsNormKernelPlan(
        backward=backward,
        h=hp,
        original_h=h,
        rows=rows,
        tile_rows=int(d["tile_rows"]),
        num_tiles=int(d["num_tiles"]),
        rstd_stride=int(d["rstd_stride"]),
        block_dim=int(d["block_dim"]),
        ub_bytes_used=int(d["ub_bytes_used"]),
        tiling=bytes(d["tiling"]),
        num_groups=int(d.get("num_groups", 0)),
        combine_block_dim=int(d.get("combine_block_dim", 0)),
        combine_cols_per_core=int(d.get("combine_cols_per_core", 0)),
        workspace_bytes=int(d.get("workspace_bytes", 0)),
    )


def _rstd_from_tiles(r, plan: RmsNormKernelPlan, row_shape):
    """The kernels' [num_tiles, rstd_stride] rstd -> [*rows]."""
    r = r.reshape(plan.num_tiles, plan.rstd_stride)[:, : plan.tile_rows].reshape(-1)
    return r[: plan.rows].reshape(row_shape)


def _rstd_to_tiles(r, plan: RmsNormKernelPlan):
    """[*rows] float32 rstd -> the kernels' [num_tiles * rstd_stride] layout."""
    r = r.astype(jnp.float32).reshape(-1)
    r = jnp.pad(r, (0, plan.num_tiles * plan.tile_rows - plan.rows))
    r = r.reshape(plan.num_tiles, plan.tile_rows)
    return jnp.pad(r, ((0, 0), (0, plan.rstd_stride - plan.tile_rows))).reshape(-1)


def _rms_norm_forward_rule(x, gamma, *, epsilon, batch_dims, backward, zero_centered_gamma=False):
    """The forward's Ascend lowering, traced by mlir.lower_fun."""
    plan = None if batch_dims else plan_rms_norm(x.shape, x.dtype, backward=False, epsilon=epsilon)
    if plan is None:
        return list(
            _rms_norm_forward_jnp(
                x, gamma, epsilon=epsilon, batch_dims=batch_dims, zero_centered_gamma=zero_centered_gamma
            )
        )
    h = x.shape[-1]
    outs = (
        jax.ShapeDtypeStruct(x.shape[:-1] + (plan.h,), x.dtype),
        jax.ShapeDtypeStruct((plan.num_tiles * plan.rstd_stride,), jnp.float32),
    )
    y, rstd = jax.ffi.ffi_call(RMS_NORM_FORWARD_TARGET, outs)(
        _pad_h(x, plan.h),
        _pad_h(kernel_gamma(gamma, zero_centered_gamma), plan.h),
        jnp.asarray(plan.to_array()),  # the kernel's tiling, a device-resident constant
        **plan.attrs(),
    )
    return [y[..., :h], _rstd_from_tiles(rstd, plan, x.shape[:-1])]


def _rms_norm_backward_rule(dy, x, rstd, gamma, *, batch_dims, out_dtype, zero_centered_gamma=False):
    """The fused backward's Ascend lowering, traced by mlir.lower_fun."""
    plan = None if batch_dims else plan_rms_norm(x.shape, x.dtype, backward=True, out_dtype=out_dtype)
    if plan is None:
        return _rms_norm_backward_portable(
            dy, x, rstd, gamma, batch_dims=batch_dims, out_dtype=out_dtype, zero_centered_gamma=zero_centered_gamma
        )
    h = x.shape[-1]
    outs = (
        jax.ShapeDtypeStruct(x.shape[:-1] + (plan.h,), x.dtype),
        jax.ShapeDtypeStruct((plan.h,), out_dtype),
        jax.ShapeDtypeStruct((plan.h,), out_dtype),
        jax.ShapeDtypeStruct((plan.workspace_bytes // 4,), jnp.float32),
    )
    dx, pd_gamma, _, _ = jax.ffi.ffi_call(RMS_NORM_BACKWARD_TARGET, outs)(
        _pad_h(dy, plan.h),
        _pad_h(x, plan.h),
        _rstd_to_tiles(rstd, plan),
        _pad_h(kernel_gamma(gamma, zero_centered_gamma), plan.h),
        jnp.asarray(plan.to_array()),
        **plan.attrs(),
    )
    return [dx[..., :h], pd_gamma[:h]]


_rms_norm_forward_lowering = mlir.lower_fun(_rms_norm_forward_rule, multiple_results=True)
_rms_norm_backward_lowering = mlir.lower_fun(_rms_norm_backward_rule, multiple_results=True)


def _register_rms_norm(platform: str) -> None:
    mlir.register_lowering(rms_norm_forward_local_p, _rms_norm_forward_lowering, platform=platform)
    mlir.register_lowering(rms_norm_backward_local_p, _rms_norm_backward_lowering, platform=platform)


def register(platform: str | None = None) -> tuple[str, ...]:
    """Registers the Ascend lowering (and the FFI handler, when built) for
    ``platform``, or for every name of :func:`platform_names` that JAX
    knows. Returns the platforms registered by this call; idempotent."""
    names = (platform,) if platform is not None else platform_names()
    done = []
    with _lock:
        for name in names:
            if name in _registered or not xla_bridge.is_known_platform(name):
                continue
            mlir.register_lowering(layer_norm_grad_beta_local_p, _lowering, platform=name)
            for prim, rule in _LAYER_NORM_LOWERINGS:
                mlir.register_lowering(prim, rule, platform=name)
            _register_rms_norm(name)
            if _ascend is not None:
                for target, capsule in _ascend.registrations().items():
                    jax.ffi.register_ffi_target(target, capsule, platform=name)
            _registered.add(name)
            done.append(name)
    if done:
        # Programs lowered for these platforms before now used the portable
        # rule, and JAX caches lowerings per jitted function: drop them, so
        # the next lowering or export for the platform uses this rule.
        jax.clear_caches()
    return tuple(done)


def register_platform(platform: str = "ascend") -> None:
    """Lets this process lower for ``platform`` without its PJRT plugin.

    Registers a stand-in backend factory for ``platform`` unless JAX already
    knows it (the stand-in never yields a device: JAX skips it quietly when
    it initializes its backends, and running on it fails with a clear
    error), then the Ascend lowering for it, even if ``platform`` is not in
    ``$JAX_LNGB_ASCEND_PLATFORM``. Afterwards ``jax.export`` with
    ``platforms=[..., platform]`` emits the Ascend custom call (see the
    module docstring). Idempotent; with the real plugin loaded it only
    registers the lowering.
    """
    if not isinstance(platform, str) or not platform.strip():
        raise TypeError(f"register_platform: platform must be a non-empty string; got {platform!r}")
    if platform in ("cpu", "cuda", "rocm", "tpu"):
        raise ValueError(f"register_platform: {platform!r} is not an Ascend platform")
    if not xla_bridge.is_known_platform(platform):

        def stand_in():
            raise RuntimeError(
                f"platform {platform!r} is a stand-in registered by jax_lngb.ascend.register_platform "
                "for lowering and export only; running needs the Ascend PJRT plugin"
            )

        xla_bridge.register_backend_factory(platform, stand_in, priority=-1000, fail_quietly=True)
    register(platform)


def _install_backend_hook() -> None:
    """Registers the lowering when a plugin later registers an Ascend platform."""
    original = xla_bridge.register_backend_factory
    if getattr(original, "_jax_lngb_ascend_hook", False):
        return

    @functools.wraps(original)
    def register_backend_factory(name, factory, *args, **kwargs):
        result = original(name, factory, *args, **kwargs)
        if name in platform_names():
            register(name)
        return result

    register_backend_factory._jax_lngb_ascend_hook = True  # type: ignore[attr-defined]
    xla_bridge.register_backend_factory = register_backend_factory


_install_backend_hook()
register()
