"""The fused LayerNorm backward (LayerNormGrad -> LayerNormGradBeta in one
kernel): against the float64 oracle, against the chained public ops, per
group under vmap, and its edge cases."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, U32, assert_sums_close, random_array
from jax import export
from test_layer_norm_grad import EPS, assert_grad_close, grad_inputs, row_scale

import jax_lngb
from jax_lngb import layer_norm, layer_norm_backward_p, layer_norm_backward_ref
from jax_lngb._ops.layer_norm.backward import _backward_jnp
from jax_lngb._ops.primitives import LAYER_NORM_BACKWARD_TARGET as FFI_TARGET

F32 = np.dtype(jnp.float32)


def fused(dy, x, var, mean, gamma, out_dtype=F32, batch_dims=0):
    args = [jnp.asarray(a) for a in (dy, x, var, mean, gamma)]
    return layer_norm_backward_p.bind(*args, epsilon=EPS, batch_dims=batch_dims, out_dtype=np.dtype(out_dtype))


def check_param_grads(pd_gamma, pd_beta, dy, x, var, mean, what):
    """pd_gamma/pd_beta against float64 sums of the exact res_for_gamma.

    The kernel forms each term res_for_gamma * dy with a few float32
    roundings (x - mean, rstd, two products: under 8 units of |x| + |mean|
    times rstd * |dy|), then adds the terms in float32: the float32-sum
    bound of conftest with 8 more roundings per term, on that magnitude."""
    h = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    d64 = np.asarray(dy, np.float64).reshape(-1, h)
    r = 1.0 / np.sqrt(np.asarray(var, np.float64).reshape(-1, 1) + EPS)
    mean64 = np.asarray(mean, np.float64).reshape(-1, 1)
    x64 = np.asarray(x, np.float64).reshape(-1, h)
    res = (x64 - mean64) * r
    magnitude = ((np.abs(x64) + np.abs(mean64)) * r * np.abs(d64)).sum(0)
    assert_sums_close(pd_gamma, (res * d64).sum(0), magnitude, rows + 8, pd_gamma.dtype, what + " pd_gamma")
    assert_sums_close(pd_beta, d64.sum(0), np.abs(d64).sum(0), rows, pd_beta.dtype, what + " pd_beta")


SHAPES = [
    (1,),
    (9,),
    (4097,),
    (0, 8),
    (1, 33),
    (257, 7),
    (2048, 1),
    (4, 64, 33),
    (2, 3, 5, 16),
    (8192, 384),
    (16, 9000),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_against_float64(shape, dtype, rng):
    dy, x, var, mean, gamma = grad_inputs(rng, shape, dtype)
    dx, pd_gamma, pd_beta = jax.jit(fused)(dy, x, var, mean, gamma)
    assert dx.dtype == dtype and dx.shape == shape
    assert pd_gamma.shape == (shape[-1],) and pd_gamma.dtype == F32
    ref_dx, _, _ = layer_norm_backward_ref(dy, x, var, mean, gamma, epsilon=EPS)
    if dx.size:
        assert_grad_close(dx, ref_dx, row_scale(dy, x, var, mean, gamma), shape[-1], dtype, "dx")
    check_param_grads(pd_gamma, pd_beta, dy, x, var, mean, f"{shape} {np.dtype(dtype).name}")


@pytest.mark.parametrize("act", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("out", DTYPES, ids=DTYPE_IDS)
def test_out_dtype_is_one_rounding_of_the_float32_sums(act, out, rng):
    args = grad_inputs(rng, (300, 40), act)
    _, g32, b32 = fused(*args)
    _, g, b = fused(*args, out_dtype=out)
    assert g.dtype == out and b.dtype == out
    np.testing.assert_array_equal(np.asarray(g), np.asarray(g32.astype(out)))
    np.testing.assert_array_equal(np.asarray(b), np.asarray(b32.astype(out)))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(
    "shape", [(64, 48), (4096, 256), (3, 100, 24), (37, 5000)], ids=lambda s: "x".join(map(str, s))
)
def test_fused_and_chained_backward_agree(shape, dtype, rng):
    x = jnp.asarray(random_array(rng, shape, dtype, scale=2.0))
    gamma = jnp.asarray(1 + 0.1 * rng.standard_normal(shape[-1]), jnp.float32)
    beta = jnp.asarray(0.1 * rng.standard_normal(shape[-1]), jnp.float32)
    dy = jnp.asarray(random_array(rng, shape, dtype))

    def vjp(mode):
        y, f = jax.vjp(lambda *a: layer_norm(*a, backward=mode), x, gamma, beta)
        return y, f(dy)

    (y1, (dx1, g1, b1)), (y2, (dx2, g2, b2)) = vjp("fused"), vjp("chained")
    # Same forward, and the same LayerNormGrad row code gives the same dx.
    np.testing.assert_array_equal(np.asarray(y1), np.asarray(y2))
    np.testing.assert_array_equal(np.asarray(dx1), np.asarray(dx2))
    # The sums: both float32 over the same rows; the chained res_for_gamma
    # is rounded to the activation dtype first (CANN hands it over so).
    rows = math.prod(shape[:-1])
    d64 = np.asarray(dy, np.float64).reshape(-1, shape[-1])
    np.testing.assert_allclose(b1, b2, rtol=0, atol=4 * rows * U32 * np.abs(d64).sum(0).max())
    res_round = 2.0**-24 if dtype == jnp.float32 else (2.0**-11 if dtype == jnp.float16 else 2.0**-8)
    scale = np.abs(d64).sum(0).max() * 4  # |res_for_gamma| is a few units at most
    np.testing.assert_allclose(g1, g2, rtol=0, atol=(res_round + 4 * rows * U32) * scale)
    if dtype != jnp.float32:
        assert not np.array_equal(np.asarray(g1), np.asarray(g2))  # the rounding of res is visible


def test_vmap_gives_one_result_per_group_bitwise(rng):
    # Each group is partitioned exactly as a problem on its own, so the
    # batched kernel reproduces single calls bit for bit.
    g, r, h = 4, 700, 40
    dy, x, var, mean, gamma = grad_inputs(rng, (g, r, h), jnp.bfloat16)
    gammas = np.stack([gamma * (1 + 0.1 * i) for i in range(g)])
    for in_axes, gm in [((0, 0, 0, 0, None), gamma), ((0, 0, 0, 0, 0), gammas)]:
        outs = jax.jit(jax.vmap(fused, in_axes=in_axes))(dy, x, var, mean, gm)
        assert outs[1].shape == (g, h)
        for i in range(g):
            single = fused(dy[i], x[i], var[i], mean[i], gm if in_axes[-1] is None else gm[i])
            for a, b in zip(outs, single):
                np.testing.assert_array_equal(
                    np.asarray(a[i]).view(np.uint16 if a.dtype.itemsize == 2 else np.uint32),
                    np.asarray(b).view(np.uint16 if b.dtype.itemsize == 2 else np.uint32),
                )


def test_vmap_non_leading_axes_and_shared_x(rng):
    dy, x, var, mean, gamma = grad_inputs(rng, (30, 3, 16), jnp.float32)  # mapped axis 1
    outs = jax.vmap(fused, in_axes=(1, 1, 1, 1, None))(dy, x, var, mean, gamma)
    for i in range(3):
        for a, b in zip(outs, fused(dy[:, i], x[:, i], var[:, i], mean[:, i], gamma)):
            np.testing.assert_array_equal(np.asarray(a[i]), np.asarray(b))
    # Only dy mapped (what jacrev does): x and the statistics are shared.
    outs = jax.vmap(fused, in_axes=(1, None, None, None, None))(dy, x[:, 0], var[:, 0], mean[:, 0], gamma)
    for i in range(3):
        for a, b in zip(outs, fused(dy[:, i], x[:, 0], var[:, 0], mean[:, 0], gamma)):
            np.testing.assert_array_equal(np.asarray(a[i]), np.asarray(b))
    text = jax.jit(jax.vmap(fused, in_axes=(1, 1, 1, 1, None))).lower(dy, x, var, mean, gamma).as_text()
    assert text.count(f"custom_call @{FFI_TARGET}(") == 1


def test_layer_norm_vmap_of_grad_uses_the_fused_kernel(rng):
    x = jnp.asarray(random_array(rng, (5, 12, 32), jnp.float32))
    gamma = jnp.asarray(1 + 0.1 * rng.standard_normal(32), jnp.float32)
    beta = jnp.zeros(32)

    def loss(norm, x, g, b):
        return jnp.sum(jnp.tanh(norm(x, g, b)) * jnp.arange(32.0))

    f = jax.vmap(jax.grad(lambda *a: loss(layer_norm, *a), argnums=(0, 1, 2)), in_axes=(0, None, None))
    ref = jax.vmap(jax.grad(lambda *a: loss(jax_lngb.layer_norm_jnp, *a), argnums=(0, 1, 2)), in_axes=(0, None, None))
    got, want = f(x, gamma, beta), ref(x, gamma, beta)
    assert got[1].shape == (5, 32)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    text = jax.jit(f).lower(x, gamma, beta).as_text()
    assert f"custom_call @{FFI_TARGET}(" in text


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_nan_and_inf_propagate(dtype, rng):
    dy, x, var, mean, gamma = grad_inputs(rng, (2000, 50), dtype)
    dy[17, 3] = np.nan
    dy[1999, 4] = np.inf
    x[100, 7] = np.inf
    dx, g, b = (np.asarray(a, np.float32) for a in fused(dy, x, var, mean, gamma))
    assert np.all(np.isnan(dx[17])) and np.all(~np.isfinite(dx[100])) and np.all(~np.isfinite(dx[1999]))
    assert np.isnan(g[3]) and np.isnan(b[3]) and np.isposinf(b[4]) and not np.isfinite(g[7])
    finite_rows = np.setdiff1d(np.arange(2000), [17, 100, 1999])
    assert np.all(np.isfinite(dx[finite_rows]))
    assert np.isfinite(np.delete(g, [3, 4, 7])).all() and np.isfinite(np.delete(b, [3, 4])).all()


def test_zero_rows_give_zero_parameter_gradients():
    for shape in [(0, 5), (3, 0, 5)]:
        for dtype in DTYPES:
            z = jnp.zeros(shape, dtype)
            for batch_dims in (0, 1) if len(shape) == 3 else (0,):
                gamma = jnp.ones(shape[:batch_dims] + (5,))
                dx, g, b = fused(z, z, jnp.zeros(shape[:-1]), jnp.zeros(shape[:-1]), gamma, batch_dims=batch_dims)
                assert dx.shape == shape and g.shape == shape[:batch_dims] + (5,)
                np.testing.assert_array_equal(np.asarray(g), 0.0)
                np.testing.assert_array_equal(np.asarray(b), 0.0)
    dx, g, b = fused(jnp.ones((4, 0)), jnp.ones((4, 0)), jnp.ones(4), jnp.ones(4), jnp.ones(0))
    assert dx.shape == (4, 0) and g.shape == (0,)


def test_eager_jit_and_disable_jit_agree_bitwise(rng):
    args = grad_inputs(rng, (5000, 96), jnp.float32)
    eager = fused(*args)
    jitted = jax.jit(fused)(*args)
    with jax.disable_jit():
        nojit = fused(*args)
    for a, b, c in zip(eager, jitted, nojit):
        np.testing.assert_array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))
        np.testing.assert_array_equal(np.asarray(a).view(np.uint32), np.asarray(c).view(np.uint32))


def test_cpu_lowering_is_one_custom_call():
    x = jnp.ones((16, 8))
    s = jnp.ones(16)
    text = jax.jit(fused).lower(x, x, s, s, jnp.ones(8)).as_text()
    assert text.count(f"custom_call @{FFI_TARGET}(") == 1
    assert "stablehlo.reduce" not in text


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_other_platforms_lower_to_jax_numpy(platform):
    x = jax.ShapeDtypeStruct((16, 8), jnp.bfloat16)
    s = jax.ShapeDtypeStruct((16,), jnp.float32)
    g = jax.ShapeDtypeStruct((8,), jnp.float32)
    exported = export.export(jax.jit(fused), platforms=[platform])(x, x, s, s, g)
    text = exported.mlir_module()
    assert FFI_TARGET not in text and "stablehlo.reduce" in text
    assert [a.shape for a in exported.out_avals] == [(16, 8), (8,), (8,)]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_jax_numpy_lowering_matches_kernel(dtype, rng):
    dy, x, var, mean, gamma = grad_inputs(rng, (3, 200, 40), dtype)
    args = [jnp.asarray(a) for a in (dy, x, var, mean, gamma)]
    for batch_dims in (0, 1):
        if batch_dims:
            args[-1] = jnp.broadcast_to(args[-1], (3, args[-1].shape[-1]))
        fb = _backward_jnp(*args, epsilon=EPS, batch_dims=batch_dims, out_dtype=F32)
        kern = fused(*args, batch_dims=batch_dims)
        tol = {jnp.float32: 1e-5, jnp.float16: 2e-3, jnp.bfloat16: 1.6e-2}[dtype]
        np.testing.assert_allclose(np.asarray(fb[0], np.float32), np.asarray(kern[0], np.float32), rtol=tol, atol=tol)
        for a, b in zip(fb[1:], kern[1:]):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-3)


def test_bad_inputs_fail_at_trace_time():
    x = jax.ShapeDtypeStruct((4, 8), jnp.float32)
    s = jax.ShapeDtypeStruct((4,), jnp.float32)
    g = jax.ShapeDtypeStruct((8,), jnp.float32)
    f = jax.jit(fused)
    with pytest.raises(ValueError, match=r"layer_norm_backward: dy must have the shape of x"):
        f.trace(jax.ShapeDtypeStruct((4, 9), jnp.float32), x, s, s, g)
    with pytest.raises(ValueError, match=r"variance must have shape \(4,\)"):
        f.trace(x, x, jax.ShapeDtypeStruct((5,), jnp.float32), s, g)
    with pytest.raises(TypeError, match=r"out_dtype must have dtype.*got int32"):
        jax.jit(lambda *a: fused(*a, out_dtype=jnp.int32)).trace(x, x, s, s, g)
    with pytest.raises(
        ValueError,
        match=r"gamma must have shape \(4, 8\) \(\[H\], H = x.shape\[-1\], one per vmapped group\); got \(3, 8\)",
    ):
        jax.jit(lambda *a: fused(*a, batch_dims=1)).trace(x, x, s, s, jax.ShapeDtypeStruct((3, 8), jnp.float32))
