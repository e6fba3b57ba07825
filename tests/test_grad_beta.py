"""layer_norm_grad_beta: values against the float64 oracle, dtypes, edge
cases, and the lowering."""

from __future__ import annotations

import math

import jax
import jax.export
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, assert_sums_close, random_array

import jax_lngb
from jax_lngb import layer_norm_grad_beta, layer_norm_grad_beta_ref
from jax_lngb._ops.grad_beta import _grad_beta_jnp
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_BETA_TARGET as FFI_TARGET


def check_against_ref(res, dy, out, what=""):
    pd_gamma, pd_beta = out
    h = dy.shape[-1]
    rows = math.prod(dy.shape[:-1])
    ref_g, ref_b = layer_norm_grad_beta_ref(res, dy)
    r64 = np.asarray(res, np.float64).reshape(-1, h)
    d64 = np.asarray(dy, np.float64).reshape(-1, h)
    assert pd_gamma.shape == (h,) and pd_beta.shape == (h,)
    assert_sums_close(pd_gamma, ref_g, np.abs(r64 * d64).sum(0), rows, pd_gamma.dtype, what + " pd_gamma")
    assert_sums_close(pd_beta, ref_b, np.abs(d64).sum(0), rows, pd_beta.dtype, what + " pd_beta")


def test_document_example_exact():
    x = jnp.arange(64, dtype=jnp.float32).reshape(1, 8, 8)
    pd_gamma, pd_beta = layer_norm_grad_beta(x, x)
    np.testing.assert_array_equal(pd_gamma, [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488])
    np.testing.assert_array_equal(pd_beta, [224, 232, 240, 248, 256, 264, 272, 280])


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
def test_document_example_16bit_is_rounded_float32_sum(dtype):
    # 0..63 are exact in both formats; the exact sums are rounded once (RNE).
    x = jnp.arange(64, dtype=dtype).reshape(1, 8, 8)
    pd_gamma, pd_beta = layer_norm_grad_beta(x, x)
    exact_g = np.array([8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488], np.float32)
    np.testing.assert_array_equal(np.asarray(pd_gamma), exact_g.astype(dtype))
    assert pd_gamma.dtype == dtype and pd_beta.dtype == dtype
    g32, b32 = layer_norm_grad_beta(x, x, out_dtype=jnp.float32)
    np.testing.assert_array_equal(g32, exact_g)  # no 16-bit rounding on the way
    assert g32.dtype == jnp.float32


SHAPES = [
    # rank 1: one row
    (1,),
    (7,),
    (4097,),
    # rank 2: rows in {0, 1, many}
    (0, 8),
    (1, 33),
    (257, 7),
    (1000, 8),
    (3, 4097),
    (2048, 1),
    # rank 3 / 4
    (2, 0, 33),
    (4, 64, 33),
    (3, 5, 8),
    (2, 3, 5, 7),
    (2, 2, 16, 4097),
    (0, 3, 2, 1),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_shapes_against_float64(shape, dtype, rng):
    res = random_array(rng, shape, dtype)
    dy = random_array(rng, shape, dtype, scale=3.0)
    out = jax.jit(layer_norm_grad_beta)(res, dy)
    assert out[0].dtype == dtype and out[1].dtype == dtype
    check_against_ref(res, dy, out, f"{shape} {np.dtype(dtype).name}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_large_rows_parallel_path(dtype, rng):
    # Big enough for many row blocks and several threads.
    res = random_array(rng, (8192, 384), dtype)
    dy = random_array(rng, (8192, 384), dtype)
    check_against_ref(res, dy, layer_norm_grad_beta(res, dy, out_dtype=jnp.float32), "8192x384")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_wide_rows_column_chunks(dtype, rng):
    # H >> rows: the partition splits columns instead of rows.
    res = random_array(rng, (8, 70001), dtype)
    dy = random_array(rng, (8, 70001), dtype)
    check_against_ref(res, dy, layer_norm_grad_beta(res, dy), "8x70001")


@pytest.mark.parametrize("in_dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("out_dtype", DTYPES, ids=DTYPE_IDS)
def test_out_dtype(in_dtype, out_dtype, rng):
    res = random_array(rng, (300, 40), in_dtype)
    dy = random_array(rng, (300, 40), in_dtype)
    out = layer_norm_grad_beta(res, dy, out_dtype=out_dtype)
    assert out[0].dtype == out_dtype and out[1].dtype == out_dtype
    check_against_ref(res, dy, out, "out_dtype")


def test_float32_output_of_bf16_is_not_16bit_rounded(rng):
    res = random_array(rng, (4096, 64), jnp.bfloat16)
    dy = random_array(rng, (4096, 64), jnp.bfloat16)
    g32, _ = layer_norm_grad_beta(res, dy, out_dtype=jnp.float32)
    g32 = np.asarray(g32)
    # Rounded to bf16, almost no float32 sum survives unchanged.
    assert np.mean(g32.astype(jnp.bfloat16).astype(np.float32) != g32) > 0.9


def test_zero_rows_give_zeros():
    for shape in [(0, 5), (3, 0, 5)]:
        for dtype in DTYPES:
            g, b = layer_norm_grad_beta(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype))
            assert g.shape == (5,) and b.shape == (5,)
            np.testing.assert_array_equal(np.asarray(g, np.float32), np.zeros(5))
            np.testing.assert_array_equal(np.asarray(b, np.float32), np.zeros(5))


def test_zero_width():
    g, b = layer_norm_grad_beta(jnp.ones((4, 0)), jnp.ones((4, 0)))
    assert g.shape == (0,) and b.shape == (0,)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_nan_and_inf_propagate(dtype, rng):
    res = random_array(rng, (2000, 50), dtype)
    dy = random_array(rng, (2000, 50), dtype)
    res[17, 3] = np.nan
    dy[1999, 4] = np.inf
    dy[5, 6] = np.nan
    res[100, 7] = np.inf
    dy[101, 7] = -np.inf  # inf * finite in res_for_gamma column 7, -inf in beta column 7
    g, b = (np.asarray(a, np.float32) for a in layer_norm_grad_beta(res, dy))
    ref_g, ref_b = layer_norm_grad_beta_ref(res, dy)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(ref_g))
    np.testing.assert_array_equal(np.isnan(b), np.isnan(ref_b))
    np.testing.assert_array_equal(np.isposinf(g), np.isposinf(ref_g))
    np.testing.assert_array_equal(np.isneginf(b), np.isneginf(ref_b))
    assert np.isnan(g[3]) and np.isnan(g[6]) and np.isnan(b[6]) and np.isposinf(b[4])
    finite = np.isfinite(ref_g)
    assert finite.sum() >= 45


def test_overflow_to_inf_when_narrowing():
    # float16 saturates at 65504: a float32 sum beyond it rounds to inf.
    x = jnp.full((64, 3), 100.0, jnp.float16)
    g, b = layer_norm_grad_beta(x, x)
    assert np.all(np.isinf(np.asarray(g, np.float32)))
    np.testing.assert_array_equal(np.asarray(b, np.float32), 6400.0)
    g32, _ = layer_norm_grad_beta(x, x, out_dtype=jnp.float32)
    np.testing.assert_array_equal(g32, 640000.0)


def test_eager_jit_and_disable_jit_agree_bitwise(rng):
    res = random_array(rng, (5000, 96), jnp.float32)
    dy = random_array(rng, (5000, 96), jnp.float32)
    eager = layer_norm_grad_beta(res, dy)
    jitted = jax.jit(layer_norm_grad_beta)(res, dy)
    with jax.disable_jit():
        nojit = layer_norm_grad_beta(res, dy)
    for a, b, c in zip(eager, jitted, nojit):
        np.testing.assert_array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))
        np.testing.assert_array_equal(np.asarray(a).view(np.uint32), np.asarray(c).view(np.uint32))


def test_cpu_lowering_is_the_ffi_custom_call():
    x = jnp.ones((16, 8))
    text = jax.jit(layer_norm_grad_beta).lower(x, x).as_text()
    assert f"custom_call @{FFI_TARGET}" in text
    assert "stablehlo.reduce" not in text  # no XLA reduction behind our back


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_other_platforms_lower_to_jax_numpy(platform):
    x = jax.ShapeDtypeStruct((16, 8), jnp.bfloat16)
    exported = jax.export.export(jax.jit(layer_norm_grad_beta), platforms=[platform])(x, x)
    text = exported.mlir_module()
    assert FFI_TARGET not in text
    assert "stablehlo.reduce" in text
    assert exported.out_avals[0].shape == (8,) and exported.out_avals[0].dtype == jnp.bfloat16


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_jax_numpy_lowering_matches_kernel(dtype, rng):
    # The fallback and the kernel compute the same float32 sums (up to order).
    res = random_array(rng, (3, 400, 24), dtype)
    dy = random_array(rng, (3, 400, 24), dtype)
    for batch_dims in (0, 1):
        fb = _grad_beta_jnp(jnp.asarray(res), jnp.asarray(dy), out_dtype=jnp.float32, batch_dims=batch_dims)
        kern = jax_lngb.layer_norm_grad_beta_p.bind(
            jnp.asarray(res), jnp.asarray(dy), out_dtype=np.dtype(jnp.float32), batch_dims=batch_dims
        )
        for a, b in zip(fb, kern):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-4)
