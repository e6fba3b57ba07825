"""jax_lngb.tiling against CANN's formulas (SPEC section 2 and CANN's
LayerNormGrad host code), written out independently here, over many shapes,
buffer sizes and both type sizes; plus the plan of the Ascend kernels."""

from __future__ import annotations

import dataclasses
import itertools
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jax_lngb import tiling

U32 = 2**32 - 1

# ------------------------------------------------------------ the formulas


def grad_beta_tmp_ref(shape, ts):
    b, s, h = shape[:3]
    k = 4 if ts == 2 else 2
    return k * b * s * h * 4, k * h * 4


def grad_beta_tiling_ref(shape, stack_bytes, ts):
    """GetLayerNormGradBetaNDTilingInfo, step by step as SPEC section 2 states it."""
    b, s, h = shape[:3]
    oh = shape[3] if len(shape) == 4 else h
    bsh, bs = b * s * h, b * s
    sf = stack_bytes // 4
    assert sf >= 2 * h
    one = sf if ts == 4 else (sf - 2 * h) // 2
    one = one // h * h
    assert one > 0
    one = min(one, bsh)
    tail = bsh % one
    pos = (0, h, 2 * h, 2 * h + one) if ts == 2 else (0, 0, 0, 0)
    return dict(
        stack_buffer_size=sf,
        b_length=b,
        s_length=s,
        h_length=h,
        original_h_length=oh,
        bsh_length=bsh,
        bs_length=bs,
        one_cal_size=one,
        number_of_tmp_buf=2 if ts == 2 else 1,
        loop_round=bsh // one,
        input_tail_size=tail,
        input_tail_pos=bsh - tail,
        bs_tail_size=tail // h,
        bsh_cur_length=one,
        bs_cur_length=one // h,
        gamma_temp_tensor_pos=pos[0],
        beta_temp_tensor_pos=pos[1],
        input_dy_tmp_tensor_pos=pos[2],
        res_for_gamma_tmp_tensor_pos=pos[3],
        reserved=0,
    )


def grad_buffers(ts, reuse):
    return 9 if ts == 2 else (4 if reuse else 6)


def grad_tmp_ref(shape, ts, reuse, arch="dav-2201"):
    b, s, h = shape[:3]
    if arch == "dav-3510":
        if reuse and ts == 4:
            return 0, 0
        v = 2 * (-(-h // 8) * 8) * 4
        return v, v
    n, hh, k = b * s * h, h * h, grad_buffers(ts, reuse)
    return k * max(n, hh) * ts, k * min(n, hh) * ts


def f32_bits(x):
    return int(np.array(x, np.float32).view(np.uint32))


def grad_tiling_ref(shape, stack_bytes, ts, reuse, arch="dav-2201"):
    """GetLayerNormGradNDTilingInfo as CANN's host code computes it."""
    b, s, h = shape[:3]
    oh = shape[3] if len(shape) == 4 else h
    n = b * s * h
    k = grad_buffers(ts, reuse)
    if arch == "dav-3510":
        one = noh = 1
    else:
        one = stack_bytes // 4 // k // h * h
        assert one > 0
        per = 8 if ts == 4 else 16
        noh = -(-(one // h) // per) * per
        one = noh * h
    x1, x2, x3 = (0, 0, 3 * one) if (reuse and ts == 4) else (3 * one, 4 * one, 5 * one)
    tmp = (x3 + one, x3 + 2 * one, x3 + 3 * one) if ts == 2 else (0, 0, 0)
    return dict(
        stack_buffer_size=stack_bytes,
        b_length=b,
        s_length=s,
        h_length=h,
        original_h_length=oh,
        one_cal_size=one,
        noh_cal_size=noh,
        loop_num=n // one,
        tail_size=n % one,
        noh_tail_size=(n % one) // h,
        tmp_tensor_bsh_pos=0,
        tmp_tensor_bsh_size=one,
        pd_var_tensor_pos=one,
        pd_var_tensor_size=one,
        pd_mean_tensor_pos=2 * one,
        pd_mean_tensor_size=one,
        x1_tensor_pos=x1,
        x1_tensor_size=one,
        x2_tensor_pos=x2,
        x2_tensor_size=one,
        x3_tensor_pos=x3,
        x3_tensor_size=one,
        tmp_tensor_pos=tmp[0],
        tmp_tensor_size=one,
        tmp_tensor1_pos=tmp[1],
        tmp_tensor1_size=one,
        tmp_tensor2_pos=tmp[2],
        tmp_tensor2_size=one,
        last_dim_value_back=f32_bits(np.float32(1) / np.float32(oh)),
        last_dim_value_back_mul_two=f32_bits(np.float32(2) / np.float32(oh)),
    )


SHAPES = [
    (1, 8, 8),
    (2, 16, 64),
    (1, 1, 16),
    (3, 7, 32),
    (4, 128, 768),
    (2, 5, 1024, 1000),
    (1, 1000, 8),
    (7, 3, 48, 40),
]


# ------------------------------------------------------ LayerNormGradBeta


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ts", [2, 4])
@pytest.mark.parametrize("reuse", [False, True])
def test_grad_beta_tmp_size_rule(shape, ts, reuse):
    assert tiling.get_layer_norm_grad_beta_max_min_tmp_size(shape, ts, reuse) == grad_beta_tmp_ref(shape, ts)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ts", [2, 4])
def test_grad_beta_tiling_matches_formulas_over_buffer_sizes(shape, ts):
    mx, mn = grad_beta_tmp_ref(shape, ts)
    # the bounds, just around them, odd byte counts, and beyond the maximum
    sizes = {mn, mn + 1, mn + 3, mn + 4 * shape[2] - 1, (mn + mx) // 2, mx - 1, mx, mx + 4096, 3 * mx}
    for stack in sorted(x for x in sizes if mn <= x <= U32):
        got = tiling.get_layer_norm_grad_beta_nd_tiling_info(shape, stack, ts)
        assert dataclasses.asdict(got) == grad_beta_tiling_ref(shape, stack, ts), (shape, stack, ts)
        # isReuseSource is reserved in CANN's host code: same tiling
        assert tiling.get_layer_norm_grad_beta_nd_tiling_info(shape, stack, ts, True) == got


@settings(max_examples=300, deadline=None)
@given(
    b=st.integers(1, 64),
    s=st.integers(1, 300),
    h=st.integers(1, 4096),
    ts=st.sampled_from([2, 4]),
    extra=st.integers(0, 2**20),
    pad=st.integers(0, 7),
)
def test_grad_beta_tiling_matches_formulas_random(b, s, h, ts, extra, pad):
    shape = (b, s, h + pad, h)
    _, mn = grad_beta_tmp_ref(shape, ts)
    stack = mn + extra
    got = tiling.get_layer_norm_grad_beta_nd_tiling_info(shape, stack, ts)
    assert dataclasses.asdict(got) == grad_beta_tiling_ref(shape, stack, ts)
    # what the kernel relies on: whole rows, full coverage, scratch in bounds
    assert got.one_cal_size % got.h_length == 0
    assert got.loop_round * got.one_cal_size + got.input_tail_size == got.bsh_length
    assert got.res_for_gamma_tmp_tensor_pos + got.one_cal_size <= got.stack_buffer_size


def test_grad_beta_worked_example_of_the_documentation():
    # CANN's sample: [2, 16, 64] half with the minimum buffer
    mx, mn = tiling.get_layer_norm_grad_beta_max_min_tmp_size((2, 16, 64, 64), 2)
    assert (mx, mn) == (4 * 2048 * 4, 4 * 64 * 4)
    t = tiling.get_layer_norm_grad_beta_nd_tiling_info((2, 16, 64, 64), mn, 2)
    assert (t.stack_buffer_size, t.one_cal_size, t.loop_round, t.input_tail_size) == (256, 64, 32, 0)
    assert (t.gamma_temp_tensor_pos, t.beta_temp_tensor_pos) == (0, 64)
    assert (t.input_dy_tmp_tensor_pos, t.res_for_gamma_tmp_tensor_pos) == (128, 192)


@pytest.mark.parametrize("ts", [2, 4])
def test_grad_beta_buffer_below_minimum_raises_with_numbers(ts):
    shape = (2, 16, 64)
    _, mn = grad_beta_tmp_ref(shape, ts)
    for stack in (0, 31, mn - 4, mn - 1):
        with pytest.raises(ValueError, match=rf"stack_buffer_size {stack} bytes is below the minimum {mn} bytes"):
            tiling.get_layer_norm_grad_beta_nd_tiling_info(shape, stack, ts)


@pytest.mark.parametrize("ts", [0, 1, 3, 8, -2])
def test_invalid_type_size_raises_with_the_number(ts):
    for fn in (
        lambda: tiling.get_layer_norm_grad_beta_max_min_tmp_size((1, 8, 8), ts),
        lambda: tiling.get_layer_norm_grad_beta_nd_tiling_info((1, 8, 8), 4096, ts),
        lambda: tiling.get_layer_norm_grad_max_min_tmp_size((1, 8, 8), ts),
        lambda: tiling.get_layer_norm_grad_nd_tiling_info((1, 8, 8), 4096, ts),
    ):
        with pytest.raises(ValueError, match=rf"type_size must be 2 \(half\) or 4 \(float\); got {ts}"):
            fn()


@pytest.mark.parametrize(
    "shape, what",
    [
        ((8, 8), "rank 2"),
        ((1, 1, 8, 8, 8), "rank 5"),
        ((0, 8, 8), "every dimension"),
        ((1, -1, 8), "every dimension"),
        ((1, 8, 8, 9), "original_H must not exceed"),
        ((1 << 16, 1 << 16, 2), "fit in uint32"),
    ],
)
def test_bad_shapes_raise(shape, what):
    with pytest.raises(ValueError, match=what):
        tiling.get_layer_norm_grad_beta_nd_tiling_info(shape, 1 << 20, 4)
    with pytest.raises(ValueError, match=what):
        tiling.get_layer_norm_grad_max_min_tmp_size(shape, 4)


def test_argument_types_are_checked():
    with pytest.raises(TypeError, match="shape"):
        tiling.get_layer_norm_grad_beta_max_min_tmp_size("1,8,8", 4)
    with pytest.raises(TypeError, match="type_size must be an integer"):
        tiling.get_layer_norm_grad_beta_max_min_tmp_size((1, 8, 8), 4.0)
    with pytest.raises(TypeError, match="is_reuse_source must be a bool"):
        tiling.get_layer_norm_grad_beta_max_min_tmp_size((1, 8, 8), 4, 1)
    with pytest.raises(ValueError, match=r"stack_buffer_size must be in \[0, 2\^32 - 1\]"):
        tiling.get_layer_norm_grad_beta_nd_tiling_info((1, 8, 8), 2**32, 4)
    with pytest.raises(ValueError, match=r"stack_buffer_size must be in \[0, 2\^32 - 1\]"):
        tiling.get_layer_norm_grad_beta_nd_tiling_info((1, 8, 8), -1, 4)


def test_tmp_sizes_are_exact_beyond_32_bits():
    # CANN's uint32 would wrap; the exact byte counts come back.
    shape = (1 << 10, 1 << 10, 1 << 11)  # 2^31 elements
    assert tiling.get_layer_norm_grad_beta_max_min_tmp_size(shape, 2) == (4 * 2**31 * 4, 4 * 2**11 * 4)


def test_grad_beta_tiling_is_immutable_and_packs_as_the_kernel_reads_it():
    t = tiling.get_layer_norm_grad_beta_nd_tiling_info((3, 7, 32), 5000, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.one_cal_size = 1  # type: ignore[misc]
    data = t.to_bytes()
    assert len(data) == 80
    assert struct.unpack("<20I", data) == tuple(dataclasses.astuple(t))
    assert tiling.LayerNormGradBetaTiling.from_bytes(data) == t
    assert t.to_array().dtype == np.uint32 and list(t.to_array()) == list(dataclasses.astuple(t))
    with pytest.raises(ValueError, match="80 bytes"):
        tiling.LayerNormGradBetaTiling.from_bytes(data[:-4])


# ----------------------------------------------------------- LayerNormGrad

ARCHS = ["dav-2002", "dav-2201", "dav-3510"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ts", [2, 4])
@pytest.mark.parametrize("reuse", [False, True])
@pytest.mark.parametrize("arch", ARCHS)
def test_grad_tmp_size_rule(shape, ts, reuse, arch):
    got = tiling.get_layer_norm_grad_max_min_tmp_size(shape, ts, reuse, npu_arch=arch)
    assert got == grad_tmp_ref(shape, ts, reuse, arch)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ts", [2, 4])
@pytest.mark.parametrize("reuse", [False, True])
@pytest.mark.parametrize("arch", ARCHS)
def test_grad_tiling_matches_cann_host_code(shape, ts, reuse, arch):
    mx, mn = grad_tmp_ref(shape, ts, reuse, arch)
    need_row = 4 * grad_buffers(ts, reuse) * shape[2]
    low = mn if arch == "dav-3510" else max(mn, need_row)
    for stack in sorted({low, low + 4, low + 4 * shape[2] * 3 + 1, (low + mx) // 2, mx, mx + 100}):
        if stack < low or stack > U32:
            continue
        got = tiling.get_layer_norm_grad_nd_tiling_info(shape, stack, ts, reuse, npu_arch=arch)
        assert dataclasses.asdict(got) == grad_tiling_ref(shape, stack, ts, reuse, arch), (shape, stack)
        assert got.last_dim_value_back_float == pytest.approx(1 / got.original_h_length, rel=2**-23)


@settings(max_examples=200, deadline=None)
@given(
    b=st.integers(1, 16),
    s=st.integers(1, 200),
    h=st.integers(1, 2048),
    ts=st.sampled_from([2, 4]),
    reuse=st.booleans(),
    extra=st.integers(0, 2**20),
)
def test_grad_tiling_matches_cann_host_code_random(b, s, h, ts, reuse, extra):
    shape = (b, s, h)
    _, mn = grad_tmp_ref(shape, ts, reuse)
    stack = max(mn, 4 * grad_buffers(ts, reuse) * h) + extra
    got = tiling.get_layer_norm_grad_nd_tiling_info(shape, stack, ts, reuse)
    assert dataclasses.asdict(got) == grad_tiling_ref(shape, stack, ts, reuse)
    assert got.loop_num * got.one_cal_size + got.tail_size == b * s * h


def test_grad_buffer_below_minimum_or_without_a_row_raises():
    shape = (2, 32, 64)
    _, mn = grad_tmp_ref(shape, 4, False)
    with pytest.raises(ValueError, match=rf"below the minimum {mn} bytes"):
        tiling.get_layer_norm_grad_nd_tiling_info(shape, mn - 1, 4)
    # one row of half: CANN's minimum (9 * min(n, H*H) * 2 bytes) is less
    # than one row of its nine fp32 buffers
    one_row = (1, 1, 64)
    _, mn = grad_tmp_ref(one_row, 2, False)
    assert mn < 9 * 4 * 64
    with pytest.raises(ValueError, match=r"holds no whole row: needs at least 2304 bytes"):
        tiling.get_layer_norm_grad_nd_tiling_info(one_row, mn, 2)


def test_grad_on_950_needs_no_buffer_for_reused_float():
    t = tiling.get_layer_norm_grad_nd_tiling_info((2, 3, 64), 0, 4, True, npu_arch="dav-3510")
    assert (t.one_cal_size, t.noh_cal_size, t.loop_num, t.tail_size) == (1, 1, 2 * 3 * 64, 0)


def test_grad_unknown_arch_raises():
    with pytest.raises(ValueError, match=r"npu_arch must be 'dav-2002', 'dav-2201' or 'dav-3510' .*; got 'dav-1001'"):
        tiling.get_layer_norm_grad_max_min_tmp_size((1, 8, 8), 4, npu_arch="dav-1001")


def test_grad_tiling_packs_120_bytes():
    t = tiling.get_layer_norm_grad_nd_tiling_info((2, 32, 16), 1 << 16, 2)
    assert len(t.to_bytes()) == 120
    assert tiling.LayerNormGradTiling.from_bytes(t.to_bytes()) == t


# ------------------------------------------------- the Ascend kernel plan


def _plan(rows, h, **kw):
    kw.setdefault("in_type_size", 4)
    return tiling.plan_layer_norm_grad_beta_kernel(rows, h, **kw)


def partials_ub(tile_rows, h, ts, stack, bn):
    a32 = lambda v: -(-v // 32) * 32
    total = 2 * bn * a32(tile_rows * h * ts) + a32(stack) + a32(2 * h * 4) + bn * a32(2 * h * 4)
    if ts == 2:
        total += 2 * a32(tile_rows * h * 4)
    return total


@pytest.mark.parametrize("rows", [1, 7, 64, 1000, 65536])
@pytest.mark.parametrize("h, ts", [(8, 4), (768, 4), (16, 2), (768, 2), (2048, 4)])
@pytest.mark.parametrize("policy", ["auto", "min", "max"])
@pytest.mark.parametrize("ub", [16384, 196608])
def test_plan_fits_the_unified_buffer_and_covers_the_rows(rows, h, ts, policy, ub):
    reuse_ok = ts == 4
    for reuse in [False, True] if reuse_ok else [False]:
        try:
            p = _plan(rows, h, in_type_size=ts, ub_bytes=ub, tmp_buffer=policy, is_reuse_source=reuse)
        except ValueError as e:
            # only when not even one row fits
            assert "cannot hold one row" in str(e)
            assert partials_ub(1, h, ts, 8 * h, 1) > ub
            continue
        api_reuse = reuse or ts == 2
        assert p.ub_bytes_used == partials_ub(p.tile_rows, h, ts, p.stack_buffer_bytes, p.buffer_num) <= ub
        # the largest tile that fits (or all rows)
        if p.tile_rows < rows:
            bigger = p.tile_rows + 1
            stack = {"min": 8 * h, "max": 8 * bigger * h}.get(
                policy, 8 * h if api_reuse else max(8 * h, 4 * bigger * h)
            )
            assert partials_ub(bigger, h, ts, stack, p.buffer_num) > ub
        assert p.num_tiles == -(-rows // p.tile_rows)
        assert (p.num_tiles - 1) * p.tile_rows + p.last_tile_rows == rows
        assert 1 <= p.num_groups <= tiling._tiling.MAX_GROUPS
        assert (p.num_groups - 1) * p.tiles_per_group < p.num_tiles <= p.num_groups * p.tiles_per_group
        assert p.block_dim == min(8, p.num_groups)
        assert p.workspace_bytes == p.num_groups * 2 * h * 4
        # the LayerNormGradBeta tilings are CANN's for one tile and the last
        for t, r in ((p.api_tile, p.tile_rows), (p.api_last, p.last_tile_rows)):
            assert t == tiling.get_layer_norm_grad_beta_nd_tiling_info((1, r, h, h), p.stack_buffer_bytes, 4, api_reuse)
        if policy == "auto" and not api_reuse:
            assert p.api_tile.loop_round == 1  # one pass per call
        words = struct.unpack(f"<{len(p.to_bytes()) // 4}I", p.to_bytes())
        assert len(words) == tiling._tiling.KERNEL_TILING_WORDS
        assert words[16:36] == tuple(dataclasses.astuple(p.api_tile))
        assert words[36:56] == tuple(dataclasses.astuple(p.api_last))


def test_plan_split_does_not_depend_on_the_core_count():
    base = _plan(50000, 768, in_type_size=2, num_cores=1)
    for cores in (2, 3, 8, 20, 48, 1000):
        p = _plan(50000, 768, in_type_size=2, num_cores=cores)
        for f in (
            "tile_rows",
            "num_tiles",
            "tiles_per_group",
            "num_groups",
            "api_tile",
            "api_last",
            "stack_buffer_bytes",
        ):
            assert getattr(p, f) == getattr(base, f), f
        assert p.block_dim == min(cores, p.num_groups)
        # combine: aligned column ranges covering H
        assert p.combine_cols_per_core % 16 == 0
        assert (
            (p.combine_block_dim - 1) * p.combine_cols_per_core < 768 <= p.combine_block_dim * p.combine_cols_per_core
        )


def test_plan_single_buffers_rows_too_wide_for_double_buffering():
    p = _plan(100, 4608, ub_bytes=196608, is_reuse_source=True)
    assert p.buffer_num == 1 and p.tile_rows >= 1
    with pytest.raises(ValueError, match=r"cannot hold one row of H = 8192 .* needs at least \d+ bytes"):
        _plan(100, 8192)


def test_plan_rejects_what_the_kernel_cannot_do():
    with pytest.raises(ValueError, match="multiple of 32 bytes"):
        _plan(10, 12)
    with pytest.raises(ValueError, match="multiple of 32 bytes"):
        _plan(10, 8, in_type_size=4, out_type_size=2)  # half output rows of 16 bytes
    with pytest.raises(ValueError, match="is_reuse_source is only supported for float"):
        _plan(10, 16, in_type_size=2, is_reuse_source=True)
    with pytest.raises(ValueError, match="sharedTmpBuffer does not suit LayerNormGradBeta"):
        _plan(10, 64, tmp_buffer=100)
    with pytest.raises(ValueError, match="tmp_buffer must be"):
        _plan(10, 64, tmp_buffer="huge")
    with pytest.raises(ValueError, match=r"rows must be in \[1, 2\^32 - 1\]"):
        _plan(0, 64)
    with pytest.raises(ValueError, match=r"original_h must be in \[1, h = 64\]"):
        _plan(4, 64, original_h=65)


@pytest.mark.parametrize("tmp", [512, 4096, 20000])
def test_plan_explicit_tmp_bytes(tmp):
    p = _plan(1000, 64, tmp_buffer=tmp)
    assert p.stack_buffer_bytes == tmp
    assert p.api_tile.stack_buffer_size == tmp // 4


def test_all_type_size_combinations_plan():
    for ts_in, ts_out in itertools.product([2, 4], [2, 4]):
        p = _plan(33, 48, in_type_size=ts_in, out_type_size=ts_out)
        assert p.rows == 33 and p.h_length == 48


# ------------------------------------- per architecture (npu_arch)


def test_npu_arch_defaults():
    got = {a: tiling.npu_arch_defaults(a) for a in ("dav-2002", "dav-2201", "dav-3510")}
    # CANN's TOTAL_UB_SIZE per architecture (dav-3510: less 8 KiB reserved
    # on vector cores); block_dim counts AI cores only for dav-2002's
    # AICORE kernels
    assert {a: (d.ub_bytes, d.block, d.grad_beta_3510) for a, d in got.items()} == {
        "dav-2002": (262144, "AI cores", False),
        "dav-2201": (196608, "vector cores", False),
        "dav-3510": (245760, "vector cores", True),
    }
    assert got["dav-2002"].num_cores == 8 and got["dav-2201"].num_cores == 40
    with pytest.raises(ValueError, match="npu_arch must be 'dav-2002', 'dav-2201' or 'dav-3510'"):
        tiling.npu_arch_defaults("dav-2202")
    with pytest.raises(TypeError, match="npu_arch must be a string"):
        tiling.npu_arch_defaults(2201)


@pytest.mark.parametrize("rows, h, ts", [(200000, 8, 4), (70000, 16, 2), (65536, 8, 4), (1000, 8, 4)])
def test_plan_never_hands_the_3510_implementation_more_rows_than_its_counter(rows, h, ts):
    ub = 1 << 25  # room for far more than 65535 rows a call
    common = _plan(rows, h, in_type_size=ts, ub_bytes=ub, npu_arch="dav-2201")
    p = _plan(rows, h, in_type_size=ts, ub_bytes=ub, npu_arch="dav-3510")
    assert common.tile_rows == rows  # the common implementation takes everything in one call
    assert p.tile_rows == min(rows, tiling.MAX_ROWS_PER_CALL_3510) and p.npu_arch == "dav-3510"
    for t in (p.api_tile, p.api_last):
        assert t.bs_length <= tiling.MAX_ROWS_PER_CALL_3510
        assert t.h_length == t.original_h_length == h  # the padded H is its row stride
    assert (p.num_tiles - 1) * p.tile_rows + p.last_tile_rows == rows


@pytest.mark.parametrize("npu_arch", ["dav-2002", "dav-2201", "dav-3510"])
@pytest.mark.parametrize("ts", [2, 4])
def test_plan_strides_every_call_by_the_padded_h(npu_arch, ts):
    p = _plan(5000, 48, original_h=41, in_type_size=ts, ub_bytes=16384, npu_arch=npu_arch)
    assert p.num_tiles > 1
    for t in (p.api_tile, p.api_last):
        assert (t.h_length, t.original_h_length) == (48, 48)


def test_plan_auto_buffer_on_3510_is_the_minimum():
    # The 3510 implementation never reads sharedTmpBuffer: auto gives it
    # CANN's minimum, which leaves the UB to rows.
    common = _plan(100000, 64, ub_bytes=196608, npu_arch="dav-2201")
    p = _plan(100000, 64, ub_bytes=196608, npu_arch="dav-3510")
    assert p.stack_buffer_bytes == 2 * 64 * 4 < common.stack_buffer_bytes == common.tile_rows * 64 * 4
    assert p.tile_rows > common.tile_rows
    with pytest.raises(ValueError, match="npu_arch must be"):
        _plan(10, 64, npu_arch="ascend")
