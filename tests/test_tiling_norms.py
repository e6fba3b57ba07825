"""jax_lngb.tiling's LayerNorm ([B, S, H] form) and RmsNorm host tiling against
CANN's host code (layernorm_tiling_impl.cpp, rmsnorm_tiling_impl.cpp), written
out independently here step by step; hand-worked values; the failure cases;
and the properties the kernels rely on."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jax_lngb import tiling

U32 = 2**32 - 1


def ceil_to(v, unit):
    return -(-v // unit) * unit


# ------------------------------------------------------ LayerNorm formulas


def ln_buffers(ts, reuse):
    return 2 if reuse and ts == 4 else 3


def ln_tmp_ref(shape, ts, reuse):
    b, s, h = shape[:3]
    k = ln_buffers(ts, reuse)
    mv = ceil_to(b * s * 4, 32)
    return k * ceil_to(b * s * h * 4, 32) + 2 * mv, k * ceil_to(h * 4, 32) + 2 * mv


def ln_tiling_ref(shape, stack_bytes, ts, reuse):
    """GetLayerNormNDTilingInfo ([B, S, H] form), in CANN's order of steps."""
    b, s, h = shape[:3]
    oh = shape[3] if len(shape) == 4 else h
    n, bs = b * s * h, b * s
    k = ln_buffers(ts, reuse)
    mean_size = ceil_to(bs, 8)
    mv_total = 0 if ts == 4 else 2 * mean_size
    tmp = stack_bytes // 4
    assert tmp >= mv_total
    one = (tmp - mv_total) // k // h * h
    one = min(one, n)
    assert one > 0
    tail = n % one
    return dict(
        b_length=b,
        s_length=s,
        h_length=h,
        original_h_length=oh,
        input_x_size=n,
        mean_var_size=bs,
        number_of_tmp_buf=k,
        mean_tmp_tensor_pos=0,
        mean_tmp_tensor_size=mean_size,
        variance_tmp_tensor_pos=mean_size,
        variance_tmp_tensor_size=mean_size,
        tmp_buf_size=tmp,
        one_tmp_size=one,
        first_tmp_start_pos=mv_total,
        second_tmp_start_pos=mv_total + one,
        third_tmp_start_pos=mv_total + 2 * one,
        loop_round=n // one,
        input_round_size=one,
        input_tail_size=tail,
        input_tail_pos=n - tail,
        mean_var_round_size=one // h,
        mean_var_tail_size=tail // h,
        mean_var_tail_pos=bs - tail // h,
        bsh_cur_length=one,
        bs_cur_length=one // h,
        last_dim_value_back=float(np.float32(1.0) / np.float32(oh)),
    )


# -------------------------------------------------------- RmsNorm formulas


def rms_tmp_ref(shape, ts):
    b, s, h = shape
    c = 2 if ts == 2 else 1
    return (c * b * s * h + ceil_to(b * s, 32 // ts)) * 4, (c * h + 8) * 4


def rms_tiling_ref(shape, oshape, stack_bytes, ts, basic):
    """GetRmsNormTilingInfo with CANN's row search as the literal loop it is."""
    b, s, h = shape
    c = 2 if ts == 2 else 1
    total = stack_bytes // 4
    r = 1
    while total >= (r + 1) * h * c + ceil_to(r + 1, 8):
        r += 1
    one = min(r * h, b * s * h)
    r = one // h
    if basic:
        r = r if r < 8 else r // 8 * 8
    else:
        r = min(r, 255)
    one = r * h
    n = b * s * h
    tail = n % one
    return dict(
        b_length=b,
        s_length=s,
        h_length=h,
        original_h_length=oshape[2],
        reciprocal_of_h_length=float(np.float32(1.0 / float(np.float32(oshape[2])))),
        main_bsh_length=one,
        main_bs_length=r,
        main_bs_length_align=ceil_to(r, 8),
        loop_round=n // one,
        input_tail_pos=n - tail,
        tail_bsh_length=tail,
        tail_bs_length=tail // h,
    )


def rms_valid(shape, ts, basic):
    b, s, h = shape
    return (h * ts) % 32 == 0 and not (basic and (h % 64 or h >= 2048 or (b * s) % 8))


LN_SHAPES = [
    (1, 1, 8),
    (2, 16, 64),
    (2, 16, 64, 60),
    (3, 7, 48, 41),
    (1, 1000, 16),
    (4, 128, 768),
    (2, 5, 1024, 1000),
    (1, 3, 4096),
    (5, 1, 24),
]

RMS_SHAPES = [  # (shape, original H); H is a multiple of 16: whole 32-byte blocks for either type
    ((1, 1, 16), 16),
    ((2, 16, 64), 64),
    ((2, 16, 64), 60),
    ((3, 7, 48), 41),
    ((1, 1000, 16), 16),
    ((4, 128, 768), 768),
    ((2, 5, 1024), 1000),
    ((1, 3, 4096), 4096),
    ((1, 600, 32), 32),
]


def buffer_sizes(mn, mx, h):
    """The bounds, just around them, odd byte counts and beyond the maximum."""
    sizes = {mn, mn + 1, mn + 3, mn + 4 * h - 1, mn + 12 * h + 5, (mn + mx) // 2, mx - 1, mx, mx + 4096, 3 * mx}
    return sorted(x for x in sizes if mn <= x <= U32)


# ---------------------------------------------------------------- LayerNorm


def test_layer_norm_worked_example_of_the_documentation():
    # CANN's LayerNorm-Tiling sample: [2, 16, 64] half with the minimum buffer.
    # mean/variance: ceil32(2*16*4) = 128 bytes each; a row: ceil32(64*4) = 256;
    # min = 3*256 + 2*128 = 1024; max = 3*ceil32(2048*4) + 2*128 = 24832.
    mx, mn = tiling.get_layer_norm_max_min_tmp_size((2, 16, 64, 64), 2)
    assert (mx, mn) == (24832, 1024)
    t = tiling.get_layer_norm_nd_tiling_info((2, 16, 64, 64), mn, 2)
    # 256 fp32 slots: mean 0..31, variance 32..63, then (256 - 64) // 3 = 64 = one row each.
    assert (t.tmp_buf_size, t.mean_tmp_tensor_size, t.variance_tmp_tensor_pos) == (256, 32, 32)
    assert (t.one_tmp_size, t.first_tmp_start_pos, t.second_tmp_start_pos, t.third_tmp_start_pos) == (64, 64, 128, 192)
    assert (t.loop_round, t.input_tail_size, t.mean_var_round_size, t.mean_var_tail_pos) == (32, 0, 1, 32)
    assert t.last_dim_value_back == 1 / 64


def test_layer_norm_float_hand_worked():
    # [3, 7, 48] (original 41) float, 3000 bytes: 750 slots, no mean/variance
    # copies, 750 // 3 = 250 -> 5 rows of 48 = 240; 1008 elements = 4 rounds + 48.
    t = tiling.get_layer_norm_nd_tiling_info((3, 7, 48, 41), 3000, 4)
    assert (t.tmp_buf_size, t.first_tmp_start_pos, t.one_tmp_size) == (750, 0, 240)
    assert (t.second_tmp_start_pos, t.third_tmp_start_pos) == (240, 480)
    assert (t.loop_round, t.input_tail_size, t.input_tail_pos) == (4, 48, 960)
    assert (t.mean_var_round_size, t.mean_var_tail_size, t.mean_var_tail_pos) == (5, 1, 20)
    assert t.mean_tmp_tensor_size == 24  # 21 rows padded to 8 floats, though float does not use it
    # isReuseSource: two buffers, 750 // 2 = 375 -> 7 rows = 336
    r = tiling.get_layer_norm_nd_tiling_info((3, 7, 48, 41), 3000, 4, True)
    assert (r.number_of_tmp_buf, r.one_tmp_size, r.loop_round, r.input_tail_size) == (2, 336, 3, 0)
    assert r.last_dim_value_back == float(np.float32(1) / np.float32(41))


@pytest.mark.parametrize("shape", LN_SHAPES)
@pytest.mark.parametrize("ts", [2, 4])
@pytest.mark.parametrize("reuse", [False, True])
def test_layer_norm_tmp_size_rule(shape, ts, reuse):
    assert tiling.get_layer_norm_max_min_tmp_size(shape, ts, reuse) == ln_tmp_ref(shape, ts, reuse)


@pytest.mark.parametrize("shape", LN_SHAPES)
@pytest.mark.parametrize("ts", [2, 4])
@pytest.mark.parametrize("reuse", [False, True])
def test_layer_norm_tiling_matches_cann_host_code(shape, ts, reuse):
    mx, mn = ln_tmp_ref(shape, ts, reuse)
    for stack in buffer_sizes(mn, mx, shape[2]):
        got = tiling.get_layer_norm_nd_tiling_info(shape, stack, ts, reuse)
        assert dataclasses.asdict(got) == ln_tiling_ref(shape, stack, ts, reuse), (shape, stack, ts, reuse)


@settings(max_examples=300, deadline=None)
@given(
    b=st.integers(1, 64),
    s=st.integers(1, 300),
    h=st.integers(1, 4096),
    pad=st.integers(0, 7),
    ts=st.sampled_from([2, 4]),
    reuse=st.booleans(),
    extra=st.integers(0, 2**20),
)
def test_layer_norm_tiling_properties(b, s, h, pad, ts, reuse, extra):
    shape = (b, s, h + pad, h)
    mx, mn = tiling.get_layer_norm_max_min_tmp_size(shape, ts, reuse)
    assert mn <= mx
    assert mn % 32 == 0 and mx % 32 == 0  # whole 32-byte blocks
    stack = mn + extra
    t = tiling.get_layer_norm_nd_tiling_info(shape, stack, ts, reuse)
    assert dataclasses.asdict(t) == ln_tiling_ref(shape, stack, ts, reuse)
    # whole rows, every element covered once
    assert t.one_tmp_size % t.h_length == 0 and 0 < t.one_tmp_size <= t.input_x_size
    assert t.loop_round * t.one_tmp_size + t.input_tail_size == t.input_x_size
    assert t.mean_var_round_size * t.loop_round + t.mean_var_tail_size == t.mean_var_size
    # the buffers the kernel takes lie inside the stack buffer (its own assert)
    last = t.second_tmp_start_pos if (reuse and ts == 4) else t.third_tmp_start_pos
    assert last + t.one_tmp_size <= t.tmp_buf_size <= stack // 4
    # half's fp32 mean and variance come first, each in whole 32-byte blocks
    assert t.mean_tmp_tensor_size % 8 == 0 and t.mean_tmp_tensor_size >= t.mean_var_size
    if ts == 2:
        assert t.variance_tmp_tensor_pos + t.variance_tmp_tensor_size == t.first_tmp_start_pos
    # a bigger buffer never gives smaller chunks; the maximum needs one pass
    assert tiling.get_layer_norm_nd_tiling_info(shape, stack + 4096, ts, reuse).one_tmp_size >= t.one_tmp_size
    if mx <= U32:
        full = tiling.get_layer_norm_nd_tiling_info(shape, mx, ts, reuse)
        assert (full.loop_round, full.input_tail_size) == (1, 0)


@pytest.mark.parametrize("ts", [2, 4])
@pytest.mark.parametrize("reuse", [False, True])
def test_layer_norm_buffer_below_minimum_raises_with_numbers(ts, reuse):
    shape = (2, 16, 64)
    _, mn = ln_tmp_ref(shape, ts, reuse)
    # mn - 4: CANN's function would still tile this for float (it does not
    # count the mean/variance there) and for half wraps below 256 bytes; the
    # documented minimum is the bound here.
    for stack in (0, 100, mn - 4, mn - 1):
        with pytest.raises(ValueError, match=rf"stack_buffer_size {stack} bytes is below the minimum {mn} bytes"):
            tiling.get_layer_norm_nd_tiling_info(shape, stack, ts, reuse)


def test_layer_norm_tiling_is_immutable_and_packs_as_the_kernel_reads_it():
    t = tiling.get_layer_norm_nd_tiling_info((3, 7, 48, 41), 3000, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.one_tmp_size = 1  # type: ignore[misc]
    data = t.to_bytes()
    assert len(data) == 104
    words = struct.unpack("<26I", data)
    assert words[:25] == tuple(getattr(t, f) for f in tiling.LayerNormTiling._FIELDS[:25])
    assert words[25] == np.float32(1 / 41).view(np.uint32)  # the float's own bits
    assert tiling.LayerNormTiling.from_bytes(data) == t
    assert t.to_array().dtype == np.uint32 and t.to_array().shape == (26,)
    with pytest.raises(ValueError, match="need 104 bytes"):
        tiling.LayerNormTiling.from_bytes(data[:-4])


# ------------------------------------------------------------------ RmsNorm


def test_rms_norm_worked_example_of_the_documentation():
    # CANN's RmsNorm-Tiling sample: [2, 16, 64] half with the minimum buffer.
    # min = (2*64 + 8) * 4 = 544; max = (2*2048 + ceil16(32)) * 4 = 16512.
    mx, mn = tiling.get_rms_norm_max_min_tmp_size((2, 16, 64), 2)
    assert (mx, mn) == (16512, 544)
    t = tiling.get_rms_norm_tiling_info((2, 16, 64), (2, 16, 64), mn, 2)
    # 136 slots hold 1 row (128 + 8) but not 2 (256 + 8): 32 rounds of one row.
    assert (t.main_bs_length, t.main_bsh_length, t.main_bs_length_align) == (1, 64, 8)
    assert (t.loop_round, t.tail_bsh_length, t.input_tail_pos) == (32, 0, 2048)
    assert t.reciprocal_of_h_length == 1 / 64


def test_rms_norm_hand_worked_caps_and_basic_block():
    # [1, 1024, 8] float with a 64 KiB buffer: 16384 slots fit r*8 + ceil8(r)
    # for r up to 1820, capped at 255 rows: 4 rounds of 255 and a 4-row tail.
    t = tiling.get_rms_norm_tiling_info((1, 1024, 8), None, 65536, 4)
    assert (t.main_bs_length, t.loop_round, t.tail_bs_length, t.input_tail_pos) == (255, 4, 4, 8160)
    assert t.main_bs_length_align == 256
    # the basic block has no 255 cap, but rounds to 8 rows: H = 64, 4000 slots
    # hold r*64 + ceil8(r) for r = 61 (3904 + 64), so 56 rows.
    b = tiling.get_rms_norm_tiling_info((1, 1024, 64), None, 16000, 4, True)
    assert (b.main_bs_length, b.main_bsh_length, b.loop_round, b.tail_bs_length) == (56, 3584, 18, 16)
    big = tiling.get_rms_norm_tiling_info((1, 1024, 64), None, 4 * (1024 * 64 + 1024), 4, True)
    assert (big.main_bs_length, big.loop_round) == (1024, 1)
    # a padded row: the original H only sets the reciprocal
    p = tiling.get_rms_norm_tiling_info((3, 7, 48), (3, 7, 41), 10_000, 2)
    assert (p.h_length, p.original_h_length) == (48, 41)
    assert p.reciprocal_of_h_length == float(np.float32(1.0 / float(np.float32(41))))


@pytest.mark.parametrize("shape, oh", RMS_SHAPES)
@pytest.mark.parametrize("ts", [2, 4])
@pytest.mark.parametrize("basic", [False, True])
def test_rms_norm_tmp_size_rule(shape, oh, ts, basic):
    if not rms_valid(shape, 4, basic):
        with pytest.raises(ValueError, match="is_basic_block needs"):
            tiling.get_rms_norm_max_min_tmp_size(shape, ts, basic)
    else:
        assert tiling.get_rms_norm_max_min_tmp_size(shape, ts, basic) == rms_tmp_ref(shape, ts)


@pytest.mark.parametrize(
    "shape, oh, ts, basic",
    [
        (sh, oh, ts, basic)
        for sh, oh in RMS_SHAPES
        for ts in (2, 4)
        for basic in (False, True)
        if rms_valid(sh, ts, basic)
    ],
)
def test_rms_norm_tiling_matches_cann_host_code(shape, oh, ts, basic):
    b, s, h = shape
    oshape = (b, s, oh)
    mx, mn = rms_tmp_ref(shape, ts)
    for stack in buffer_sizes(mn, mx, h):
        if stack > 4 * 2**20:  # CANN's row search is a loop: keep the reference quick
            continue
        got = tiling.get_rms_norm_tiling_info(shape, oshape, stack, ts, basic)
        assert dataclasses.asdict(got) == rms_tiling_ref(shape, oshape, stack, ts, basic), (shape, stack, ts)


@settings(max_examples=300, deadline=None)
@given(
    b=st.integers(1, 64),
    s=st.integers(1, 300),
    h16=st.integers(1, 256),
    cut=st.integers(0, 15),
    ts=st.sampled_from([2, 4]),
    basic=st.booleans(),
    extra=st.integers(0, 2**20),
)
def test_rms_norm_tiling_properties(b, s, h16, cut, ts, basic, extra):
    h = 16 * h16  # a whole 32-byte block for either type
    if basic:
        h = 64 * (h16 % 31 + 1)
        s = ceil_to(s, 8)
    shape, oshape = (b, s, h), (b, s, h - min(cut, h - 1))
    mx, mn = tiling.get_rms_norm_max_min_tmp_size(shape, ts, basic)
    assert mn <= mx
    stack = mn + extra
    t = tiling.get_rms_norm_tiling_info(shape, oshape, stack, ts, basic)
    assert dataclasses.asdict(t) == rms_tiling_ref(shape, oshape, stack, ts, basic)
    c = 2 if ts == 2 else 1
    r = t.main_bs_length
    # the chunk and its per-row sums fit the buffer
    assert r >= 1 and r * h * c + ceil_to(r, 8) <= stack // 4
    assert t.main_bsh_length == r * h and t.main_bs_length_align % 8 == 0
    assert r <= 255 or basic
    if basic:
        assert r < 8 or r % 8 == 0
    # whole rows, every row covered once
    assert t.loop_round * t.main_bsh_length + t.tail_bsh_length == b * s * h
    assert t.tail_bs_length * h == t.tail_bsh_length and t.input_tail_pos == b * s * h - t.tail_bsh_length
    # the maximum fits every row (up to the cap) in one chunk
    if mx <= U32:
        full = tiling.get_rms_norm_tiling_info(shape, oshape, mx, ts, basic)
        assert full.main_bs_length == (b * s if basic else min(b * s, 255))


@pytest.mark.parametrize(
    "call, what",
    [
        (lambda: tiling.get_rms_norm_tiling_info((2, 16, 64), None, 543, 2), "below the minimum 544 bytes"),
        (lambda: tiling.get_rms_norm_tiling_info((2, 16, 64), None, 0, 4), "below the minimum 288 bytes"),
        (lambda: tiling.get_rms_norm_tiling_info((2, 16, 24), None, 4096, 2), r"H \* type_size a multiple of 32"),
        (lambda: tiling.get_rms_norm_tiling_info((2, 16, 4), None, 4096, 4), r"H \* type_size a multiple of 32"),
        (lambda: tiling.get_rms_norm_tiling_info((2, 16, 64), (2, 16, 65), 4096, 4), "original_shape must have"),
        (lambda: tiling.get_rms_norm_tiling_info((2, 16, 64), (1, 16, 64), 4096, 4), "original_shape must have"),
        (lambda: tiling.get_rms_norm_tiling_info((2, 16, 64), (2, 8, 64), 4096, 4), "original_shape must have"),
        (
            lambda: tiling.get_rms_norm_tiling_info((2, 16, 64), (2, 16, 0), 4096, 4),
            "every dimension of original_shape",
        ),
        (lambda: tiling.get_rms_norm_tiling_info((2, 16, 64, 64), None, 4096, 4), r"must be \(B, S, H\)"),
        (lambda: tiling.get_rms_norm_tiling_info((2, 16, 64), (2, 16), 4096, 4), r"original_shape must be \(B, S, H\)"),
        (lambda: tiling.get_rms_norm_tiling_info((1, 16, 96), None, 1 << 20, 4, True), "H to be a multiple of 64"),
        (lambda: tiling.get_rms_norm_tiling_info((1, 8, 2048), None, 1 << 20, 4, True), "below 2048"),
        (lambda: tiling.get_rms_norm_tiling_info((1, 12, 64), None, 1 << 20, 4, True), "B\\*S to be a multiple of 8"),
        (
            lambda: tiling.get_rms_norm_max_min_tmp_size((3, 5, 64), 2, True),
            "B\\*S to be a multiple of 8; got B\\*S = 15",
        ),
        (lambda: tiling.get_rms_norm_max_min_tmp_size((1, 8, 100), 2, True), "got H = 100"),
        (lambda: tiling.get_rms_norm_max_min_tmp_size((8, 64), 2), r"shape must be \(B, S, H\)"),
        (lambda: tiling.get_rms_norm_max_min_tmp_size((0, 8, 64), 2), "every dimension"),
    ],
)
def test_rms_norm_rejects_what_cann_rejects(call, what):
    with pytest.raises(ValueError, match=what):
        call()


def test_rms_norm_tiling_packs_as_the_kernel_reads_it():
    t = tiling.get_rms_norm_tiling_info((3, 7, 48), (3, 7, 41), 10_000, 2)
    data = t.to_bytes()
    assert len(data) == 48
    words = struct.unpack("<12I", data)
    assert words[4] == np.float32(t.reciprocal_of_h_length).view(np.uint32)
    assert words[5:] == tuple(getattr(t, f) for f in tiling.RmsNormTiling._FIELDS[5:])
    assert tiling.RmsNormTiling.from_bytes(data) == t


# ------------------------------------------------------------ both of them


@pytest.mark.parametrize("ts", [0, 1, 3, 8, -2])
def test_invalid_type_size_raises_with_the_number(ts):
    for fn in (
        lambda: tiling.get_layer_norm_max_min_tmp_size((1, 8, 8), ts),
        lambda: tiling.get_layer_norm_nd_tiling_info((1, 8, 8), 4096, ts),
        lambda: tiling.get_rms_norm_max_min_tmp_size((1, 8, 16), ts),
        lambda: tiling.get_rms_norm_tiling_info((1, 8, 16), None, 4096, ts),
    ):
        with pytest.raises(ValueError, match=rf"type_size must be 2 \(half\) or 4 \(float\); got {ts}"):
            fn()


def test_argument_types_are_checked():
    with pytest.raises(TypeError, match="get_layer_norm_max_min_tmp_size: shape"):
        tiling.get_layer_norm_max_min_tmp_size("1,8,8", 4)
    with pytest.raises(TypeError, match="is_reuse_source must be a bool"):
        tiling.get_layer_norm_nd_tiling_info((1, 8, 8), 4096, 4, 1)
    with pytest.raises(TypeError, match="is_basic_block must be a bool"):
        tiling.get_rms_norm_max_min_tmp_size((1, 8, 64), 4, "yes")
    with pytest.raises(TypeError, match="original_shape must be a sequence"):
        tiling.get_rms_norm_tiling_info((1, 8, 64), 64, 4096, 4)
    with pytest.raises(TypeError, match="stack_buffer_size must be an integer"):
        tiling.get_rms_norm_tiling_info((1, 8, 64), None, 4096.0, 4)
    with pytest.raises(ValueError, match=r"stack_buffer_size must be in \[0, 2\^32 - 1\]"):
        tiling.get_layer_norm_nd_tiling_info((1, 8, 8), 2**32, 4)
    with pytest.raises(ValueError, match="original_H must not exceed"):
        tiling.get_layer_norm_nd_tiling_info((1, 8, 8, 9), 4096, 4)


def test_tmp_sizes_are_exact_beyond_32_bits():
    # CANN's uint32 arithmetic would wrap; the exact byte counts come back.
    shape = (1 << 10, 1 << 10, 1 << 11)  # 2^31 elements
    assert tiling.get_layer_norm_max_min_tmp_size(shape, 4) == ln_tmp_ref(shape, 4, False)
    assert tiling.get_layer_norm_max_min_tmp_size(shape, 4)[0] > U32
    assert tiling.get_rms_norm_max_min_tmp_size(shape, 2) == rms_tmp_ref(shape, 2)
