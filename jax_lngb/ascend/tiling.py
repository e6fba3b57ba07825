"""CANN's host tiling for AscendC ``LayerNormGradBeta``, ``LayerNormGrad``,
``LayerNorm`` (its [B, S, H] form) and ``RmsNorm``.

One C++ implementation (``cpp/tiling/``) serves the Ascend launcher, the CPU
emulation of the kernel and this module. The functions follow CANN's
``GetLayerNormGradBetaMaxMinTmpSize`` / ``GetLayerNormGradBetaNDTilingInfo``
(and the LayerNormGrad pair) with two deliberate differences:

* invalid input (a buffer below the minimum, a type size other than 2 or 4,
  a bad shape) raises ``ValueError`` with the numbers, where CANN only logs
  and leaves the tiling unusable;
* byte sizes are exact Python ints (CANN's uint32 results wrap above 4 GiB).

``shape`` is ``(B, S, H)`` or ``(B, S, H, original_H)``; ``stack_buffer_size``
is in bytes (CANN's code treats it so; its documentation says elements).

    >>> from jax_lngb import tiling
    >>> tiling.get_layer_norm_grad_beta_max_min_tmp_size((2, 16, 64), 2)
    (32768, 1024)
    >>> t = tiling.get_layer_norm_grad_beta_nd_tiling_info((2, 16, 64), 1024, 2)
    >>> t.one_cal_size, t.loop_round, len(t.to_bytes())
    (64, 32, 80)
"""

from __future__ import annotations

import dataclasses
import operator
import struct
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np

try:
    from .. import _tiling  # the compiled bindings (cpp/tiling/tiling_module.cc)
except ImportError as e:  # pragma: no cover - depends on how it was installed
    raise ImportError(
        "jax_lngb's tiling extension (_tiling) is missing: install the package with `pip install .` "
        f"(or run cpp/dev_build.sh for a working-tree build). Cause: {e}"
    ) from e

__all__ = [
    "MAX_ROWS_PER_CALL_3510",
    "GradBetaKernelPlan",
    "LayerNormGradBetaTiling",
    "NpuArchDefaults",
    "LayerNormGradTiling",
    "LayerNormTiling",
    "RmsNormTiling",
    "get_layer_norm_grad_beta_max_min_tmp_size",
    "get_layer_norm_grad_beta_nd_tiling_info",
    "get_layer_norm_grad_max_min_tmp_size",
    "get_layer_norm_grad_nd_tiling_info",
    "get_layer_norm_max_min_tmp_size",
    "get_layer_norm_nd_tiling_info",
    "get_rms_norm_max_min_tmp_size",
    "get_rms_norm_tiling_info",
    "npu_arch_defaults",
    "plan_layer_norm_grad_beta_kernel",
]

NpuArch = Literal["dav-2002", "dav-2201", "dav-3510"]


class _PackedTiling:
    """Shared behaviour of the tiling records: packed uint32 words, little endian."""

    _FIELDS: ClassVar[tuple[str, ...]]

    def to_bytes(self) -> bytes:
        """The struct as the kernel reads it (little-endian uint32 words)."""
        return struct.pack(f"<{len(self._FIELDS)}I", *(getattr(self, f) for f in self._FIELDS))

    def to_array(self) -> np.ndarray:
        """The packed words as a uint32 NumPy array."""
        return np.frombuffer(self.to_bytes(), dtype="<u4").astype(np.uint32)

    @classmethod
    def from_bytes(cls, data: bytes) -> Any:
        n = len(cls._FIELDS)
        if len(data) != 4 * n:
            raise ValueError(f"{cls.__name__}.from_bytes: need {4 * n} bytes; got {len(data)}")
        return cls(*struct.unpack(f"<{n}I", data))


@dataclasses.dataclass(frozen=True)
class LayerNormGradBetaTiling(_PackedTiling):
    """CANN's ``LayerNormGradBetaTiling`` (all fields uint32; sizes in fp32 slots)."""

    stack_buffer_size: int
    b_length: int
    s_length: int
    h_length: int
    original_h_length: int
    bsh_length: int
    bs_length: int
    one_cal_size: int
    number_of_tmp_buf: int
    loop_round: int
    input_tail_size: int
    input_tail_pos: int
    bs_tail_size: int
    bsh_cur_length: int
    bs_cur_length: int
    gamma_temp_tensor_pos: int
    beta_temp_tensor_pos: int
    input_dy_tmp_tensor_pos: int
    res_for_gamma_tmp_tensor_pos: int
    reserved: int


@dataclasses.dataclass(frozen=True)
class LayerNormGradTiling(_PackedTiling):
    """CANN's ``LayerNormGradTiling`` (all fields uint32; ``stack_buffer_size`` in
    bytes; ``last_dim_value_back*`` hold the float32 bits of 1/H and 2/H)."""

    stack_buffer_size: int
    b_length: int
    s_length: int
    h_length: int
    original_h_length: int
    one_cal_size: int
    noh_cal_size: int
    loop_num: int
    tail_size: int
    noh_tail_size: int
    tmp_tensor_bsh_pos: int
    tmp_tensor_bsh_size: int
    pd_var_tensor_pos: int
    pd_var_tensor_size: int
    pd_mean_tensor_pos: int
    pd_mean_tensor_size: int
    x1_tensor_pos: int
    x1_tensor_size: int
    x2_tensor_pos: int
    x2_tensor_size: int
    x3_tensor_pos: int
    x3_tensor_size: int
    tmp_tensor_pos: int
    tmp_tensor_size: int
    tmp_tensor1_pos: int
    tmp_tensor1_size: int
    tmp_tensor2_pos: int
    tmp_tensor2_size: int
    last_dim_value_back: int
    last_dim_value_back_mul_two: int

    @property
    def last_dim_value_back_float(self) -> float:
        """``last_dim_value_back`` read as the float32 it holds (1 / original H)."""
        return float(np.array(self.last_dim_value_back, np.uint32).view(np.float32))


class _PackedTilingWithFloats(_PackedTiling):
    """Tiling records with float fields (CANN declares them ``float``): each packs
    as its IEEE-754 bits in one little-endian word, so a value read back is the
    exact float32 the kernel sees."""

    _FLOAT_FIELDS: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def _format(cls) -> str:
        return "<" + "".join("f" if f in cls._FLOAT_FIELDS else "I" for f in cls._FIELDS)

    def to_bytes(self) -> bytes:
        return struct.pack(self._format(), *(getattr(self, f) for f in self._FIELDS))

    @classmethod
    def from_bytes(cls, data: bytes) -> Any:
        n = len(cls._FIELDS)
        if len(data) != 4 * n:
            raise ValueError(f"{cls.__name__}.from_bytes: need {4 * n} bytes; got {len(data)}")
        return cls(*struct.unpack(cls._format(), data))


@dataclasses.dataclass(frozen=True)
class LayerNormTiling(_PackedTilingWithFloats):
    """CANN's ``LayerNormTiling`` (the [B, S, H] LayerNorm that outputs mean and
    variance). Sizes and positions count fp32 slots of the stack buffer;
    ``last_dim_value_back`` is the float32 1 / original H."""

    b_length: int
    s_length: int
    h_length: int
    original_h_length: int
    input_x_size: int
    mean_var_size: int
    number_of_tmp_buf: int
    mean_tmp_tensor_pos: int
    mean_tmp_tensor_size: int
    variance_tmp_tensor_pos: int
    variance_tmp_tensor_size: int
    tmp_buf_size: int
    one_tmp_size: int
    first_tmp_start_pos: int
    second_tmp_start_pos: int
    third_tmp_start_pos: int
    loop_round: int
    input_round_size: int
    input_tail_size: int
    input_tail_pos: int
    mean_var_round_size: int
    mean_var_tail_size: int
    mean_var_tail_pos: int
    bsh_cur_length: int
    bs_cur_length: int
    last_dim_value_back: float


@dataclasses.dataclass(frozen=True)
class RmsNormTiling(_PackedTilingWithFloats):
    """CANN's ``RmsNormTiling``. Lengths count elements; ``reciprocal_of_h_length``
    is the float32 1 / original H."""

    b_length: int
    s_length: int
    h_length: int
    original_h_length: int
    reciprocal_of_h_length: float
    main_bsh_length: int
    main_bs_length: int
    main_bs_length_align: int
    loop_round: int
    input_tail_pos: int
    tail_bsh_length: int
    tail_bs_length: int


# One source of truth for the field order: the C++ struct definitions.
for _cls, _names in (
    (LayerNormGradBetaTiling, _tiling.layer_norm_grad_beta_fields()),
    (LayerNormGradTiling, _tiling.layer_norm_grad_fields()),
    (LayerNormTiling, _tiling.layer_norm_fields()),
    (RmsNormTiling, _tiling.rms_norm_fields()),
):
    _cls._FIELDS = tuple(f.name for f in dataclasses.fields(_cls))
    if list(_cls._FIELDS) != list(_names):  # pragma: no cover - a build/source mismatch
        raise ImportError(f"jax_lngb.tiling: {_cls.__name__} fields differ from the compiled library")
    if issubclass(_cls, _PackedTilingWithFloats):
        # `from __future__ import annotations` keeps the annotations as strings.
        _cls._FLOAT_FIELDS = frozenset(f.name for f in dataclasses.fields(_cls) if f.type in (float, "float"))


# ------------------------------------------------------------ argument checks


def _int(fn: str, name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{fn}: {name} must be an integer; got {type(value).__name__}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an integer; got {type(value).__name__}") from None
    if not -(2**63) <= v < 2**63:
        raise ValueError(f"{fn}: {name} is out of range; got {v}")
    return v


def _shape(fn: str, shape: Any) -> list[int]:
    if not isinstance(shape, Sequence) or isinstance(shape, (str, bytes)):
        raise TypeError(f"{fn}: shape must be a sequence (B, S, H) or (B, S, H, original_H); got {shape!r}")
    return [_int(fn, "shape", d) for d in shape]


def _dims(fn: str, name: str, value: Any) -> list[int]:
    """A (B, S, H) shape argument other than the (B, S, H[, original_H]) ``shape``."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise TypeError(f"{fn}: {name} must be a sequence (B, S, H); got {value!r}")
    return [_int(fn, name, d) for d in value]


def _bool(fn: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{fn}: {name} must be a bool; got {type(value).__name__}")
    return bool(value)


def _arch(fn: str, npu_arch: Any) -> str:
    if not isinstance(npu_arch, str):
        raise TypeError(f"{fn}: npu_arch must be a string such as 'dav-2201'; got {type(npu_arch).__name__}")
    return npu_arch


# ------------------------------------------------------- LayerNormGradBeta


def get_layer_norm_grad_beta_max_min_tmp_size(
    shape: Sequence[int], type_size: int, is_reuse_source: bool = False
) -> tuple[int, int]:
    """``(max_bytes, min_bytes)`` of the temporary buffer LayerNormGradBeta needs.

    With k = 4 for half (type_size 2) and 2 for float: max = k*B*S*H*4, min = k*H*4.
    ``is_reuse_source`` does not change the result (as in CANN).
    """
    fn = "get_layer_norm_grad_beta_max_min_tmp_size"
    return _tiling.layer_norm_grad_beta_max_min_tmp_size(
        _shape(fn, shape), _int(fn, "type_size", type_size), _bool(fn, "is_reuse_source", is_reuse_source)
    )


def get_layer_norm_grad_beta_nd_tiling_info(
    shape: Sequence[int], stack_buffer_size: int, type_size: int, is_reuse_source: bool = False
) -> LayerNormGradBetaTiling:
    """CANN's LayerNormGradBeta ND tiling for a stack buffer of ``stack_buffer_size`` bytes."""
    fn = "get_layer_norm_grad_beta_nd_tiling_info"
    data = _tiling.layer_norm_grad_beta_nd_tiling_info(
        _shape(fn, shape),
        _int(fn, "stack_buffer_size", stack_buffer_size),
        _int(fn, "type_size", type_size),
        _bool(fn, "is_reuse_source", is_reuse_source),
    )
    return LayerNormGradBetaTiling.from_bytes(data)


# ----------------------------------------------------------- LayerNormGrad


def get_layer_norm_grad_max_min_tmp_size(
    shape: Sequence[int], type_size: int, is_reuse_source: bool = False, *, npu_arch: NpuArch = "dav-2201"
) -> tuple[int, int]:
    """``(max_bytes, min_bytes)`` of the temporary buffer LayerNormGrad needs.

    dav-2002 / dav-2201, with n = B*S*H and k = 9 (half), 6 (float) or 4 (float,
    ``is_reuse_source``): max = k*max(n, H*H)*type_size, min = k*min(n, H*H)*type_size.
    dav-3510: 0 for float with ``is_reuse_source``, else 2*ceil8(H)*4 for both.
    """
    fn = "get_layer_norm_grad_max_min_tmp_size"
    return _tiling.layer_norm_grad_max_min_tmp_size(
        _shape(fn, shape),
        _int(fn, "type_size", type_size),
        _bool(fn, "is_reuse_source", is_reuse_source),
        _arch(fn, npu_arch),
    )


def get_layer_norm_grad_nd_tiling_info(
    shape: Sequence[int],
    stack_buffer_size: int,
    type_size: int,
    is_reuse_source: bool = False,
    *,
    npu_arch: NpuArch = "dav-2201",
) -> LayerNormGradTiling:
    """CANN's LayerNormGrad ND tiling for a stack buffer of ``stack_buffer_size`` bytes."""
    fn = "get_layer_norm_grad_nd_tiling_info"
    data = _tiling.layer_norm_grad_nd_tiling_info(
        _shape(fn, shape),
        _int(fn, "stack_buffer_size", stack_buffer_size),
        _int(fn, "type_size", type_size),
        _bool(fn, "is_reuse_source", is_reuse_source),
        _arch(fn, npu_arch),
    )
    return LayerNormGradTiling.from_bytes(data)


# ---------------------------------------------------------------- LayerNorm


def get_layer_norm_max_min_tmp_size(
    shape: Sequence[int], type_size: int, is_reuse_source: bool = False
) -> tuple[int, int]:
    """``(max_bytes, min_bytes)`` of the stack buffer LayerNorm ([B, S, H] form) needs.

    With k = 2 for float with ``is_reuse_source``, else 3, and ceil32 rounding
    bytes up to a 32-byte block: max = k*ceil32(B*S*H*4) + 2*ceil32(B*S*4),
    min = k*ceil32(H*4) + 2*ceil32(B*S*4).
    """
    fn = "get_layer_norm_max_min_tmp_size"
    return _tiling.layer_norm_max_min_tmp_size(
        _shape(fn, shape), _int(fn, "type_size", type_size), _bool(fn, "is_reuse_source", is_reuse_source)
    )


def get_layer_norm_nd_tiling_info(
    shape: Sequence[int], stack_buffer_size: int, type_size: int, is_reuse_source: bool = False
) -> LayerNormTiling:
    """CANN's LayerNorm ND tiling for a stack buffer of ``stack_buffer_size`` bytes.

    Raises ``ValueError`` below the minimum of
    :func:`get_layer_norm_max_min_tmp_size` (CANN documents that bound as
    required; its own function still tiles some smaller float buffers).
    """
    fn = "get_layer_norm_nd_tiling_info"
    data = _tiling.layer_norm_nd_tiling_info(
        _shape(fn, shape),
        _int(fn, "stack_buffer_size", stack_buffer_size),
        _int(fn, "type_size", type_size),
        _bool(fn, "is_reuse_source", is_reuse_source),
    )
    return LayerNormTiling.from_bytes(data)


# ------------------------------------------------------------------ RmsNorm


def get_rms_norm_max_min_tmp_size(
    shape: Sequence[int], type_size: int, is_basic_block: bool = False
) -> tuple[int, int]:
    """``(max_bytes, min_bytes)`` of the stack buffer RmsNorm needs; ``shape`` is (B, S, H).

    With c = 2 for half and 1 for float: max = (c*B*S*H + B*S rounded up to a
    multiple of 32 // type_size) * 4, min = (c*H + 8) * 4. With
    ``is_basic_block`` the shape must suit the basic-block kernel (H a multiple
    of 64 below 2048, B*S a multiple of 8); CANN returns false otherwise, this
    raises ``ValueError``.
    """
    fn = "get_rms_norm_max_min_tmp_size"
    return _tiling.rms_norm_max_min_tmp_size(
        _dims(fn, "shape", shape), _int(fn, "type_size", type_size), _bool(fn, "is_basic_block", is_basic_block)
    )


def get_rms_norm_tiling_info(
    shape: Sequence[int],
    original_shape: Sequence[int] | None,
    stack_buffer_size: int,
    type_size: int,
    is_basic_block: bool = False,
) -> RmsNormTiling:
    """CANN's RmsNorm tiling (``GetRmsNormTilingInfo``) for a stack buffer of
    ``stack_buffer_size`` bytes.

    ``shape`` is (B, S, H) with H * type_size a multiple of 32; ``original_shape``
    (B, S, original H), or ``None`` for ``shape`` itself. Raises ``ValueError``
    wherever CANN returns false (see :func:`get_rms_norm_max_min_tmp_size`; also
    a buffer below its minimum, a misaligned H, a mismatched original shape).
    """
    fn = "get_rms_norm_tiling_info"
    dims = _dims(fn, "shape", shape)
    data = _tiling.rms_norm_tiling_info(
        dims,
        dims if original_shape is None else _dims(fn, "original_shape", original_shape),
        _int(fn, "stack_buffer_size", stack_buffer_size),
        _int(fn, "type_size", type_size),
        _bool(fn, "is_basic_block", is_basic_block),
    )
    return RmsNormTiling.from_bytes(data)


# ------------------------------------------- the plan of our Ascend kernels


@dataclasses.dataclass(frozen=True)
class GradBetaKernelPlan:
    """How jax_lngb's Ascend LayerNormGradBeta kernels split one problem.

    Rows are cut into tiles of ``tile_rows`` (one ``AscendC::LayerNormGradBeta``
    call each, with tiling ``api_tile``; the last tile uses ``api_last``),
    consecutive tiles into ``num_groups`` groups whose float32 partials go to
    a workspace, and a second kernel adds the partials in group order. Only
    ``block_dim`` depends on the core count, so results do not. ``npu_arch``
    is the architecture planned for (which LayerNormGradBeta implementation
    runs the tiles; see :func:`npu_arch_defaults`).
    """

    rows: int
    h_length: int
    tile_rows: int
    num_tiles: int
    last_tile_rows: int
    tiles_per_group: int
    num_groups: int
    buffer_num: int
    is_reuse_source: bool
    stack_buffer_bytes: int
    combine_cols_per_core: int
    combine_chunk_cols: int
    api_tile: LayerNormGradBetaTiling
    api_last: LayerNormGradBetaTiling
    block_dim: int
    combine_block_dim: int
    workspace_bytes: int
    ub_bytes_used: int
    combine_ub_bytes_used: int
    npu_arch: str
    tiling_bytes: bytes = dataclasses.field(repr=False)

    def to_bytes(self) -> bytes:
        """The kernels' tiling, as they read it from global memory."""
        return self.tiling_bytes

    def to_array(self) -> np.ndarray:
        return np.frombuffer(self.tiling_bytes, dtype="<u4").astype(np.uint32)


_PLAN_HEAD = (
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


MAX_ROWS_PER_CALL_3510: int = int(_tiling.MAX_ROWS_PER_CALL_3510)
"""Most rows one LayerNormGradBeta call may get on the 3510 implementation
(it counts rows in a uint16_t; a larger call never ends)."""


@dataclasses.dataclass(frozen=True)
class NpuArchDefaults:
    """What planning needs to know about an NPU architecture.

    ``ub_bytes``: unified buffer a TPipe may use on one core (CANN's
    TOTAL_UB_SIZE; on dav-3510 less the 8 KiB reserved on vector cores).
    ``num_cores``: the default bound on ``block_dim``, which counts
    ``block`` ("vector cores" for the AIV_ONLY kernels of dav-2201 and
    dav-3510, "AI cores" for the AICORE kernels of dav-2002).
    ``grad_beta_3510``: LayerNormGradBeta is CANN's 3510 implementation
    (sharedTmpBuffer, oneCalSize and originalHLength unused, rows strided by
    hLength, at most :data:`MAX_ROWS_PER_CALL_3510` rows a call) rather than
    the common one (chunks of oneCalSize through sharedTmpBuffer, rows
    strided by originalHLength).
    """

    npu_arch: str
    ub_bytes: int
    num_cores: int
    block: str
    grad_beta_3510: bool


def npu_arch_defaults(npu_arch: NpuArch = "dav-2201") -> NpuArchDefaults:
    """The planning facts of ``npu_arch`` ("dav-2002", "dav-2201" or "dav-3510")."""
    fn = "npu_arch_defaults"
    d = _tiling.npu_arch_defaults(_arch(fn, npu_arch))
    return NpuArchDefaults(npu_arch=npu_arch, **d)


def plan_layer_norm_grad_beta_kernel(
    rows: int,
    h: int,
    *,
    in_type_size: int,
    out_type_size: int | None = None,
    original_h: int | None = None,
    ub_bytes: int = 196608,
    num_cores: int = 8,
    tmp_buffer: Literal["auto", "min", "max"] | int = "auto",
    is_reuse_source: bool = False,
    npu_arch: NpuArch = "dav-2201",
) -> GradBetaKernelPlan:
    """Plans the Ascend kernels for ``rows`` rows of storage width ``h``.

    ``h * type_size`` must be a multiple of 32 bytes for input and output
    (pad H with zeros). ``tmp_buffer`` sizes LayerNormGradBeta's shared
    temporary buffer: ``"min"``/``"max"`` are CANN's bounds for one tile,
    ``"auto"`` the smallest that lets one call finish in a single pass (the
    minimum where the 3510 implementation ignores the buffer), an int an
    exact byte count. ``npu_arch`` picks the LayerNormGradBeta
    implementation the tiles must suit (:func:`npu_arch_defaults`); the
    defaults of ``ub_bytes`` and ``num_cores`` stay those of dav-2201.
    """
    fn = "plan_layer_norm_grad_beta_kernel"
    if isinstance(tmp_buffer, str):
        policy, tmp_bytes = tmp_buffer, 0
    else:
        policy, tmp_bytes = "bytes", _int(fn, "tmp_buffer", tmp_buffer)
    in_ts = _int(fn, "in_type_size", in_type_size)
    d = _tiling.plan_grad_beta_kernel(
        rows=_int(fn, "rows", rows),
        h=_int(fn, "h", h),
        original_h=0 if original_h is None else _int(fn, "original_h", original_h),
        in_type_size=in_ts,
        out_type_size=in_ts if out_type_size is None else _int(fn, "out_type_size", out_type_size),
        ub_bytes=_int(fn, "ub_bytes", ub_bytes),
        num_cores=_int(fn, "num_cores", num_cores),
        tmp_policy=policy,
        tmp_bytes=tmp_bytes,
        is_reuse_source=_bool(fn, "is_reuse_source", is_reuse_source),
        npu_arch=_arch(fn, npu_arch),
    )
    data = d["tiling"]
    words = struct.unpack(f"<{len(data) // 4}I", data)
    head = dict(zip(_PLAN_HEAD, words[: len(_PLAN_HEAD)]))
    head["is_reuse_source"] = bool(head["is_reuse_source"])
    api_at = 16  # after the 12 head words and 4 reserved words
    n = len(LayerNormGradBetaTiling._FIELDS)
    return GradBetaKernelPlan(
        **head,
        api_tile=LayerNormGradBetaTiling(*words[api_at : api_at + n]),
        api_last=LayerNormGradBetaTiling(*words[api_at + n : api_at + 2 * n]),
        block_dim=d["block_dim"],
        combine_block_dim=d["combine_block_dim"],
        workspace_bytes=d["workspace_bytes"],
        ub_bytes_used=d["ub_bytes_used"],
        combine_ub_bytes_used=d["combine_ub_bytes_used"],
        npu_arch=npu_arch,
        tiling_bytes=data,
    )
