"""The plans of jax_lngb's Ascend LayerNorm kernels, and the kernels run on
the CPU emulation of AscendC.

Three AscendC kernels (``cpp/ascend/layer_norm_kernels.asc``), each on CANN's
API of the same name ([B, S, H] forms), all computing on float32 copies in
the unified buffer (UB):

* ``forward``: ``AscendC::LayerNorm``: y (x's dtype), float32 mean and
  variance;
* ``grad``: ``AscendC::LayerNormGrad`` alone: pd_x and res_for_gamma (x's
  dtype), CANN's operation for ``backward="chained"``;
* ``backward`` (fused): per tile ``LayerNormGrad`` feeds
  ``LayerNormGradBeta`` in the UB: dx (x's dtype), pd_gamma and pd_beta
  (float32 partials per group of tiles, added in group order by a second
  kernel, so the bits do not depend on the core count).

A plan (:func:`plan_forward`, :func:`plan_backward`) fixes the rows per API
call (``tile_rows``) from the UB size, and CANN's tilings for a full and the
last tile; the core count only sets ``block_dim``. Statistics travel as
``stat_stride`` = ceil8(tile_rows) float32 values per tile
(:func:`stats_to_tiles` / :func:`stats_from_tiles`).

The emulation runs CANN's dav-2201 and dav-2002 implementations of the
three APIs; on dav-3510 they are not emulated (a run faults), though the
kernels are type-checked and planned for it.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import numpy as np

from . import tiling as _tiling_mod

try:
    from .. import _tiling  # the compiled bindings (cpp/tiling/)
except ImportError as e:  # pragma: no cover - depends on how it was installed
    raise ImportError(f"jax_lngb's tiling extension (_tiling) is missing: {e}") from e

try:  # the emulation, for the run_* functions only
    from .. import _ascend_emu  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on how it was installed
    _ascend_emu = None

_TYPE_SIZES = {np.dtype(np.float32): 4, np.dtype(np.float16): 2}
_ARCH_NUMBERS = {"dav-2002": 2002, "dav-2201": 2201, "dav-3510": 3510}

# The head of each kernel tiling (cpp/tiling/layer_norm_kernel_tiling.h).
_FORWARD_HEAD = (
    "rows",
    "h_length",
    "original_h_length",
    "tile_rows",
    "num_tiles",
    "last_tile_rows",
    "stat_stride",
    "buffer_num",
    "tmp_bytes",
    "epsilon_bits",
)
_GB_HEAD = (
    "rows",
    "h_length",
    "tile_rows",
    "num_tiles",
    "last_tile_rows",
    "tiles_per_group",
    "num_groups",
    "buffer_num",
    "is_reuse_source",
    "stack_buffer_bytes",
    "combine_cols_per_core",
    "combine_chunk_cols",
)
_BACKWARD_TAIL_AT = 56  # words of GradBetaKernelTiling before the LayerNorm fields
_BACKWARD_TAIL = ("original_h_length", "stat_stride", "tmp_bytes", "epsilon_bits", "fused")


@dataclasses.dataclass(frozen=True)
class LayerNormKernelPlan:
    """How one LayerNorm kernel launch splits a [rows, h_length] problem.

    ``kind`` is "forward", "grad" or "backward". ``combine_*``,
    ``num_groups`` and ``workspace_bytes`` concern the fused backward only.
    ``api_tile`` / ``api_last`` are CANN's tilings of the tile's main API
    (LayerNorm, or LayerNormGrad); ``gb_tile`` / ``gb_last`` the
    LayerNormGradBeta ones of the fused backward.
    """

    kind: str
    rows: int
    h_length: int
    original_h_length: int
    tile_rows: int
    num_tiles: int
    last_tile_rows: int
    stat_stride: int
    buffer_num: int
    tmp_bytes: int
    block_dim: int
    num_groups: int
    combine_block_dim: int
    combine_cols_per_core: int
    workspace_bytes: int
    ub_bytes_used: int
    npu_arch: str
    api_tile: Any = dataclasses.field(repr=False)
    api_last: Any = dataclasses.field(repr=False)
    gb_tile: Any = dataclasses.field(repr=False, default=None)
    gb_last: Any = dataclasses.field(repr=False, default=None)
    tiling_bytes: bytes = dataclasses.field(repr=False, default=b"")

    @property
    def stat_elems(self) -> int:
        """float32 values of each statistics operand in global memory."""
        return self.num_tiles * self.stat_stride

    def to_array(self) -> np.ndarray:
        """The kernel's tiling, as uint32 words (what it reads from device memory)."""
        return np.frombuffer(self.tiling_bytes, dtype="<u4").astype(np.uint32)


def _arch(npu_arch: str) -> str:
    if npu_arch not in _ARCH_NUMBERS:
        raise ValueError(f"npu_arch must be one of {sorted(_ARCH_NUMBERS)}; got {npu_arch!r}")
    return npu_arch


def _type_size(name: str, dtype: Any) -> int:
    dt = np.dtype(dtype)
    if dt not in _TYPE_SIZES:
        raise TypeError(f"{name} must be float32 or float16 for the Ascend LayerNorm kernels; got {dt}")
    return _TYPE_SIZES[dt]


def _defaults(npu_arch: str, ub_bytes: int | None, num_cores: int | None) -> tuple[int, int]:
    d = _tiling_mod.npu_arch_defaults(npu_arch)
    return (d.ub_bytes if ub_bytes is None else int(ub_bytes)), (d.num_cores if num_cores is None else int(num_cores))


def plan_forward(
    rows: int,
    h: int,
    *,
    original_h: int | None = None,
    dtype: Any = np.float32,
    epsilon: float = 1e-5,
    npu_arch: str = "dav-2201",
    ub_bytes: int | None = None,
    num_cores: int | None = None,
) -> LayerNormKernelPlan:
    """The forward kernel's plan; ``h`` is the storage (padded) H. Raises
    ``ValueError`` when one row does not fit the unified buffer."""
    arch = _arch(npu_arch)
    ub, cores = _defaults(arch, ub_bytes, num_cores)
    d = _tiling.plan_layer_norm_forward_kernel(
        int(rows), int(h), int(original_h or h), _type_size("dtype", dtype), ub, cores, float(epsilon), arch
    )
    words = struct.unpack(f"<{len(_FORWARD_HEAD)}I", d["tiling"][: 4 * len(_FORWARD_HEAD)])
    f = dict(zip(_FORWARD_HEAD, words))
    return LayerNormKernelPlan(
        kind="forward",
        rows=f["rows"],
        h_length=f["h_length"],
        original_h_length=f["original_h_length"],
        tile_rows=f["tile_rows"],
        num_tiles=f["num_tiles"],
        last_tile_rows=f["last_tile_rows"],
        stat_stride=f["stat_stride"],
        buffer_num=f["buffer_num"],
        tmp_bytes=f["tmp_bytes"],
        block_dim=int(d["block_dim"]),
        num_groups=0,
        combine_block_dim=0,
        combine_cols_per_core=0,
        workspace_bytes=0,
        ub_bytes_used=int(d["ub_bytes_used"]),
        npu_arch=arch,
        api_tile=_tiling_mod.LayerNormTiling.from_bytes(d["api_tile"]),
        api_last=_tiling_mod.LayerNormTiling.from_bytes(d["api_last"]),
        tiling_bytes=bytes(d["tiling"]),
    )


def plan_backward(
    rows: int,
    h: int,
    *,
    fused: bool,
    original_h: int | None = None,
    dtype: Any = np.float32,
    out_dtype: Any = None,
    epsilon: float = 1e-5,
    npu_arch: str = "dav-2201",
    ub_bytes: int | None = None,
    num_cores: int | None = None,
) -> LayerNormKernelPlan:
    """The fused backward's plan (``fused=True``; ``out_dtype`` is pd_gamma's
    and pd_beta's) or LayerNormGrad's alone (``fused=False``)."""
    arch = _arch(npu_arch)
    ub, cores = _defaults(arch, ub_bytes, num_cores)
    ts = _type_size("dtype", dtype)
    out_ts = _type_size("out_dtype", dtype if out_dtype is None else out_dtype)
    d = _tiling.plan_layer_norm_backward_kernel(
        int(rows), int(h), int(original_h or h), ts, out_ts, ub, cores, float(epsilon), arch, bool(fused)
    )
    raw = d["tiling"]
    g = dict(zip(_GB_HEAD, struct.unpack(f"<{len(_GB_HEAD)}I", raw[: 4 * len(_GB_HEAD)])))
    at = 4 * _BACKWARD_TAIL_AT
    tail = dict(zip(_BACKWARD_TAIL, struct.unpack(f"<{len(_BACKWARD_TAIL)}I", raw[at : at + 4 * len(_BACKWARD_TAIL)])))
    gbt = _tiling_mod.LayerNormGradBetaTiling
    return LayerNormKernelPlan(
        kind="backward" if fused else "grad",
        rows=g["rows"],
        h_length=g["h_length"],
        original_h_length=tail["original_h_length"],
        tile_rows=g["tile_rows"],
        num_tiles=g["num_tiles"],
        last_tile_rows=g["last_tile_rows"],
        stat_stride=tail["stat_stride"],
        buffer_num=g["buffer_num"],
        tmp_bytes=tail["tmp_bytes"],
        block_dim=int(d["block_dim"]),
        num_groups=g["num_groups"] if fused else 0,
        combine_block_dim=int(d["combine_block_dim"]),
        combine_cols_per_core=g["combine_cols_per_core"] if fused else 0,
        workspace_bytes=int(d["workspace_bytes"]),
        ub_bytes_used=int(d["ub_bytes_used"]),
        npu_arch=arch,
        api_tile=_tiling_mod.LayerNormGradTiling.from_bytes(d["lng_tile"]),
        api_last=_tiling_mod.LayerNormGradTiling.from_bytes(d["lng_last"]),
        gb_tile=gbt.from_bytes(d["gb_tile"]),
        gb_last=gbt.from_bytes(d["gb_last"]),
        tiling_bytes=bytes(raw),
    )


# ------------------------------------------------------- statistics layout


def stats_to_tiles(v: np.ndarray, plan: LayerNormKernelPlan, xp: Any = np) -> Any:
    """[rows] float32 statistics -> the kernels' [num_tiles * stat_stride]
    layout (``xp`` is numpy or jax.numpy; the padding is zeros)."""
    v = xp.reshape(v, (-1,)).astype(np.float32)
    t, s, nt = plan.tile_rows, plan.stat_stride, plan.num_tiles
    v = xp.pad(v, (0, nt * t - plan.rows))
    if s != t:
        v = xp.pad(xp.reshape(v, (nt, t)), ((0, 0), (0, s - t)))
    return xp.reshape(v, (-1,))


def stats_from_tiles(v: Any, plan: LayerNormKernelPlan, xp: Any = np) -> Any:
    """The inverse of :func:`stats_to_tiles`: [rows] float32."""
    t, s, nt = plan.tile_rows, plan.stat_stride, plan.num_tiles
    if s != t:
        v = xp.reshape(xp.reshape(v, (nt, s))[:, :t], (-1,))
    return v[: plan.rows]


# ------------------------------------------------------------ emulated runs


def pad_columns(a: np.ndarray, h: int) -> np.ndarray:
    """Zero-pads the last axis to ``h`` columns."""
    extra = h - a.shape[-1]
    return a if extra == 0 else np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, extra)])


def storage_h(h: int, *dtypes: Any) -> int:
    """H rounded up to whole 32-byte blocks of every dtype given."""
    per = max(32 // np.dtype(d).itemsize for d in dtypes)
    return -(-h // per) * per


def _emu() -> Any:
    if _ascend_emu is None:
        raise ImportError("jax_lngb's Ascend emulation extension (_ascend_emu) is missing")
    return _ascend_emu


def run_forward(
    x: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray,
    *,
    epsilon: float = 1e-5,
    npu_arch: str = "dav-2201",
    ub_bytes: int | None = None,
    num_cores: int | None = None,
    reverse_core_order: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """The forward kernel on the emulation: (y, mean, variance, counters);
    x is [..., H] float32 or float16, gamma and beta [H] (taken as float32)."""
    x = np.asarray(x)
    h0 = x.shape[-1]
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    hp = storage_h(h0, x.dtype)
    plan = plan_forward(
        rows,
        hp,
        original_h=h0,
        dtype=x.dtype,
        epsilon=epsilon,
        npu_arch=npu_arch,
        ub_bytes=ub_bytes,
        num_cores=num_cores,
    )
    ub = _defaults(plan.npu_arch, ub_bytes, None)[0]
    xs = np.ascontiguousarray(pad_columns(x.reshape(rows, h0), hp))
    g = pad_columns(np.asarray(gamma, np.float32).reshape(h0), hp)
    b = pad_columns(np.asarray(beta, np.float32).reshape(h0), hp)
    y, mean, var, stats = _emu().run_layer_norm_forward(
        xs.tobytes(),
        g.tobytes(),
        b.tobytes(),
        rows,
        hp,
        _TYPE_SIZES[x.dtype],
        plan.tiling_bytes,
        plan.stat_elems,
        plan.block_dim,
        ub,
        _ARCH_NUMBERS[plan.npu_arch],
        reverse_core_order,
    )
    y = np.frombuffer(y, x.dtype).reshape(rows, hp)[:, :h0].reshape(x.shape)
    unstat = lambda v: stats_from_tiles(np.frombuffer(v, np.float32), plan).reshape(x.shape[:-1])
    return y, unstat(mean), unstat(var), dict(stats, plan=plan)


def run_backward(
    dy: np.ndarray,
    x: np.ndarray,
    variance: np.ndarray,
    mean: np.ndarray,
    gamma: np.ndarray,
    *,
    fused: bool,
    out_dtype: Any = None,
    epsilon: float = 1e-5,
    npu_arch: str = "dav-2201",
    ub_bytes: int | None = None,
    num_cores: int | None = None,
    reverse_core_order: bool = False,
) -> tuple:
    """LayerNormGrad alone (``fused=False``: (pd_x, res_for_gamma, counters))
    or the fused backward (``fused=True``: (dx, pd_gamma, pd_beta, counters))
    on the emulation. Operands in the primitives' order."""
    dy, x = np.asarray(dy), np.asarray(x)
    if dy.dtype != x.dtype or dy.shape != x.shape:
        raise ValueError("dy must have x's shape and dtype")
    out_dt = np.dtype(x.dtype if out_dtype is None else out_dtype)
    h0 = x.shape[-1]
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    hp = storage_h(h0, x.dtype, out_dt) if fused else storage_h(h0, x.dtype)
    plan = plan_backward(
        rows,
        hp,
        fused=fused,
        original_h=h0,
        dtype=x.dtype,
        out_dtype=out_dt,
        epsilon=epsilon,
        npu_arch=npu_arch,
        ub_bytes=ub_bytes,
        num_cores=num_cores,
    )
    ub = _defaults(plan.npu_arch, ub_bytes, None)[0]
    flat = lambda a: np.ascontiguousarray(pad_columns(a.reshape(rows, h0), hp)).tobytes()
    tiles = lambda v: np.ascontiguousarray(stats_to_tiles(np.asarray(v, np.float32), plan)).tobytes()
    g = pad_columns(np.asarray(gamma, np.float32).reshape(h0), hp)
    out = _emu().run_layer_norm_backward(
        flat(dy),
        flat(x),
        tiles(mean),
        tiles(variance),
        g.tobytes(),
        rows,
        hp,
        _TYPE_SIZES[x.dtype],
        _TYPE_SIZES[out_dt] if fused else _TYPE_SIZES[x.dtype],
        bool(fused),
        plan.tiling_bytes,
        plan.stat_elems,
        plan.workspace_bytes,
        plan.block_dim,
        plan.combine_block_dim,
        ub,
        _ARCH_NUMBERS[plan.npu_arch],
        reverse_core_order,
    )
    unrow = lambda b: np.frombuffer(b, x.dtype).reshape(rows, hp)[:, :h0].reshape(x.shape)
    if fused:
        pdx, pg, pb, stats, combine = out
        return (
            unrow(pdx),
            np.frombuffer(pg, out_dt)[:h0],
            np.frombuffer(pb, out_dt)[:h0],
            dict(stats, combine=combine, plan=plan),
        )
    pdx, res, stats = out
    return unrow(pdx), unrow(res), dict(stats, plan=plan)
