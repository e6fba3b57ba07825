"""The AscendC kernel source run on the CPU emulation (jax_lngb.ascend_emu):
against float64 NumPy, against an exact NumPy model of its float32
association, over dtypes, tails, padded H, 1 to 8 cores, buffer sizes and
isReuseSource, each on both of CANN's LayerNormGradBeta implementations (the
common one of dav-2002/dav-2201 and the one of dav-3510, which the plan must
never hand a call it mishandles); and the emulation's hardware rules
(faults)."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest
from conftest import assert_sums_close, random_array

from jax_lngb import layer_norm_grad_beta_ref, tiling
from jax_lngb.ascend import emulator as ascend_emu

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)

# One architecture per LayerNormGradBeta implementation: common, 3510.
IMPLS = ["dav-2201", "dav-3510"]


@pytest.fixture(params=IMPLS)
def arch(request) -> str:
    """The architecture planned for and emulated (its LayerNormGradBeta)."""
    return request.param


# ------------------------------------------------------------------ models


def tile_sums(p: np.ndarray, d: np.ndarray, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
    """One LayerNormGradBeta call: rows added in row order in float32, the
    first row as `row + 0` (CANN's Adds), whatever its internal chunking."""
    g = p[r0] + np.float32(0)
    b = d[r0] + np.float32(0)
    for r in range(r0 + 1, r1):
        g = p[r] + g
        b = d[r] + b
    return g, b


def kernel_model(res, dy, plan: tiling.GradBetaKernelPlan, out_dtype) -> tuple[np.ndarray, np.ndarray]:
    """The exact float32 association of the kernels: tiles summed per group
    (starting from 0), groups summed in order (starting from 0), one cast."""
    h = res.shape[-1]
    r32 = res.reshape(-1, h).astype(np.float32)
    d32 = dy.reshape(-1, h).astype(np.float32)
    hp = plan.h_length
    r32 = np.pad(r32, ((0, 0), (0, hp - h)))
    d32 = np.pad(d32, ((0, 0), (0, hp - h)))
    prod = r32 * d32  # float32 products
    tot_g = np.zeros(hp, np.float32)
    tot_b = np.zeros(hp, np.float32)
    for grp in range(plan.num_groups):
        acc_g = np.zeros(hp, np.float32)
        acc_b = np.zeros(hp, np.float32)
        for t in range(grp * plan.tiles_per_group, min((grp + 1) * plan.tiles_per_group, plan.num_tiles)):
            r0 = t * plan.tile_rows
            r1 = min(r0 + plan.tile_rows, plan.rows)
            g, b = tile_sums(prod, d32, r0, r1)
            acc_g = acc_g + g
            acc_b = acc_b + b
        tot_g = tot_g + acc_g
        tot_b = tot_b + acc_b
    return tot_g[:h].astype(out_dtype), tot_b[:h].astype(out_dtype)


def check_against_float64(res, dy, got_g, got_b, out_dtype, what):
    ref_g, ref_b = layer_norm_grad_beta_ref(res, dy)
    h = res.shape[-1]
    r64 = res.reshape(-1, h).astype(np.float64)
    d64 = dy.reshape(-1, h).astype(np.float64)
    n = r64.shape[0]
    assert_sums_close(got_g, ref_g, np.abs(r64 * d64).sum(0), n, out_dtype, what + " pd_gamma")
    assert_sums_close(got_b, ref_b, np.abs(d64).sum(0), n, out_dtype, what + " pd_beta")


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)


# ------------------------------------------------------------ correctness


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("cores", [1, 3, 8])
def test_worked_example_of_the_documentation(dtype, cores, arch):
    x = np.arange(64, dtype=np.float32).reshape(1, 8, 8).astype(dtype)
    g, b = ascend_emu.layer_norm_grad_beta(x, x, num_cores=cores, npu_arch=arch)
    assert g.dtype == dtype and b.dtype == dtype
    expect_g = np.array([8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488], np.float64)
    expect_b = np.array([224, 232, 240, 248, 256, 264, 272, 280], np.float64)
    # every value is exact in float32; in half the gamma sums round to 8
    np.testing.assert_array_equal(g, expect_g.astype(dtype))
    np.testing.assert_array_equal(b, expect_b.astype(dtype))


SHAPES = [
    (1, 1, 8),  # one row
    (1, 1, 1),  # H = 1: padded to a full block
    (2, 3, 13),  # padded H, few rows
    (4, 37, 64),  # rows not a multiple of the tile
    (3, 100, 96),
    (1, 700, 40),  # padded H for half (40 -> 48), many tiles
    (2, 9, 200),
    (1, 3000, 16),  # many groups
]


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("cores", [1, 2, 5, 8])
def test_matches_float64_and_the_exact_model(rng, dtype, shape, cores, arch):
    res = random_array(rng, shape, dtype)
    dy = random_array(rng, shape, dtype)
    run = ascend_emu.run(res, dy, num_cores=cores, ub_bytes=16384, npu_arch=arch)
    assert run.plan.npu_arch == arch
    assert run.pd_gamma.shape == (shape[-1],) and run.pd_gamma.dtype == dtype
    check_against_float64(res, dy, run.pd_gamma, run.pd_beta, dtype, f"{dtype.name} {shape} cores={cores}")
    mg, mb = kernel_model(res, dy, run.plan, dtype)
    np.testing.assert_array_equal(bits(run.pd_gamma), bits(mg))
    np.testing.assert_array_equal(bits(run.pd_beta), bits(mb))


@pytest.mark.parametrize("dtype", [F32, F16])
def test_bits_do_not_depend_on_cores_or_their_order(rng, dtype, arch):
    res = random_array(rng, (5, 333, 48), dtype)
    dy = random_array(rng, (5, 333, 48), dtype)
    runs = [
        ascend_emu.run(res, dy, num_cores=n, ub_bytes=8192, reverse_core_order=rev, npu_arch=arch)
        for n in range(1, 9)
        for rev in (False, True)
    ]
    assert runs[0].plan.num_groups > 8  # every core count really splits the work
    for r in runs[1:]:
        np.testing.assert_array_equal(bits(r.pd_gamma), bits(runs[0].pd_gamma))
        np.testing.assert_array_equal(bits(r.pd_beta), bits(runs[0].pd_beta))
    assert {r.partials_stats["block_dim"] for r in runs} == set(range(1, 9))


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("tmp", ["min", "max", "auto", 4096])
@pytest.mark.parametrize("ub", [8192, 65536, 196608])
def test_buffer_sizes(rng, dtype, tmp, ub, arch):
    shape = (3, 211, 64)
    res = random_array(rng, shape, dtype)
    dy = random_array(rng, shape, dtype)
    run = ascend_emu.run(res, dy, num_cores=4, ub_bytes=ub, tmp_buffer=tmp, npu_arch=arch)
    p = run.plan
    if tmp == "min":
        assert p.stack_buffer_bytes == 2 * 64 * 4  # CANN's float minimum for H = 64
        if p.tile_rows > 2:
            assert p.api_tile.loop_round > 1  # the API walks its tile in several passes
    if tmp == "max":
        assert p.stack_buffer_bytes == 2 * p.tile_rows * 64 * 4
    check_against_float64(res, dy, run.pd_gamma, run.pd_beta, dtype, f"tmp={tmp} ub={ub}")
    mg, mb = kernel_model(res, dy, p, dtype)
    np.testing.assert_array_equal(bits(run.pd_gamma), bits(mg))
    np.testing.assert_array_equal(bits(run.pd_beta), bits(mb))
    assert run.partials_stats["api_calls"] == p.num_tiles


def test_is_reuse_source_for_float_and_rejected_for_half(rng, arch):
    shape = (2, 150, 32)
    res = random_array(rng, shape, F32)
    dy = random_array(rng, shape, F32)
    a = ascend_emu.run(res, dy, ub_bytes=16384, tmp_buffer="min", is_reuse_source=False, npu_arch=arch)
    b = ascend_emu.run(res, dy, ub_bytes=16384, tmp_buffer="min", is_reuse_source=True, npu_arch=arch)
    assert b.plan.is_reuse_source and not a.plan.is_reuse_source
    assert b.plan.api_tile.loop_round > 1  # the products overwrite the tile chunk by chunk
    np.testing.assert_array_equal(bits(a.pd_gamma), bits(b.pd_gamma))
    np.testing.assert_array_equal(bits(a.pd_beta), bits(b.pd_beta))
    with pytest.raises(ValueError, match="is_reuse_source is only supported for float"):
        ascend_emu.run(res.astype(F16), dy.astype(F16), is_reuse_source=True)


def test_half_inputs_with_float32_results(rng, arch):
    shape = (4, 250, 24)
    res = random_array(rng, shape, F16, scale=30.0)
    dy = random_array(rng, shape, F16, scale=30.0)
    run = ascend_emu.run(res, dy, out_dtype=np.float32, ub_bytes=16384, npu_arch=arch)
    assert run.pd_gamma.dtype == F32
    mg, mb = kernel_model(res, dy, run.plan, np.float32)
    np.testing.assert_array_equal(bits(run.pd_gamma), bits(mg))
    np.testing.assert_array_equal(bits(run.pd_beta), bits(mb))
    # narrowing once gives the half results
    h = ascend_emu.run(res, dy, ub_bytes=16384, npu_arch=arch)
    np.testing.assert_array_equal(bits(h.pd_gamma), bits(run.pd_gamma.astype(F16)))


def test_float_inputs_with_half_results(rng, arch):
    res = random_array(rng, (2, 40, 16), F32)
    dy = random_array(rng, (2, 40, 16), F32)
    run = ascend_emu.run(res, dy, out_dtype=np.float16, npu_arch=arch)
    full = ascend_emu.run(res, dy, npu_arch=arch)
    np.testing.assert_array_equal(bits(run.pd_gamma), bits(full.pd_gamma.astype(F16)))


def test_wide_rows_single_buffered(rng, arch):
    shape = (1, 40, 4608)
    res = random_array(rng, shape, F32)
    dy = random_array(rng, shape, F32)
    run = ascend_emu.run(res, dy, ub_bytes=196608, is_reuse_source=True, npu_arch=arch)
    assert run.plan.buffer_num == 1 and run.plan.num_tiles > 1
    check_against_float64(res, dy, run.pd_gamma, run.pd_beta, F32, "wide rows")


def test_nan_and_inf_propagate(rng, arch):
    res = random_array(rng, (3, 20, 16), F32)
    dy = random_array(rng, (3, 20, 16), F32)
    dy[1, 7, 3] = np.nan
    res[2, 0, 5] = np.inf
    g, b = ascend_emu.layer_norm_grad_beta(res, dy, num_cores=4, ub_bytes=8192, npu_arch=arch)
    assert np.isnan(g[3]) and np.isnan(b[3])
    assert np.isinf(g[5]) and np.isfinite(b[5])
    others = np.setdiff1d(np.arange(16), [3, 5])
    assert np.all(np.isfinite(g[others])) and np.all(np.isfinite(b[others]))


def test_counters_show_the_data_flow(rng, arch):
    shape, dtype = (2, 500, 40), F16
    res = random_array(rng, shape, dtype)
    dy = random_array(rng, shape, dtype)
    run = ascend_emu.run(res, dy, num_cores=6, ub_bytes=16384, npu_arch=arch)
    p, s1, s2 = run.plan, run.partials_stats, run.combine_stats
    hp = p.h_length
    assert hp == 48
    assert s1["ub_peak_bytes"] == p.ub_bytes_used <= 16384
    assert s2["ub_peak_bytes"] == p.combine_ub_bytes_used <= 16384
    assert s1["block_dim"] == p.block_dim == 6 and s2["block_dim"] == p.combine_block_dim
    # every input byte crosses into the unified buffer exactly once
    assert s1["gm_read_bytes"] == 2 * 1000 * hp * 2
    assert s1["gm_write_bytes"] == p.num_groups * 2 * hp * 4 == s2["gm_read_bytes"]
    assert s2["gm_write_bytes"] == 2 * hp * 2
    assert s1["api_calls"] == p.num_tiles
    assert s1["queue_buffers_cycled"] == 2  # double buffering: both buffers of a queue used


# ------------------------------------------------------------ input checks


def test_input_checks():
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(TypeError, match="float32 or float16"):
        ascend_emu.layer_norm_grad_beta(x.astype(np.float64), x.astype(np.float64))
    with pytest.raises(TypeError, match="dy must have the dtype"):
        ascend_emu.layer_norm_grad_beta(x, x.astype(np.float16))
    with pytest.raises(ValueError, match="dy must have the shape"):
        ascend_emu.layer_norm_grad_beta(x, x[:1])
    with pytest.raises(ValueError, match="at least one row"):
        ascend_emu.layer_norm_grad_beta(x[:0], x[:0])
    with pytest.raises(TypeError, match="out_dtype"):
        ascend_emu.layer_norm_grad_beta(x, x, out_dtype=np.int32)


# ------------------------------------------------ the hardware rules, faults


def _small_problem():
    rng = np.random.default_rng(7)
    res = random_array(rng, (64, 16), F32)
    dy = random_array(rng, (64, 16), F32)
    plan = tiling.plan_layer_norm_grad_beta_kernel(64, 16, in_type_size=4, ub_bytes=196608, num_cores=4)
    return res, dy, plan


def _launch(res, dy, plan, tiling_bytes=None, ub_bytes=196608):
    return ascend_emu.run_kernel(
        res,
        dy,
        plan.to_bytes() if tiling_bytes is None else tiling_bytes,
        out_dtype=np.float32,
        workspace_bytes=plan.workspace_bytes,
        block_dim=plan.block_dim,
        combine_block_dim=plan.combine_block_dim,
        ub_bytes=ub_bytes,
    )


def _patched(plan, **fields):
    words = list(struct.unpack("<56I", plan.to_bytes()))
    names = [f.name for f in dataclasses.fields(tiling.GradBetaKernelPlan)][:12]
    for k, v in fields.items():
        words[names.index(k)] = v
    return struct.pack("<56I", *words)


def test_the_real_kernel_runs_clean_with_its_plan():
    res, dy, plan = _small_problem()
    g, b, _, _ = _launch(res, dy, plan)
    np.testing.assert_allclose(g, (res.astype(np.float64) * dy).sum(0), rtol=1e-5, atol=1e-5)


def test_unified_buffer_overflow_fails_loudly():
    res, dy, _ = _small_problem()
    big = tiling.plan_layer_norm_grad_beta_kernel(64, 16, in_type_size=4, ub_bytes=196608, tmp_buffer="max")
    assert big.ub_bytes_used > 8192
    with pytest.raises(ascend_emu.KernelFault, match=r"unified buffer overflow: .* the unified buffer has 8192 bytes"):
        _launch(res, dy, big, ub_bytes=8192)


def test_out_of_bounds_read_fails_loudly():
    res, dy, plan = _small_problem()
    bad = _patched(plan, rows=plan.rows + 8, last_tile_rows=plan.last_tile_rows + 8)
    with pytest.raises(ascend_emu.KernelFault, match="out of bounds"):
        _launch(res, dy, plan, bad)


def test_misaligned_rows_fail_loudly():
    res, dy, plan = _small_problem()
    # 20-float chunks put the combine kernel's pd_beta half at byte 80
    bad = _patched(plan, combine_chunk_cols=20)
    with pytest.raises(
        ascend_emu.KernelFault,
        match=r"combine_f32 \[core 0 of \d\]: DataCopy GM->UB: unified-buffer address 80 is not 32-byte aligned",
    ):
        _launch(res, dy, plan, bad)
    # 12-float column ranges copy 48 bytes: not whole blocks
    with pytest.raises(ascend_emu.KernelFault, match="12 float elements are 48 bytes, not a multiple of 32"):
        _launch(res, dy, plan, _patched(plan, combine_cols_per_core=12, combine_chunk_cols=16))


def test_truncated_tiling_fails_loudly():
    res, dy, plan = _small_problem()
    with pytest.raises(ascend_emu.KernelFault, match="out of bounds"):
        _launch(res, dy, plan, plan.to_bytes()[:100])


SELFTESTS = {
    1: "wrote in the same launch",  # two cores write one block
    2: "wrote in the same launch",  # a core reads another core's fresh output
    3: "unified buffer overflow",
    4: "not a multiple of 32",
    5: "not 32-byte aligned",
    6: "run past the end of a GlobalTensor",
    7: "out of bounds",
    8: "DeQue on an empty queue",
    9: "used after FreeTensor",
    10: "still allocated when the kernel returned",
    11: "partially overlap",
}


@pytest.mark.parametrize("case", sorted(SELFTESTS))
def test_emulation_catches_each_rule(case):
    with pytest.raises(ascend_emu.KernelFault, match=SELFTESTS[case]):
        ascend_emu._ascend_emu.run_selftest(case, 2, 196608)


def test_emulation_selftest_control_case_passes():
    out = np.frombuffer(ascend_emu._ascend_emu.run_selftest(0, 2, 196608), np.float32)
    np.testing.assert_array_equal(out[:16], np.ones(16))  # data is zeros, +1 per element
    assert np.all(np.isnan(out[16:]))  # never written: the NaN fill shows through


# ------------------------------------- one LayerNormGradBeta call (the API)


@pytest.mark.parametrize("dtype, ts", [(F32, 4), (F16, 2)])
@pytest.mark.parametrize("which", ["min", "mid", "max"])
def test_api_call_matches_cann_semantics(rng, dtype, ts, which, arch):
    shape = (1, 21, 32)
    res = random_array(rng, shape, dtype)
    dy = random_array(rng, shape, dtype)
    mx, mn = tiling.get_layer_norm_grad_beta_max_min_tmp_size(shape, ts)
    stack = {"min": mn, "mid": (mn + mx) // 2 // 32 * 32, "max": mx}[which]
    t = tiling.get_layer_norm_grad_beta_nd_tiling_info(shape, stack, ts)
    if which == "min":  # several passes over the input; for float (2 rows a pass) a tail row
        assert t.loop_round > 1 and (t.input_tail_size > 0) == (ts == 4)
    g, b = ascend_emu.layer_norm_grad_beta_api(res, dy, t, stack_buffer_bytes=stack, npu_arch=arch)
    assert g.dtype == dtype
    # fp32 products, rows in row order, one rounding to the input dtype
    r32, d32 = res.reshape(-1, 32).astype(np.float32), dy.reshape(-1, 32).astype(np.float32)
    mg, mb = tile_sums(r32 * d32, d32, 0, r32.shape[0])
    np.testing.assert_array_equal(bits(g), bits(mg.astype(dtype)))
    np.testing.assert_array_equal(bits(b), bits(mb.astype(dtype)))


def test_api_worked_example_and_reuse(arch):
    x = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    for reuse in (False, True):
        t = tiling.get_layer_norm_grad_beta_nd_tiling_info((1, 8, 8), 64, 4, reuse)
        g, b = ascend_emu.layer_norm_grad_beta_api(x, x, t, stack_buffer_bytes=64, is_reuse_source=reuse, npu_arch=arch)
        np.testing.assert_array_equal(g, [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488])
        np.testing.assert_array_equal(b, [224, 232, 240, 248, 256, 264, 272, 280])
    with pytest.raises(ValueError, match="not supported for half"):
        ascend_emu.layer_norm_grad_beta_api(
            x.astype(F16), x.astype(F16), t, stack_buffer_bytes=64, is_reuse_source=True
        )


def test_api_rejects_a_buffer_smaller_than_its_tiling():
    x = np.ones((1, 8, 16), np.float32)
    t = tiling.get_layer_norm_grad_beta_nd_tiling_info((1, 8, 16), 512, 4)
    with pytest.raises(ascend_emu.KernelFault, match="sharedTmpBuffer holds 64 fp32 slots, the tiling needs"):
        ascend_emu.layer_norm_grad_beta_api(x, x, t, stack_buffer_bytes=256)


def test_api_with_original_h_below_storage_h_breaks_alignment():
    # CANN's API walks rows with originalHLength as the stride, so padded
    # storage with hLength != originalHLength misreads rows; with 13-float
    # rows the second row starts off the 32-byte grid. The lowering keeps
    # hLength == originalHLength (padding summed as zeros, sliced off).
    x = np.ones((1, 4, 16), np.float32)
    t = tiling.get_layer_norm_grad_beta_nd_tiling_info((1, 4, 16, 13), 4096, 4)
    with pytest.raises(ascend_emu.KernelFault, match="not 32-byte aligned"):
        ascend_emu.layer_norm_grad_beta_api(x, x, t, stack_buffer_bytes=4096)


# ---------------------------- the 3510 implementation, and what it needs


def test_api_3510_ignores_the_buffer_and_strides_rows_by_h_length(rng):
    # The same padded call that breaks the common implementation (above):
    # the 3510 one strides rows by hLength and sums every stored column,
    # and never looks at sharedTmpBuffer, so even a 32-byte one is enough.
    res = random_array(rng, (1, 4, 16), F32)
    dy = random_array(rng, (1, 4, 16), F32)
    t = tiling.get_layer_norm_grad_beta_nd_tiling_info((1, 4, 16, 13), 4096, 4)
    g, b = ascend_emu.layer_norm_grad_beta_api(res, dy, t, stack_buffer_bytes=32, npu_arch="dav-3510")
    mg, mb = tile_sums(res[0] * dy[0], dy[0], 0, 4)
    np.testing.assert_array_equal(bits(g), bits(mg))
    np.testing.assert_array_equal(bits(b), bits(mb))
    with pytest.raises(ascend_emu.KernelFault, match="sharedTmpBuffer holds 8 fp32 slots"):
        ascend_emu.layer_norm_grad_beta_api(res, dy, t, stack_buffer_bytes=32, npu_arch="dav-2201")


def test_api_3510_saturates_half_results(rng):
    # Its fp32 -> half store saturates (CastTrait SatMode::SAT); the common
    # implementation's Cast overflows to infinity.
    x = np.full((1, 4, 16), 200.0, F16)  # each product 40000: four of them pass 65504
    t = tiling.get_layer_norm_grad_beta_nd_tiling_info((1, 4, 16), 1024, 2)
    g3510, b3510 = ascend_emu.layer_norm_grad_beta_api(x, x, t, stack_buffer_bytes=1024, npu_arch="dav-3510")
    g_common, b_common = ascend_emu.layer_norm_grad_beta_api(x, x, t, stack_buffer_bytes=1024)
    np.testing.assert_array_equal(g3510, np.full(16, 65504.0, F16))
    assert np.all(np.isposinf(g_common))
    np.testing.assert_array_equal(b3510, np.full(16, 800.0, F16))
    np.testing.assert_array_equal(b_common, b3510)


def test_api_3510_row_counter_limit():
    # Rows are counted in a uint16_t: 65535 rows work, 65536 would never end.
    limit = tiling.MAX_ROWS_PER_CALL_3510
    assert limit == 65535
    for rows, ok in [(limit, True), (limit + 1, False)]:
        x = np.ones((1, rows, 8), F32)
        t = tiling.get_layer_norm_grad_beta_nd_tiling_info((1, rows, 8), 64, 4)
        call = lambda: ascend_emu.layer_norm_grad_beta_api(
            x, x, t, stack_buffer_bytes=64, ub_bytes=2 * rows * 8 * 4 + 4096, npu_arch="dav-3510"
        )
        if ok:
            g, b = call()
            np.testing.assert_array_equal(b, np.full(8, rows, F32))
        else:
            with pytest.raises(ascend_emu.KernelFault, match="counts rows in a uint16_t"):
                call()


def test_plan_keeps_3510_calls_within_its_row_counter(rng):
    # A unified buffer large enough for more than 65535 rows a call: the
    # dav-2201 plan uses it, the dav-3510 plan stops at 65535 rows, and only
    # the latter runs on the 3510 implementation.
    rows, h, ub = 70000, 8, 1 << 24
    res = random_array(rng, (rows, h), F32)
    dy = random_array(rng, (rows, h), F32)
    p2201 = tiling.plan_layer_norm_grad_beta_kernel(rows, h, in_type_size=4, ub_bytes=ub, num_cores=2)
    assert p2201.tile_rows == rows and p2201.api_tile.bs_length == rows
    run = ascend_emu.run(res, dy, num_cores=2, ub_bytes=ub, npu_arch="dav-3510")
    assert run.plan.tile_rows == tiling.MAX_ROWS_PER_CALL_3510 and run.plan.num_tiles == 2
    assert max(run.plan.api_tile.bs_length, run.plan.api_last.bs_length) <= tiling.MAX_ROWS_PER_CALL_3510
    check_against_float64(res, dy, run.pd_gamma, run.pd_beta, F32, "3510 row cap")
    mg, mb = kernel_model(res, dy, run.plan, F32)
    np.testing.assert_array_equal(bits(run.pd_gamma), bits(mg))
    with pytest.raises(ascend_emu.KernelFault, match="counts rows in a uint16_t"):
        ascend_emu.run_kernel(
            res,
            dy,
            p2201.to_bytes(),
            out_dtype=F32,
            workspace_bytes=p2201.workspace_bytes,
            block_dim=p2201.block_dim,
            combine_block_dim=p2201.combine_block_dim,
            ub_bytes=ub,
            npu_arch="dav-3510",
        )
    # ... while the common implementation takes the big call
    g, _, _, _ = ascend_emu.run_kernel(
        res,
        dy,
        p2201.to_bytes(),
        out_dtype=F32,
        workspace_bytes=p2201.workspace_bytes,
        block_dim=p2201.block_dim,
        combine_block_dim=p2201.combine_block_dim,
        ub_bytes=ub,
    )
    np.testing.assert_array_equal(bits(g), bits(kernel_model(res, dy, p2201, F32)[0]))


@pytest.mark.parametrize("npu_arch", ["dav-2002", "dav-2201", "dav-3510"])
def test_padded_h_is_the_row_stride_of_every_call(rng, npu_arch):
    # H = 13 is stored as 16 columns: both calls' tilings stride rows by 16
    # (hLength == originalHLength == storage H), whichever implementation
    # reads which field; the real H only decides the slice.
    res = random_array(rng, (3, 50, 13), F32)
    dy = random_array(rng, (3, 50, 13), F32)
    run = ascend_emu.run(res, dy, num_cores=3, ub_bytes=4096, npu_arch=npu_arch)
    for t in (run.plan.api_tile, run.plan.api_last):
        assert t.h_length == t.original_h_length == run.plan.h_length == 16
    assert run.plan.num_tiles > 1
    check_against_float64(res, dy, run.pd_gamma, run.pd_beta, F32, npu_arch)


def test_dav_2002_defaults_are_its_ai_cores_and_unified_buffer(rng):
    d = tiling.npu_arch_defaults("dav-2002")
    assert (d.ub_bytes, d.num_cores, d.block, d.grad_beta_3510) == (262144, 8, "AI cores", False)
    res = random_array(rng, (4, 2000, 64), F16)
    dy = random_array(rng, (4, 2000, 64), F16)
    run = ascend_emu.run(res, dy, num_cores=d.num_cores, npu_arch="dav-2002")  # UB: the arch's default
    # the plan filled dav-2002's 256 KiB, more than a dav-2201 core has
    assert 196608 < run.partials_stats["ub_peak_bytes"] == run.plan.ub_bytes_used <= 262144
    assert run.partials_stats["block_dim"] == 8
    check_against_float64(res, dy, run.pd_gamma, run.pd_beta, F16, "dav-2002")


def test_unknown_architecture_is_rejected():
    x = np.ones((2, 8), F32)
    with pytest.raises(ValueError, match="npu_arch must be 'dav-2002', 'dav-2201' or 'dav-3510'.*got 'dav-9999'"):
        ascend_emu.run(x, x, npu_arch="dav-9999")
