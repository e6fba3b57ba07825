"""The emulated AscendC LayerNorm, LayerNormGrad and RmsNorm ([B, S, H]
forms), run through the probe kernels of cpp/ascend/emu/norm_api_kernels.asc
on one emulated core: against float64 references with error bounds derived
from the order CANN's implementations compute in (float and half, H exactly
aligned and padded, one chunk and many), bit-identical results wherever
CANN's algorithm makes them so (chunking, isReuseSource, the framework's
temporary space), and each fault a wrong call must raise.

The tilings come from a Python model of CANN's host tiling functions
(GetLayerNormNDTilingInfo, GetLayerNormGradNDTilingInfo,
GetRmsNormTilingInfo and their GetXxxMaxMinTmpSize) below."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from jax_lngb import _ascend_emu

KernelFault = _ascend_emu.KernelFault

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
U = {F32: 2.0**-24, F16: 2.0**-11}  # unit roundoff of the output type
U32 = 2.0**-24  # the APIs compute in fp32
HALF_MIN_SUB = 2.0**-25  # half of half's smallest subnormal


def f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def bits_f32(w: int) -> float:
    return struct.unpack("<f", struct.pack("<I", w))[0]


def ceil_to(n: int, m: int) -> int:
    return -(-n // m) * m


def padded_h(h0: int, dtype) -> int:
    return ceil_to(h0, 32 // np.dtype(dtype).itemsize)


# ------------------------------------------------- CANN's host tiling, modelled

LN_FIELDS = (
    "bLength sLength hLength originalHLength inputXSize meanVarSize numberOfTmpBuf meanTmpTensorPos "
    "meanTmpTensorSize varianceTmpTensorPos varianceTmpTensorSize tmpBufSize oneTmpSize firstTmpStartPos "
    "secondTmpStartPos thirdTmpStartPos loopRound inputRoundSize inputTailSize inputTailPos meanVarRoundSize "
    "meanVarTailSize meanVarTailPos bshCurLength bsCurLength lastDimValueBack"
).split()
LNG_FIELDS = (
    "stackBufferSize bLength sLength hLength originalHLength oneCalSize nohCalSize loopNum tailSize nohTailSize "
    "tmpTensorBSHPos tmpTensorBSHSize pdVarTensorPos pdVarTensorSize pdMeanTensorPos pdMeanTensorSize x1TensorPos "
    "x1TensorSize x2TensorPos x2TensorSize x3TensorPos x3TensorSize tmpTensorPos tmpTensorSize tmpTensor1Pos "
    "tmpTensor1Size tmpTensor2Pos tmpTensor2Size lastDimValueBack lastDimValueBackMulTwo"
).split()
RMS_FIELDS = (
    "bLength sLength hLength originalHLength reciprocalOfHLength mainBshLength mainBsLength mainBsLengthAlign "
    "loopRound inputTailPos tailBshLength tailBsLength"
).split()


def words(fields, t: dict) -> list[int]:
    """The tiling struct as 32-bit words (float fields as their bits)."""
    return [f32_bits(t[f]) if isinstance(t[f], float) else t[f] for f in fields]


def layer_norm_tmp(b, s, h, ts, reuse) -> tuple[int, int]:
    """GetLayerNormMaxMinTmpSize: (max, min) bytes."""
    mv = ceil_to(b * s * 4, 32)
    reuse_f32 = reuse and ts == 4
    n = 2 if reuse_f32 else 3
    return n * ceil_to(b * s * h * 4, 32) + 2 * mv, n * ceil_to(h * 4, 32) + 2 * mv


def layer_norm_tiling(b, s, h, h0, stack_bytes, ts, reuse) -> dict:
    """GetLayerNormNDTilingInfo."""
    bsh, bs = b * s * h, b * s
    n_tmp = 2 if (reuse and ts == 4) else 3
    mts = ceil_to(bs, 8)
    mv_total = 0 if ts == 4 else 2 * mts
    tmp_buf = stack_bytes // 4
    one = (tmp_buf - mv_total) // n_tmp // h * h
    one = min(one, bsh)
    assert one > 0, "stack too small for one row"
    tail = bsh % one
    return dict(
        bLength=b,
        sLength=s,
        hLength=h,
        originalHLength=h0,
        inputXSize=bsh,
        meanVarSize=bs,
        numberOfTmpBuf=n_tmp,
        meanTmpTensorPos=0,
        meanTmpTensorSize=mts,
        varianceTmpTensorPos=mts,
        varianceTmpTensorSize=mts,
        tmpBufSize=tmp_buf,
        oneTmpSize=one,
        firstTmpStartPos=mv_total,
        secondTmpStartPos=mv_total + one,
        thirdTmpStartPos=mv_total + 2 * one,
        loopRound=bsh // one,
        inputRoundSize=one,
        inputTailSize=tail,
        inputTailPos=bsh - tail,
        meanVarRoundSize=one // h,
        meanVarTailSize=tail // h,
        meanVarTailPos=bs - tail // h,
        bshCurLength=one,
        bsCurLength=one // h,
        lastDimValueBack=float(np.float32(1.0) / np.float32(h0)),
    )


def layer_norm_grad_bufs(ts, reuse) -> int:
    return 9 if ts == 2 else (4 if reuse else 6)


def layer_norm_grad_tmp(b, s, h, ts, reuse) -> tuple[int, int]:
    """GetLayerNormGradMaxMinTmpSize (dav-2201): (max, min) bytes."""
    bsh = b * s * h
    n = layer_norm_grad_bufs(ts, reuse)
    return n * max(bsh, h * h) * ts, n * min(bsh, h * h) * ts


def layer_norm_grad_tiling(b, s, h, h0, stack_bytes, ts, reuse) -> dict:
    """GetLayerNormGradNDTilingInfo (dav-2201)."""
    bsh = b * s * h
    n = layer_norm_grad_bufs(ts, reuse)
    one = stack_bytes // 4 // n // h * h
    assert one > 0, "stackBufferSize is not enough"
    noh = ceil_to(one // h, 8 if ts == 4 else 16)
    one = noh * h
    pos = {}
    pos["tmpTensorBSHPos"] = 0
    pos["pdVarTensorPos"] = one
    pos["pdMeanTensorPos"] = 2 * one
    if reuse and ts == 4:
        pos["x1TensorPos"] = pos["x2TensorPos"] = 0
        pos["x3TensorPos"] = 3 * one
    else:
        pos["x1TensorPos"], pos["x2TensorPos"], pos["x3TensorPos"] = 3 * one, 4 * one, 5 * one
    if ts == 2:
        pos["tmpTensorPos"], pos["tmpTensor1Pos"], pos["tmpTensor2Pos"] = 6 * one, 7 * one, 8 * one
    else:
        pos["tmpTensorPos"] = pos["tmpTensor1Pos"] = pos["tmpTensor2Pos"] = 0
    t = dict(
        stackBufferSize=stack_bytes,
        bLength=b,
        sLength=s,
        hLength=h,
        originalHLength=h0,
        oneCalSize=one,
        nohCalSize=noh,
        loopNum=bsh // one,
        tailSize=bsh % one,
        nohTailSize=(bsh % one) // h,
        lastDimValueBack=f32_bits(float(np.float32(1.0) / np.float32(h0))),
        lastDimValueBackMulTwo=f32_bits(float(np.float32(2.0) / np.float32(h0))),
        **pos,
    )
    for f in (
        "tmpTensorBSH",
        "pdVarTensor",
        "pdMeanTensor",
        "x1Tensor",
        "x2Tensor",
        "x3Tensor",
        "tmpTensor",
        "tmpTensor1",
        "tmpTensor2",
    ):
        t[f + "Size"] = one
    return t


def layer_norm_grad_fitting_tmp(rows: int, h: int, ts: int, reuse: bool) -> int:
    """A stackBufferSize whose tiling's temporaries all fit in it: chunks of
    `rows` rows, rounded up to the 32-byte row multiple CANN's tiling imposes."""
    rows = ceil_to(rows, 8 if ts == 4 else 16)
    return layer_norm_grad_bufs(ts, reuse) * rows * h * 4


def rms_norm_tmp(b, s, h, ts) -> tuple[int, int]:
    """GetRmsNormMaxMinTmpSize: (max, min) bytes."""
    bs_al = ceil_to(b * s, 32 // ts)
    coeff = 2 if ts == 2 else 1
    return (b * s * h * coeff + bs_al) * 4, (h * coeff + 8) * 4


def rms_norm_tiling(b, s, h, h0, stack_bytes, ts, basic) -> dict:
    """GetRmsNormTilingInfo."""
    assert stack_bytes >= rms_norm_tmp(b, s, h, ts)[1]
    total = stack_bytes // 4
    coeff = 1 if ts == 4 else 2
    bs = 1
    while total >= (bs + 1) * h * coeff + ceil_to(bs + 1, 8):
        bs += 1
    one = min(bs * h, b * s * h)
    bs = one // h
    if basic:
        bs = bs if bs < 8 else bs // 8 * 8
    else:
        bs = min(bs, 255)
    one = bs * h
    bsh = b * s * h
    tail = bsh % one
    return dict(
        bLength=b,
        sLength=s,
        hLength=h,
        originalHLength=h0,
        reciprocalOfHLength=float(np.float32(1.0 / h0)),
        mainBshLength=one,
        mainBsLength=bs,
        mainBsLengthAlign=ceil_to(bs, 8),
        loopRound=bsh // one,
        inputTailPos=bsh - tail,
        tailBshLength=tail,
        tailBsLength=tail // h,
    )


# ------------------------------------------------------------------ running


def run(
    api,
    dtype,
    shape,
    inputs,
    tiling_words,
    tmp_bytes,
    eps,
    flag=False,
    mode="normal",
    calls=1,
    ub_bytes=196608,
    npu_arch=2201,
):
    b, s, h = shape
    outs, after, stats = _ascend_emu.run_norm_api(
        api,
        np.dtype(dtype).itemsize,
        flag,
        b,
        s,
        h,
        [np.ascontiguousarray(a, dtype).tobytes() for a in inputs],
        tiling_words,
        tmp_bytes,
        eps,
        mode,
        calls,
        ub_bytes,
        npu_arch,
    )
    return [np.frombuffer(o, dtype) for o in outs], after, stats


def make_rows(rng, shape, h0, dtype, scale=1.0, shift=0.0):
    """[B*S, H] of random values rounded to dtype, zero past column h0."""
    b, s, h = shape
    a = (rng.standard_normal((b * s, h)) * scale + shift).astype(np.float32).astype(dtype)
    a[:, h0:] = 0
    return a


def make_vec(rng, h, h0, dtype, shift=0.0):
    v = (rng.standard_normal(h) * 0.5 + shift).astype(np.float32).astype(dtype)
    v[h0:] = 0
    return v


def n_sum(h: int) -> int:
    """Additions any one term goes through in CANN's row reductions: folds of
    64-column blocks (LayerNorm, basic-block RmsNorm) or passes of 64-lane
    repeat sums (LayerNormGrad, RmsNorm), each repeat a 6-level tree."""
    return h // 64 + 6 * max(1, math.ceil(math.log(h, 64))) + 4


def assert_within(got, ref, bound, what):
    got = np.asarray(got, np.float64)
    err = np.abs(got - ref)
    bad = ~(err <= bound)
    assert not bad.any(), (
        f"{what}: {bad.sum()} of {bad.size} values out of bounds; worst err "
        f"{err[bad].max()} vs bound {bound[bad][np.argmax(err[bad])]}"
    )


def shape_id(v) -> str:
    return "x".join(map(str, v)) if isinstance(v, tuple) else str(v)


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)


# --------------------------------------------------------------- LayerNorm


def layer_norm_ref(x, g, b, h0, eps, dtype):
    """CANN's LayerNorm in float64 on the storage rows: the mean over the
    original H, the variance summed over every stored column (padding
    included) and divided by the original H; with bounds for the emulation's
    fp32 computation and the output rounding."""
    x = x.astype(np.float64)
    g = g.astype(np.float64)
    b = b.astype(np.float64)
    h = x.shape[1]
    mean = x.sum(1) / h0
    d = x - mean[:, None]
    var = (d * d).sum(1) / h0
    e = float(np.dtype(dtype).type(eps))  # the API takes epsilon as T
    rstd = 1 / np.sqrt(var + e)
    y = d * rstd[:, None] * g + b
    k = n_sum(h) + 4
    dm = k * U32 * np.abs(x).sum(1) / h0
    dv = k * U32 * (d * d).sum(1) / h0 + 2 * dm * np.abs(d).sum(1) / h0 + dm * dm * h / h0
    rel_r = 0.5 * dv / (var + e) + 4 * U32
    dxhat = dm[:, None] * rstd[:, None] + np.abs(d) * rstd[:, None] * rel_r[:, None]
    u = U[np.dtype(dtype)]
    by = np.abs(g) * dxhat + 3 * U32 * (np.abs(d * rstd[:, None] * g) + np.abs(y)) + u * np.abs(y) + HALF_MIN_SUB
    bm = dm + u * np.abs(mean) + HALF_MIN_SUB
    bv = dv + u * var + HALF_MIN_SUB
    return (y, by), (mean, bm), (var, bv)


def run_layer_norm(x, g, b, shape, h0, eps, dtype, tmp="max", reuse=False, tmp_bytes=None, **kw):
    bb, s, h = shape
    ts = np.dtype(dtype).itemsize
    mx, mn = layer_norm_tmp(bb, s, h, ts, reuse)
    stack = {"max": mx, "min": mn}.get(tmp, tmp)
    t = layer_norm_tiling(bb, s, h, h0, stack, ts, reuse)
    (y, mean, var), after, _ = run(
        "layer_norm",
        dtype,
        shape,
        [x, g, b],
        words(LN_FIELDS, t),
        stack if tmp_bytes is None else tmp_bytes,
        eps,
        flag=reuse,
        **kw,
    )
    return y.reshape(x.shape), mean, var, t, after


LN_SHAPES = [
    ((2, 3, 16), 16),  # H aligned for both types
    ((1, 5, 64), 64),  # one full 64-lane repeat
    ((2, 4, 200), 200),  # folded blocks and a partial one (float); padded to 208 for half
    ((1, 4, 1000), 1000),
    ((3, 7, 48), 40),  # padded H
    ((1, 9, 16), 13),  # padded H below one block
]


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
@pytest.mark.parametrize("shape,h0", LN_SHAPES, ids=shape_id)
@pytest.mark.parametrize("tmp", ["max", "min"])
def test_layer_norm_matches_float64(rng, dtype, shape, h0, tmp):
    shape = (shape[0], shape[1], padded_h(shape[2], dtype))
    h = shape[2]
    x = make_rows(rng, shape, h0, dtype, scale=2.0, shift=0.5)
    g = make_vec(rng, h, h0, dtype, shift=1.0)
    b = make_vec(rng, h, h0, dtype)
    y, mean, var, t, _ = run_layer_norm(x, g, b, shape, h0, 1e-5, dtype, tmp=tmp)
    assert y.dtype == dtype and mean.shape == (shape[0] * shape[1],)
    (ry, by), (rm, bm), (rv, bv) = layer_norm_ref(x, g, b, h0, 1e-5, dtype)
    assert_within(mean, rm, bm, "mean")
    assert_within(var, rv, bv, "variance")
    assert_within(y, ry, by, "y")
    if tmp == "min" and shape[0] * shape[1] > 1:
        assert t["loopRound"] > 1  # the minimum really splits the rows into chunks


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_layer_norm_padded_h_adds_the_padding_to_the_variance(rng, dtype):
    # CANN sums (x - mean)^2 over every stored column, and a zero pad gives
    # mean^2 each: the variance grows by (H - H0) / H0 * mean^2.
    shape, h0 = (1, 6, 48), 33
    x = make_rows(rng, shape, h0, dtype, shift=3.0)
    g = np.ones(48, dtype)
    b = np.zeros(48, dtype)
    _, mean, var, _, _ = run_layer_norm(x, g, b, shape, h0, 1e-5, dtype)
    x64 = x.astype(np.float64)[:, :h0]
    true_var = x64.var(1)
    m = x64.mean(1)
    np.testing.assert_allclose(var.astype(np.float64), true_var + (48 - h0) / h0 * m * m, rtol=2e-3)
    assert np.all(var.astype(np.float64) > true_var * 1.2)


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_layer_norm_chunks_and_temporary_space_do_not_change_bits(rng, dtype):
    shape = (2, 9, padded_h(72, dtype))
    x = make_rows(rng, shape, 72, dtype)
    g = make_vec(rng, shape[2], 72, dtype, shift=1.0)
    b = make_vec(rng, shape[2], 72, dtype)
    ref = run_layer_norm(x, g, b, shape, 72, 1e-3, dtype, tmp="max")
    mx, mn = layer_norm_tmp(*shape, dtype.itemsize, False)
    for stack in (mn, mn + 7 * 4 * shape[2], (mn + mx) // 2):
        got = run_layer_norm(x, g, b, shape, 72, 1e-3, dtype, tmp=stack)
        assert got[3]["inputTailSize"] > 0 or got[3]["loopRound"] > 1 or stack >= mx
        for r, o in zip(ref[:3], got[:3]):
            np.testing.assert_array_equal(bits(o), bits(r))
    # the overload without sharedTmpBuffer: the framework's space, the same tiling
    got = run_layer_norm(x, g, b, shape, 72, 1e-3, dtype, tmp="max", tmp_bytes=0)
    for r, o in zip(ref[:3], got[:3]):
        np.testing.assert_array_equal(bits(o), bits(r))


def test_layer_norm_reuse_source_gives_the_same_bits(rng):
    shape = (3, 5, 40)
    x = make_rows(rng, shape, 40, F32)
    g = make_vec(rng, 40, 40, F32, shift=1.0)
    b = make_vec(rng, 40, 40, F32)
    for tmp in ("max", "min"):
        plain = run_layer_norm(x, g, b, shape, 40, 1e-5, F32, tmp=tmp)
        reuse = run_layer_norm(x, g, b, shape, 40, 1e-5, F32, tmp=tmp, reuse=True)
        assert reuse[3]["numberOfTmpBuf"] == 2 and plain[3]["numberOfTmpBuf"] == 3
        for r, o in zip(plain[:3], reuse[:3]):
            np.testing.assert_array_equal(bits(o), bits(r))


def test_layer_norm_leaves_the_tail_lengths_in_its_tiling(rng):
    shape = (1, 7, 16)
    x = make_rows(rng, shape, 16, F32)
    g = np.ones(16, F32)
    b = np.zeros(16, F32)
    mn = layer_norm_tmp(*shape, 4, False)[1]
    stack = mn + 3 * 16 * 4 * 2  # chunks of 3 rows: two, and a tail of one
    _, _, _, t, after = run_layer_norm(x, g, b, shape, 16, 1e-5, F32, tmp=stack)
    assert t["inputTailSize"] == 16 and t["bshCurLength"] == 48
    after = dict(zip(LN_FIELDS, after))
    assert after["bshCurLength"] == t["inputTailSize"] and after["bsCurLength"] == t["meanVarTailSize"]
    with pytest.raises(KernelFault, match=r"LayerNorm: tiling.bshCurLength / bsCurLength = 16 / 1 .*fresh copy"):
        run_layer_norm(x, g, b, shape, 16, 1e-5, F32, tmp=stack, calls=2)


# ----------------------------------------------------------- LayerNormGrad


def layer_norm_grad_ref(dy, x, var, mean, g, h0, eps, dtype):
    """CANN's LayerNormGrad formula in float64 over every stored column (1/H
    and 2/H from the original H), with bounds from an abs-valued evaluation."""
    dy, x, var, mean, g = (a.astype(np.float64) for a in (dy, x, var, mean, g))
    e = float(np.dtype(dtype).type(eps))
    x1 = dy * g
    x2 = x - mean[:, None]
    r = 1 / np.sqrt(var + e)
    pd_var = (-0.5 * x1 * x2 * r[:, None] ** 3).sum(1)
    pd_mean = (-x1 * r[:, None]).sum(1) + pd_var * (1 / h0) * (-2 * x2).sum(1)
    pd_x = pd_var[:, None] * (2 / h0) * x2 + pd_mean[:, None] / h0 + x1 * r[:, None]
    res = x2 * r[:, None]
    a_var = (0.5 * np.abs(x1 * x2) * r[:, None] ** 3).sum(1)
    a_mean = (np.abs(x1) * r[:, None]).sum(1) + a_var / h0 * (2 * np.abs(x2)).sum(1)
    a_x = a_var[:, None] * (2 / h0) * np.abs(x2) + a_mean[:, None] / h0 + np.abs(x1) * r[:, None]
    k = n_sum(x.shape[1]) + 12
    u = U[np.dtype(dtype)]
    b_x = k * U32 * a_x + u * np.abs(pd_x) + HALF_MIN_SUB
    b_res = 8 * U32 * np.abs(res) + u * np.abs(res) + HALF_MIN_SUB
    return (pd_x, b_x), (res, b_res)


def grad_inputs(rng, shape, h0, dtype):
    b, s, h = shape
    x = make_rows(rng, shape, h0, dtype, scale=1.5, shift=0.3)
    dy = make_rows(rng, shape, h0, dtype)
    x64 = x.astype(np.float64)[:, :h0]
    mean = x64.mean(1).astype(dtype)
    var = x64.var(1).astype(dtype)
    g = make_vec(rng, h, h0, dtype, shift=1.0)
    return dy, x, var, mean, g


# CANN's LayerNormGrad tiling rounds each chunk up to 8 (float) or 16 (half)
# rows, whatever the problem's rows: at large H that outgrows a device's UB,
# so these runs use a larger one (the emulation's UB size is a parameter).
LNG_UB = 1 << 21


def run_layer_norm_grad(ins, shape, h0, eps, dtype, stack, reuse=False, tmp_bytes=None, ub_bytes=LNG_UB, **kw):
    b, s, h = shape
    t = layer_norm_grad_tiling(b, s, h, h0, stack, np.dtype(dtype).itemsize, reuse)
    (pdx, res), after, _ = run(
        "layer_norm_grad",
        dtype,
        shape,
        list(ins),
        words(LNG_FIELDS, t),
        stack if tmp_bytes is None else tmp_bytes,
        eps,
        flag=reuse,
        ub_bytes=ub_bytes,
        **kw,
    )
    return pdx.reshape(ins[0].shape), res.reshape(ins[0].shape), t


LNG_SHAPES = [((2, 3, 16), 16), ((1, 20, 64), 64), ((2, 5, 200), 200), ((1, 3, 1024), 1000), ((3, 7, 48), 40)]


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
@pytest.mark.parametrize("shape,h0", LNG_SHAPES, ids=shape_id)
def test_layer_norm_grad_matches_float64(rng, dtype, shape, h0):
    shape = (shape[0], shape[1], padded_h(shape[2], dtype))
    ins = grad_inputs(rng, shape, h0, dtype)
    stack = layer_norm_grad_fitting_tmp(shape[0] * shape[1], shape[2], dtype.itemsize, False)
    pdx, res, t = run_layer_norm_grad(ins, shape, h0, 1e-5, dtype, stack)
    assert pdx.dtype == dtype and t["loopNum"] + (t["tailSize"] > 0) == 1
    (rx, bx), (rr, br) = layer_norm_grad_ref(*ins, h0, 1e-5, dtype)
    assert_within(pdx, rx, bx, "pd_x")
    assert_within(res, rr, br, "res_for_gamma")


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_layer_norm_grad_chunks_and_temporary_space_do_not_change_bits(rng, dtype):
    # CANN's documented minimum is min(B*S, H) rows of temporaries, so
    # chunking needs more rows than H: 84 rows of H = 16 go in chunks of 16.
    shape, h0 = (3, 28, 16), 16
    ins = grad_inputs(rng, shape, h0, dtype)
    ts = dtype.itemsize
    whole = run_layer_norm_grad(ins, shape, h0, 1e-5, dtype, layer_norm_grad_fitting_tmp(84, 16, ts, False))
    chunk_tmp = layer_norm_grad_fitting_tmp(16, 16, ts, False)
    assert chunk_tmp >= layer_norm_grad_tmp(*shape, ts, False)[1]
    chunked = run_layer_norm_grad(ins, shape, h0, 1e-5, dtype, chunk_tmp)
    assert chunked[2]["loopNum"] == 5 and chunked[2]["nohTailSize"] == 4
    framework = run_layer_norm_grad(ins, shape, h0, 1e-5, dtype, chunk_tmp, tmp_bytes=0)
    (rx, bx), (rr, br) = layer_norm_grad_ref(*ins, h0, 1e-5, dtype)
    assert_within(chunked[0], rx, bx, "pd_x")
    assert_within(chunked[1], rr, br, "res_for_gamma")
    for other in (chunked, framework):
        np.testing.assert_array_equal(bits(other[0]), bits(whole[0]))
        np.testing.assert_array_equal(bits(other[1]), bits(whole[1]))
    if dtype == F32:
        reuse = run_layer_norm_grad(
            ins, shape, h0, 1e-5, dtype, layer_norm_grad_fitting_tmp(16, 16, 4, True), reuse=True
        )
        assert reuse[2]["x1TensorPos"] == 0 and reuse[2]["x3TensorPos"] == 3 * reuse[2]["oneCalSize"]
        np.testing.assert_array_equal(bits(reuse[0]), bits(whole[0]))
        np.testing.assert_array_equal(bits(reuse[1]), bits(whole[1]))


@pytest.mark.parametrize("dtype,which", [(F32, "min"), (F16, "min"), (F16, "max")])
def test_layer_norm_grad_cann_tmp_sizes_can_overflow_their_buffer(rng, dtype, which):
    # CANN's tiling rounds the rows per chunk up to 8 (float) or 16 (half)
    # after fitting them into stackBufferSize, so with few rows its
    # temporaries outgrow the very sizes GetLayerNormGradMaxMinTmpSize gives.
    shape = (1, 3, padded_h(16, dtype))
    ins = grad_inputs(rng, shape, 16, dtype)
    mx, mn = layer_norm_grad_tmp(*shape, dtype.itemsize, False)
    stack = {"min": mn, "max": mx}[which]
    with pytest.raises(
        KernelFault,
        match=r"LayerNormGrad: the tiling puts \w+ at fp32 slots \d+\.\.\d+, past the end "
        r"of sharedTmpBuffer \(\d+ fp32 slots\)",
    ):
        run_layer_norm_grad(ins, shape, 16, 1e-5, dtype, stack)


def test_layer_norm_grad_padded_h_writes_the_padding_and_shifts_pd_x(rng):
    # Over a zero pad x - mean is -mean: res_for_gamma there is -mean * rstd,
    # and sum(-2 * (x - mean)) gains 2 * mean per padded column, which moves
    # pd_mean and so every pd_x by pd_var * 2 * mean * (H - H0) / H0^2.
    shape, h0 = (1, 6, 48), 33
    dy, x, var, mean, g = grad_inputs(rng, shape, h0, F32)
    x = x + np.where(np.arange(48) < h0, np.float32(2.0), np.float32(0.0))  # a large mean makes the shift visible
    x64 = x.astype(np.float64)[:, :h0]
    mean, var = x64.mean(1).astype(F32), x64.var(1).astype(F32)
    pdx, res, _ = run_layer_norm_grad(
        (dy, x, var, mean, g), shape, h0, 1e-5, F32, layer_norm_grad_fitting_tmp(6, 48, 4, False)
    )
    m, v = mean.astype(np.float64), var.astype(np.float64)
    r = 1 / np.sqrt(v + float(np.float32(1e-5)))
    np.testing.assert_allclose(res[:, h0:], np.broadcast_to((-m * r)[:, None], (6, 48 - h0)), rtol=1e-5)
    # the true gradient over the first H0 columns, and CANN's shift
    x1 = dy.astype(np.float64)[:, :h0] * g.astype(np.float64)[:h0]
    x2 = x64 - m[:, None]
    pd_var = (-0.5 * x1 * x2 * r[:, None] ** 3).sum(1)
    pd_mean = (-x1 * r[:, None]).sum(1) + pd_var / h0 * (-2 * x2).sum(1)
    true = pd_var[:, None] * 2 / h0 * x2 + pd_mean[:, None] / h0 + x1 * r[:, None]
    shift = pd_var * 2 * m * (48 - h0) / h0**2
    (_, bound), _ = layer_norm_grad_ref(dy, x, var, mean, g, h0, 1e-5, F32)
    bound = bound[:, :h0] + 1e-6 * np.abs(true)
    assert (np.abs(pdx[:, :h0] - true) > 10 * bound).any()  # not the true gradient
    assert_within(pdx[:, :h0], true + shift[:, None], bound, "pd_x")


def test_layer_norm_grad_feeds_res_for_gamma_the_layer_norm_forward_defines(rng):
    # res_for_gamma = (x - mean) * rstd: LayerNorm's normalized x, from the
    # mean and variance LayerNorm itself returns.
    shape = (2, 4, 64)
    x = make_rows(rng, shape, 64, F32, shift=1.0)
    g = make_vec(rng, 64, 64, F32, shift=1.0)
    b = make_vec(rng, 64, 64, F32)
    y, mean, var, _, _ = run_layer_norm(x, g, b, shape, 64, 1e-5, F32)
    dy = make_rows(rng, shape, 64, F32)
    _, res, _ = run_layer_norm_grad(
        (dy, x, var, mean, g), shape, 64, 1e-5, F32, layer_norm_grad_fitting_tmp(8, 64, 4, False)
    )
    np.testing.assert_allclose(res * g + b, y, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ RmsNorm


def rms_norm_ref(x, g, h0, eps, dtype):
    x64 = x.astype(np.float64)
    e = float(np.dtype(dtype).type(eps))
    ms = (x64[:, :h0] ** 2).sum(1) / h0
    rstd = 1 / np.sqrt(ms + e)
    y = x64 * rstd[:, None] * g.astype(np.float64)
    rel = 0.5 * (n_sum(x.shape[1]) + 4) * U32 + (np.abs(np.log(ms + e)) + 4) * U32
    return y, rel[:, None] * np.abs(y) + 3 * U32 * np.abs(y) + U[np.dtype(dtype)] * np.abs(y) + HALF_MIN_SUB


def run_rms_norm(x, g, shape, h0, eps, dtype, tmp="max", basic=False, tmp_bytes=None, **kw):
    b, s, h = shape
    ts = np.dtype(dtype).itemsize
    mx, mn = rms_norm_tmp(b, s, h, ts)
    stack = {"max": mx, "min": mn}.get(tmp, tmp)
    t = rms_norm_tiling(b, s, h, h0, stack, ts, basic)
    (y,), after, _ = run(
        "rms_norm",
        dtype,
        shape,
        [x, g],
        words(RMS_FIELDS, t),
        stack if tmp_bytes is None else tmp_bytes,
        eps,
        flag=basic,
        **kw,
    )
    return y.reshape(x.shape), t


RMS_SHAPES = [
    ((2, 3, 16), 16),
    ((1, 8, 64), 64),
    ((2, 4, 96), 96),
    ((1, 5, 200), 197),
    ((1, 2, 2048), 2048),
    ((4, 100, 8), 8),
    ((3, 7, 48), 40),
]


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
@pytest.mark.parametrize("shape,h0", RMS_SHAPES, ids=shape_id)
@pytest.mark.parametrize("tmp", ["max", "min"])
def test_rms_norm_matches_float64(rng, dtype, shape, h0, tmp):
    shape = (shape[0], shape[1], padded_h(shape[2], dtype))
    x = make_rows(rng, shape, h0, dtype, scale=3.0)
    g = make_vec(rng, shape[2], h0, dtype, shift=1.0)
    y, t = run_rms_norm(x, g, shape, h0, 1e-6, dtype, tmp=tmp)
    assert y.dtype == dtype
    ry, by = rms_norm_ref(x, g, h0, 1e-6, dtype)
    assert_within(y, ry, by, "y")
    if tmp == "min" and shape[0] * shape[1] > 1:
        assert t["mainBsLength"] < shape[0] * shape[1]


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
@pytest.mark.parametrize("shape", [(2, 8, 64), (1, 16, 192), (1, 64, 128)], ids=lambda s: "x".join(map(str, s)))
def test_rms_norm_basic_block(rng, dtype, shape):
    x = make_rows(rng, shape, shape[2], dtype)
    g = make_vec(rng, shape[2], shape[2], dtype, shift=1.0)
    y, t = run_rms_norm(x, g, shape, shape[2], 1e-6, dtype, basic=True)
    assert t["mainBsLength"] % 8 == 0
    ry, by = rms_norm_ref(x, g, shape[2], 1e-6, dtype)
    assert_within(y, ry, by, "y (basic block)")
    generic, _ = run_rms_norm(x, g, shape, shape[2], 1e-6, dtype)
    # the same value up to the order of the row sums
    np.testing.assert_allclose(y.astype(np.float64), generic.astype(np.float64), rtol=4 * U[dtype], atol=1e-30)


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_rms_norm_chunks_and_temporary_space_do_not_change_bits(rng, dtype):
    shape = (3, 30, padded_h(50, dtype))
    x = make_rows(rng, shape, 50, dtype)
    g = make_vec(rng, shape[2], 50, dtype, shift=1.0)
    whole, tw = run_rms_norm(x, g, shape, 50, 1e-6, dtype, tmp="max")
    assert tw["loopRound"] == 1 and tw["tailBsLength"] == 0
    mn = rms_norm_tmp(*shape, dtype.itemsize)[1]
    for stack in (mn, mn + 4 * 4 * shape[2] * (2 if dtype == F16 else 1)):
        chunked, tc = run_rms_norm(x, g, shape, 50, 1e-6, dtype, tmp=stack)
        assert tc["loopRound"] > 1
        np.testing.assert_array_equal(bits(chunked), bits(whole))
    framework, _ = run_rms_norm(x, g, shape, 50, 1e-6, dtype, tmp="max", tmp_bytes=0)
    np.testing.assert_array_equal(bits(framework), bits(whole))


@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_epsilon_reaches_each_api_as_t(rng, dtype):
    # Rows of variance ~1e-4 with epsilon 1e-3: epsilon dominates 1/sqrt.
    eps = 1e-3
    shape = (2, 4, 32)
    x = make_rows(rng, shape, 32, dtype, scale=0.01)
    g = make_vec(rng, 32, 32, dtype, shift=1.0)
    b = make_vec(rng, 32, 32, dtype)
    y, _, _, _, _ = run_layer_norm(x, g, b, shape, 32, eps, dtype)
    (ry, by), _, _ = layer_norm_ref(x, g, b, 32, eps, dtype)
    assert_within(y, ry, by, "LayerNorm y")
    assert (np.abs(y - layer_norm_ref(x, g, b, 32, 0.0, dtype)[0][0]) > by).any()
    ins = grad_inputs(rng, shape, 32, dtype)
    ins = (ins[0], x, x.astype(np.float64).var(1).astype(dtype), x.astype(np.float64).mean(1).astype(dtype), g)
    pdx, _, _ = run_layer_norm_grad(
        ins, shape, 32, eps, dtype, layer_norm_grad_fitting_tmp(8, 32, dtype.itemsize, False)
    )
    (rx, bx), _ = layer_norm_grad_ref(*ins, 32, eps, dtype)
    assert_within(pdx, rx, bx, "LayerNormGrad pd_x")
    assert (np.abs(pdx - layer_norm_grad_ref(*ins, 32, 0.0, dtype)[0][0]) > bx).any()
    y, _ = run_rms_norm(x, g, shape, 32, eps, dtype)
    ry, by = rms_norm_ref(x, g, 32, eps, dtype)
    assert_within(y, ry, by, "RmsNorm y")
    assert (np.abs(y - rms_norm_ref(x, g, 32, 0.0, dtype)[0]) > by).any()


# ------------------------------------------------------------------- faults

# One correct call per API (float, [1, 4, 16]); the fault tests break one thing.


def ln_call(rng, dtype=F32, h=16, h0=16, patch=None, tmp=None, **kw):
    shape = (1, 4, h)
    x = make_rows(rng, shape, h0, dtype)
    g = np.ones(h, dtype)
    b = np.zeros(h, dtype)
    mx, _ = layer_norm_tmp(1, 4, h, dtype.itemsize, False)
    t = layer_norm_tiling(1, 4, h, h0, mx, dtype.itemsize, False)
    t.update(patch or {})
    return run("layer_norm", dtype, shape, [x, g, b], words(LN_FIELDS, t), mx if tmp is None else tmp, 1e-5, **kw)


def lng_call(rng, dtype=F32, h=16, h0=16, patch=None, tmp=None, **kw):
    shape = (1, 4, h)
    ins = grad_inputs(rng, shape, h0, dtype)
    stack = layer_norm_grad_fitting_tmp(4, h, dtype.itemsize, False)
    t = layer_norm_grad_tiling(1, 4, h, h0, stack, dtype.itemsize, False)
    t.update(patch or {})
    return run(
        "layer_norm_grad", dtype, shape, list(ins), words(LNG_FIELDS, t), stack if tmp is None else tmp, 1e-5, **kw
    )


def rms_call(rng, dtype=F32, h=16, h0=16, patch=None, tmp=None, **kw):
    shape = (1, 4, h)
    x = make_rows(rng, shape, h0, dtype)
    g = np.ones(h, dtype)
    mx, _ = rms_norm_tmp(1, 4, h, dtype.itemsize)
    t = rms_norm_tiling(1, 4, h, h0, mx, dtype.itemsize, False)
    t.update(patch or {})
    return run("rms_norm", dtype, shape, [x, g], words(RMS_FIELDS, t), mx if tmp is None else tmp, 1e-5, **kw)


CALLS = {"LayerNorm": ln_call, "LayerNormGrad": lng_call, "RmsNorm": rms_call}
X_NAME = {"LayerNorm": "inputX", "LayerNormGrad": "inputX", "RmsNorm": "srcLocal"}
GAMMA_NAME = {"LayerNorm": "gamma", "LayerNormGrad": "inputGamma", "RmsNorm": "gammaLocal"}


@pytest.mark.parametrize("api", CALLS)
def test_correct_calls_run_clean(rng, api):
    outs, _, stats = CALLS[api](rng)
    assert stats["api_calls"] == 1
    assert all(np.isfinite(o.astype(np.float64)).all() for o in outs)


@pytest.mark.parametrize("api", CALLS)
def test_misaligned_operand_faults(rng, api):
    with pytest.raises(
        KernelFault,
        match=rf"{api}: {X_NAME[api]} starts at unified-buffer address \d+, which is "
        r"not 32-byte aligned",
    ):
        CALLS[api](rng, mode="misaligned")


@pytest.mark.parametrize("api", CALLS)
def test_operand_outside_the_unified_buffer_faults(rng, api):
    with pytest.raises(
        KernelFault,
        match=rf"{api}: {GAMMA_NAME[api]} is in TPosition::A1; the API takes "
        r"unified-buffer tensors only \(TPosition VECIN/VECOUT/VECCALC\)",
    ):
        CALLS[api](rng, mode="wrong_position")


@pytest.mark.parametrize(
    "api,pair",
    [
        ("LayerNorm", "outputMean .* and outputVariance"),
        ("LayerNormGrad", "outputPdX .* and resForGamma"),
        ("RmsNorm", "dstLocal .* and gammaLocal"),
    ],
)
def test_operands_sharing_memory_fault(rng, api, pair):
    with pytest.raises(KernelFault, match=rf"{api}: {pair} .* overlap; the API does not allow them to share memory"):
        CALLS[api](rng, mode="overlap")


@pytest.mark.parametrize("api", CALLS)
@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_unpadded_h_faults(rng, api, dtype):
    # H = 12 is 48 bytes of float, 24 of half: not whole 32-byte blocks
    h = 12
    with pytest.raises(
        KernelFault,
        match=rf"{api}: tiling.hLength = 12 (float|half) elements is \d+ bytes, not a "
        r"multiple of 32: the last axis must be padded",
    ):
        CALLS[api](rng, dtype=dtype, h=h, h0=h)


@pytest.mark.parametrize(
    "api,minimum", [("LayerNorm", 3 * 64 + 2 * 32), ("LayerNormGrad", 64 * 6 * 4), ("RmsNorm", (16 + 8) * 4)]
)
def test_temporary_space_below_the_documented_minimum_faults(rng, api, minimum):
    with pytest.raises(
        KernelFault,
        match=rf"{api}: sharedTmpBuffer has {minimum - 32} bytes, less than the "
        rf"{minimum} bytes Get{api}MaxMinTmpSize gives as the minimum",
    ):
        CALLS[api](rng, tmp=minimum - 32)


def test_temporary_space_below_the_tiling_faults(rng):
    mx, mn = layer_norm_tmp(1, 4, 16, 4, False)
    with pytest.raises(
        KernelFault,
        match=rf"LayerNorm: sharedTmpBuffer holds {mn // 4} fp32 slots, the tiling's "
        rf"tmpBufSize is {mx // 4}",
    ):
        ln_call(rng, tmp=mn)
    with pytest.raises(
        KernelFault,
        match=r"LayerNormGrad: sharedTmpBuffer has \d+ bytes, the tiling's "
        r"stackBufferSize is \d+",
    ):
        lng_call(rng, patch={"stackBufferSize": layer_norm_grad_fitting_tmp(4, 16, 4, False) + 32})
    with pytest.raises(
        KernelFault,
        match=r"RmsNorm: the tiling puts the row sums and the fp32 work buffer at fp32 "
        r"slots 0\.\.\d+, past the end of sharedTmpBuffer",
    ):
        rms_call(rng, tmp=rms_norm_tmp(1, 4, 16, 4)[1])


@pytest.mark.parametrize(
    "api,patch,rule",
    [
        ("LayerNorm", {"inputXSize": 63}, "inputXSize = 63 is not bLength \\* sLength \\* hLength = 64"),
        ("LayerNorm", {"originalHLength": 17}, "originalHLength = 17 must be in \\[1, hLength = 16\\]"),
        (
            "LayerNormGrad",
            {"nohCalSize": 4, "oneCalSize": 64, "loopNum": 1, "tailSize": 0, "nohTailSize": 0},
            "nohCalSize = 4 rows is not a multiple of 8",
        ),
        ("LayerNormGrad", {"loopNum": 2}, "loopNum \\* oneCalSize \\+ tailSize is not"),
        ("RmsNorm", {"mainBsLengthAlign": 4}, "mainBsLengthAlign = 4 is not mainBsLength rounded up to 8"),
        ("RmsNorm", {"originalHLength": 1, "reciprocalOfHLength": 1.0}, "originalHLength = 1: CANN's row reduction"),
    ],
)
def test_inconsistent_tilings_fault(rng, api, patch, rule):
    with pytest.raises(KernelFault, match=rf"{api}: .*{rule}"):
        CALLS[api](rng, patch=patch)


def test_rms_norm_basic_block_needs_its_shapes(rng):
    shape = (1, 4, 96)
    x = make_rows(rng, shape, 96, F32)
    g = np.ones(96, F32)
    t = rms_norm_tiling(1, 4, 96, 96, rms_norm_tmp(1, 4, 96, 4)[0], 4, True)
    with pytest.raises(KernelFault, match="RmsNorm: isBasicBlock needs hLength a multiple of 64 below 2048"):
        run("rms_norm", F32, shape, [x, g], words(RMS_FIELDS, t), rms_norm_tmp(1, 4, 96, 4)[0], 1e-5, flag=True)


@pytest.mark.parametrize("api", CALLS)
def test_dav_3510_is_not_emulated(rng, api):
    with pytest.raises(KernelFault, match=rf"{api}: the dav-3510 implementation \(and its tiling\) is not emulated"):
        CALLS[api](rng, npu_arch=3510)


@pytest.mark.parametrize("ub,arch,room", [(1088, 2201, 256), (1056, 2201, 224), (1056, 2002, 352)])
def test_framework_temporary_space_is_the_unified_buffer_left_over(rng, ub, arch, room):
    # The probe's queues take 704 bytes; dav-2201 keeps the UB's last 128.
    # The tiling is for CANN's minimum, 256 bytes.
    shape = (1, 4, 16)
    x = make_rows(rng, shape, 16, F32)
    g = make_vec(rng, 16, 16, F32, shift=1.0)
    b = make_vec(rng, 16, 16, F32)
    mn = layer_norm_tmp(*shape, 4, False)[1]
    assert mn == 256
    explicit = run_layer_norm(x, g, b, shape, 16, 1e-5, F32, tmp="min")
    if room >= mn:
        got = run_layer_norm(x, g, b, shape, 16, 1e-5, F32, tmp="min", tmp_bytes=0, ub_bytes=ub, npu_arch=arch)
        for r, o in zip(explicit[:3], got[:3]):
            np.testing.assert_array_equal(bits(o), bits(r))
    else:
        with pytest.raises(KernelFault, match=rf"LayerNorm: sharedTmpBuffer has {room} bytes, less than the 256"):
            run_layer_norm(x, g, b, shape, 16, 1e-5, F32, tmp="min", tmp_bytes=0, ub_bytes=ub, npu_arch=arch)


def test_vector_instructions_cannot_reach_other_memories():
    # selftest_kernels.asc case 12: Adds reading a TBuf<TPosition::A1> tensor
    with pytest.raises(KernelFault, match=r"Adds: LocalTensor in TPosition::A1 is not in the unified buffer"):
        _ascend_emu.run_selftest(12, 1, 196608)


def test_probe_rejects_bad_arguments():
    with pytest.raises(ValueError, match="api must be 'layer_norm', 'layer_norm_grad' or 'rms_norm'"):
        _ascend_emu.run_norm_api("group_norm", 4, False, 1, 1, 8, [], [], 0, 0.0)
    with pytest.raises(ValueError, match="layer_norm takes 3 inputs; got 1"):
        _ascend_emu.run_norm_api("layer_norm", 4, False, 1, 1, 8, [b"\0" * 32], [0] * 26, 0, 0.0)
    with pytest.raises(ValueError, match="isReuseSource is not supported for half"):
        _ascend_emu.run_norm_api("layer_norm", 2, True, 1, 1, 16, [b"\0" * 32] * 3, [0] * 26, 0, 0.0)
    with pytest.raises(ValueError, match="mode must be"):
        _ascend_emu.run_norm_api("rms_norm", 4, False, 1, 1, 8, [b"\0" * 32] * 2, [0] * 12, 0, 0.0, mode="odd")
