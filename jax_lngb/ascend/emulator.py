"""Runs jax_lngb's AscendC LayerNormGradBeta kernels on the CPU.

The kernel source ``cpp/ascend/grad_beta_kernel.asc`` is compiled with the
host compiler against a small emulation of exactly the AscendC subset it uses
(``cpp/ascend/emu/``): global and local tensors, TPipe/TQue/TBuf on a unified
buffer of fixed size, DataCopy and the vector ops with the hardware's 32-byte
rules, GetBlockIdx/GetBlockNum over N emulated cores, and
``AscendC::LayerNormGradBeta`` with CANN's semantics, in either of CANN's
two implementations: the common one (dav-2002, dav-2201) or the 3510 one
(dav-3510), chosen by ``npu_arch`` as CANN chooses by ``__NPU_ARCH__``. The
host side does what the NPU launcher does: pad H, plan with
``jax_lngb.tiling`` for that architecture, launch the partials kernel and
then the combine kernel.

A kernel that overflows the unified buffer, misaligns or overruns a copy,
misuses a queue, or lets two cores touch the same global-memory block in one
launch raises :class:`KernelFault`.

    >>> import numpy as np
    >>> from jax_lngb import ascend_emu
    >>> x = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    >>> g, b = ascend_emu.layer_norm_grad_beta(x, x)
    >>> g[:3], b[:3]
    (array([8960., 9416., 9888.], dtype=float32), array([224., 232., 240.], dtype=float32))
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np

from . import tiling as _tiling_mod

try:
    from .. import _ascend_emu  # the compiled emulation (cpp/ascend/emu/emu_module.cc)
except ImportError as e:  # pragma: no cover - depends on how it was installed
    raise ImportError(
        "jax_lngb's Ascend emulation extension (_ascend_emu) is missing: install the package with "
        f"`pip install .` (or run cpp/dev_build.sh for a working-tree build). Cause: {e}"
    ) from e

__all__ = [
    "DEFAULT_UB_BYTES",
    "EmuRun",
    "KernelFault",
    "layer_norm_grad_beta",
    "layer_norm_grad_beta_api",
    "pad_h",
    "run",
    "run_kernel",
]

KernelFault = _ascend_emu.KernelFault
"""Raised when the emulated kernel breaks a hardware rule (a RuntimeError)."""

DEFAULT_UB_BYTES = 196608  # unified buffer of an Atlas A2/A3 vector core

_DTYPES = {np.dtype(np.float32): 4, np.dtype(np.float16): 2}


@dataclasses.dataclass(frozen=True)
class EmuRun:
    """One emulated execution: results (sliced to the real H), the plan, and
    the counters of both launches (bytes moved, peak UB use, API calls...)."""

    pd_gamma: np.ndarray
    pd_beta: np.ndarray
    plan: _tiling_mod.GradBetaKernelPlan
    partials_stats: dict[str, int]
    combine_stats: dict[str, int]


def _dtype(fn: str, name: str, dtype: Any) -> np.dtype:
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{fn}: {name} must be float32 or float16; got {dtype!r}") from e
    if d not in _DTYPES:
        raise TypeError(
            f"{fn}: {name} must be float32 or float16 (the dtypes AscendC's LayerNormGradBeta supports); got {d.name}"
        )
    return d


def pad_h(h: int, *dtypes: Any) -> int:
    """The storage H: ``h`` rounded up so every row is a whole number of 32-byte
    blocks for each of ``dtypes`` (8 elements for float32, 16 for float16)."""
    per = max(32 // np.dtype(d).itemsize for d in dtypes)
    return -(-h // per) * per


def _arch_number(fn: str, npu_arch: Any) -> int:
    """2002, 2201 or 3510 for "dav-2002", "dav-2201" or "dav-3510"."""
    _tiling_mod.npu_arch_defaults(npu_arch)  # validates, naming the choices
    return int(str(npu_arch)[4:])


def _ub_bytes(fn: str, ub_bytes: Any, npu_arch: Any) -> int:
    return _tiling_mod.npu_arch_defaults(npu_arch).ub_bytes if ub_bytes is None else ub_bytes


def _as_rows(fn: str, res: Any, dy: Any) -> tuple[np.ndarray, np.ndarray]:
    res = np.asarray(res)
    dy = np.asarray(dy)
    if res.ndim < 1:
        raise ValueError(f"{fn}: res_for_gamma must have rank >= 1 (the last axis is H); got shape {res.shape}")
    if dy.shape != res.shape:
        raise ValueError(f"{fn}: dy must have the shape of res_for_gamma {res.shape}; got {dy.shape}")
    d = _dtype(fn, "res_for_gamma", res.dtype)
    if dy.dtype != d:
        raise TypeError(f"{fn}: dy must have the dtype of res_for_gamma ({d.name}); got {dy.dtype.name}")
    h = res.shape[-1]
    rows = int(np.prod(res.shape[:-1], dtype=np.int64))
    if rows == 0 or h == 0:
        raise ValueError(f"{fn}: the kernel needs at least one row and one column; got shape {res.shape}")
    return res.reshape(rows, h), dy.reshape(rows, h)


def run(
    res_for_gamma: Any,
    dy: Any,
    *,
    num_cores: int = 8,
    ub_bytes: int | None = None,
    out_dtype: Any = None,
    tmp_buffer: Literal["auto", "min", "max"] | int = "auto",
    is_reuse_source: bool = False,
    reverse_core_order: bool = False,
    npu_arch: _tiling_mod.NpuArch = "dav-2201",
) -> EmuRun:
    """Pads, plans and runs both kernels; returns results and counters.

    ``npu_arch`` plans for that architecture and runs its LayerNormGradBeta
    implementation (the common one for dav-2002 / dav-2201, the 3510 one
    for dav-3510); ``ub_bytes`` defaults to its unified buffer.
    ``reverse_core_order`` runs the emulated cores last to first (a legal
    schedule must give the same bits).
    """
    fn = "ascend_emu.run"
    ub_bytes = _ub_bytes(fn, ub_bytes, npu_arch)
    res2, dy2 = _as_rows(fn, res_for_gamma, dy)
    in_dt = res2.dtype
    out_dt = in_dt if out_dtype is None else _dtype(fn, "out_dtype", out_dtype)
    rows, h = res2.shape
    hp = pad_h(h, in_dt, out_dt)
    if hp != h:  # zero columns: they sum to zero and are sliced off
        res2 = np.pad(res2, ((0, 0), (0, hp - h)))
        dy2 = np.pad(dy2, ((0, 0), (0, hp - h)))
    plan = _tiling_mod.plan_layer_norm_grad_beta_kernel(
        rows,
        hp,
        original_h=h,
        in_type_size=_DTYPES[in_dt],
        out_type_size=_DTYPES[out_dt],
        ub_bytes=ub_bytes,
        num_cores=num_cores,
        tmp_buffer=tmp_buffer,
        is_reuse_source=is_reuse_source,
        npu_arch=npu_arch,
    )
    g, b, s1, s2 = run_kernel(
        res2,
        dy2,
        plan.to_bytes(),
        out_dtype=out_dt,
        workspace_bytes=plan.workspace_bytes,
        block_dim=plan.block_dim,
        combine_block_dim=plan.combine_block_dim,
        ub_bytes=ub_bytes,
        reverse_core_order=reverse_core_order,
        npu_arch=npu_arch,
    )
    return EmuRun(g[:h], b[:h], plan, s1, s2)


def layer_norm_grad_beta(
    res_for_gamma: Any,
    dy: Any,
    *,
    num_cores: int = 8,
    ub_bytes: int | None = None,
    out_dtype: Any = None,
    tmp_buffer: Literal["auto", "min", "max"] | int = "auto",
    is_reuse_source: bool = False,
    npu_arch: _tiling_mod.NpuArch = "dav-2201",
) -> tuple[np.ndarray, np.ndarray]:
    """``(pd_gamma, pd_beta)`` computed by the emulated Ascend kernels.

    Inputs are float32 or float16 NumPy arrays [..., H] (every leading axis
    is a row axis); results have shape [H] and ``out_dtype`` (default: the
    input dtype). ``ub_bytes`` is the unified buffer per core (default: that
    of ``npu_arch``, 192 KiB on Atlas A2/A3), ``num_cores`` the cores
    launched, ``npu_arch`` the architecture planned and emulated (see
    :func:`run`).
    """
    r = run(
        res_for_gamma,
        dy,
        num_cores=num_cores,
        ub_bytes=ub_bytes,
        out_dtype=out_dtype,
        tmp_buffer=tmp_buffer,
        is_reuse_source=is_reuse_source,
        npu_arch=npu_arch,
    )
    return r.pd_gamma, r.pd_beta


def run_kernel(
    res_rows: np.ndarray,
    dy_rows: np.ndarray,
    tiling_bytes: bytes,
    *,
    out_dtype: Any,
    workspace_bytes: int,
    block_dim: int,
    combine_block_dim: int,
    ub_bytes: int = DEFAULT_UB_BYTES,
    reverse_core_order: bool = False,
    npu_arch: _tiling_mod.NpuArch = "dav-2201",
) -> tuple[np.ndarray, np.ndarray, dict[str, int], dict[str, int]]:
    """Launches both kernels on already padded [rows, H] inputs with the given
    tiling bytes, as the NPU launcher would. Returns the [H] results and the
    counters of each launch. For tests that hand the kernel a bad tiling."""
    fn = "ascend_emu.run_kernel"
    res_rows = np.ascontiguousarray(res_rows)
    dy_rows = np.ascontiguousarray(dy_rows)
    if res_rows.ndim != 2 or dy_rows.shape != res_rows.shape or dy_rows.dtype != res_rows.dtype:
        raise ValueError(f"{fn}: res_rows and dy_rows must be [rows, H] arrays of one shape and dtype")
    in_dt = _dtype(fn, "res_rows", res_rows.dtype)
    out_dt = _dtype(fn, "out_dtype", out_dtype)
    rows, h = res_rows.shape
    g, b, s1, s2 = _ascend_emu.run_grad_beta(
        res_rows.tobytes(),
        dy_rows.tobytes(),
        rows,
        h,
        _DTYPES[in_dt],
        _DTYPES[out_dt],
        bytes(tiling_bytes),
        workspace_bytes,
        block_dim,
        combine_block_dim,
        ub_bytes,
        reverse_core_order,
        _arch_number(fn, npu_arch),
    )
    return np.frombuffer(g, out_dt).copy(), np.frombuffer(b, out_dt).copy(), s1, s2


def layer_norm_grad_beta_api(
    res_for_gamma: Any,
    dy: Any,
    tiling: _tiling_mod.LayerNormGradBetaTiling,
    *,
    stack_buffer_bytes: int,
    is_reuse_source: bool = False,
    ub_bytes: int = DEFAULT_UB_BYTES,
    npu_arch: _tiling_mod.NpuArch = "dav-2201",
) -> tuple[np.ndarray, np.ndarray]:
    """One emulated ``AscendC::LayerNormGradBeta`` call on one core.

    The inputs ([B, S, H] with H already 32-byte aligned) and both outputs
    live in the unified buffer; the call gets ``tiling`` and a shared
    temporary buffer of ``stack_buffer_bytes``. Results are in the input
    dtype, as the API returns them. ``npu_arch`` picks the implementation:
    CANN's common one (dav-2002, dav-2201), which walks the call in chunks
    of ``one_cal_size`` through the buffer with ``original_h_length`` as row
    stride, or its 3510 one (dav-3510), which sums ``bs_length`` rows
    strided by ``h_length`` in place, ignores the buffer, and faults above
    65535 rows (its uint16_t row counter would never reach the end).
    """
    fn = "ascend_emu.layer_norm_grad_beta_api"
    res2, dy2 = _as_rows(fn, res_for_gamma, dy)
    dt = res2.dtype
    g, b, _, _ = _ascend_emu.run_probe(
        np.ascontiguousarray(res2).tobytes(),
        np.ascontiguousarray(dy2).tobytes(),
        res2.size,
        res2.shape[1],
        _DTYPES[dt],
        bool(is_reuse_source),
        int(stack_buffer_bytes),
        [int(w) for w in tiling.to_array()],
        ub_bytes,
        _arch_number(fn, npu_arch),
    )
    return np.frombuffer(g, dt).copy(), np.frombuffer(b, dt).copy()
