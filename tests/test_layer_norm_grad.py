"""layer_norm_grad (CANN LayerNormGrad): values against the float64 oracle,
dtypes, edge cases, vmap, lowering, and trace-time errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, U32, random_array, unit_roundoff
from jax import export
from jax.test_util import check_grads

import jax_lngb
from jax_lngb import layer_norm_grad, layer_norm_grad_beta, layer_norm_grad_p, layer_norm_grad_ref
from jax_lngb._ops.layer_norm.grad import _grad_jnp
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_TARGET as FFI_TARGET

EPS = 1e-5


def stats(x):
    """float32 mean and biased variance of each row, as the forward saves them."""
    x64 = np.asarray(x, np.float64)
    mean = x64.mean(-1)
    var = ((x64 - mean[..., None]) ** 2).mean(-1)
    return mean.astype(np.float32), var.astype(np.float32)


def grad_inputs(rng, shape, dtype, mean_shift=0.5):
    x = random_array(rng, shape, dtype, scale=2.0)
    x = (np.asarray(x, np.float32) + mean_shift).astype(dtype)
    dy = random_array(rng, shape, dtype)
    gamma = (1.0 + 0.2 * rng.standard_normal(shape[-1])).astype(np.float32)
    mean, var = stats(x)
    return dy, x, var, mean, gamma


def row_scale(dy, x, var, mean, gamma, eps=EPS):
    """Per-row magnitude of the terms of pd_x (float64): what float32
    rounding errors of the row sums are proportional to."""
    d = np.asarray(dy, np.float64) * np.asarray(gamma, np.float64)
    x2 = np.asarray(x, np.float64) - np.asarray(mean, np.float64)[..., None]
    r = 1.0 / np.sqrt(np.asarray(var, np.float64)[..., None] + eps)
    return np.max(np.abs(d) * r, -1, keepdims=True) + np.max(np.abs(x2) * r, -1, keepdims=True) * np.max(
        np.abs(d) * r, -1, keepdims=True
    )


def assert_grad_close(got, ref, scale, h, dtype, what):
    """float32 row sums of h terms (error <= ~h u32 of the terms), then one
    rounding to `dtype`."""
    got = np.asarray(got, np.float64)
    bound = unit_roundoff(dtype) * np.abs(ref) + (2 * h + 16) * U32 * scale + 1e-30
    err = np.abs(got - ref)
    bad = ~(err <= bound)
    assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} exceed the bound; worst {err[bad].max()}"


SHAPES = [(1,), (7,), (4097,), (1, 1), (64, 33), (257, 8), (3, 5, 16), (2, 3, 4, 7), (300, 768)]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_against_float64(shape, dtype, rng):
    dy, x, var, mean, gamma = grad_inputs(rng, shape, dtype)
    pd_x, res = jax.jit(layer_norm_grad)(dy, x, var, mean, gamma)
    assert pd_x.dtype == dtype and res.dtype == dtype
    assert pd_x.shape == shape and res.shape == shape
    ref_x, ref_res = layer_norm_grad_ref(dy, x, var, mean, gamma, epsilon=EPS)
    h = shape[-1]
    assert_grad_close(pd_x, ref_x, row_scale(dy, x, var, mean, gamma), h, dtype, "pd_x")
    # res_for_gamma is elementwise: a few float32 roundings, one to dtype.
    x2 = np.abs(np.asarray(x, np.float64)) + np.abs(mean.astype(np.float64))[..., None]
    r = 1.0 / np.sqrt(var.astype(np.float64)[..., None] + EPS)
    bound = unit_roundoff(dtype) * np.abs(ref_res) + 8 * U32 * x2 * r + 1e-30
    assert np.all(np.abs(np.asarray(res, np.float64) - ref_res) <= bound)


def test_formulas_follow_cann_on_a_worked_row():
    # One row, small integers: pd_x by hand from SPEC section 3.
    x = np.array([[1.0, 2.0, 3.0, 6.0]], np.float32)
    dy = np.array([[1.0, -1.0, 2.0, 0.5]], np.float32)
    gamma = np.array([1.0, 2.0, 0.5, 1.0], np.float32)
    mean, var = np.array([3.0], np.float32), np.array([3.5], np.float32)
    pd_x, res = layer_norm_grad(dy, x, var, mean, gamma, epsilon=0.0)
    r = 1 / np.sqrt(3.5)
    x1, x2 = dy[0] * gamma, x[0] - 3.0
    pd_var = np.sum(-0.5 * x1 * x2 * r**3)
    pd_mean = np.sum(-x1 * r) + pd_var * np.sum(-2 * x2) / 4
    np.testing.assert_allclose(pd_x[0], pd_var * 2 / 4 * x2 + pd_mean / 4 + x1 * r, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(res[0], x2 * r, rtol=1e-6)


def test_mean_input_is_used_as_given(rng):
    # CANN takes mean and variance as inputs: a shifted mean changes x2 and
    # the sum(-2 * x2) term, exactly as the formulas say.
    dy, x, var, mean, gamma = grad_inputs(rng, (16, 24), jnp.float32)
    shifted = mean + 0.25
    pd_x, res = layer_norm_grad(dy, x, var, shifted, gamma)
    ref_x, ref_res = layer_norm_grad_ref(dy, x, var, shifted, gamma)
    np.testing.assert_allclose(pd_x, ref_x, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res, ref_res, rtol=1e-5, atol=1e-6)
    assert not np.allclose(pd_x, layer_norm_grad(dy, x, var, mean, gamma)[0], atol=1e-3)


@pytest.mark.parametrize("stat_dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("gamma_dtype", DTYPES, ids=DTYPE_IDS)
def test_statistics_and_gamma_dtypes(stat_dtype, gamma_dtype, rng):
    dy, x, var, mean, gamma = grad_inputs(rng, (40, 48), jnp.bfloat16)
    var_t, mean_t = jnp.asarray(var).astype(stat_dtype), jnp.asarray(mean).astype(stat_dtype)
    gamma_t = jnp.asarray(gamma).astype(gamma_dtype)
    pd_x, res = layer_norm_grad(dy, x, var_t, mean_t, gamma_t)
    assert pd_x.dtype == jnp.bfloat16 and res.dtype == jnp.bfloat16
    # Computed in float32 from the given (rounded) statistics and gamma.
    args = (dy, x, np.asarray(var_t, np.float32), np.asarray(mean_t, np.float32), np.asarray(gamma_t, np.float32))
    ref_x, _ = layer_norm_grad_ref(*args)
    assert_grad_close(pd_x, ref_x, row_scale(*args), 48, jnp.bfloat16, "pd_x")


def test_chain_into_grad_beta_is_the_layer_norm_backward(rng):
    # CANN's chain by hand equals layer_norm's chained VJP.
    x = jnp.asarray(random_array(rng, (128, 64), jnp.float32))
    gamma = jnp.asarray(1 + 0.1 * rng.standard_normal(64), jnp.float32)
    beta = jnp.zeros(64)
    dy = jnp.asarray(random_array(rng, (128, 64), jnp.float32))
    _, mean, var = jax_lngb.layer_norm_forward_p.bind(x, gamma, beta, epsilon=EPS, batch_dims=0, backward="chained")
    pd_x, res = layer_norm_grad(dy, x, var, mean, gamma)
    pd_gamma, pd_beta = layer_norm_grad_beta(res, dy)
    _, vjp = jax.vjp(lambda x, g, b: jax_lngb.layer_norm(x, g, b, backward="chained"), x, gamma, beta)
    for a, b in zip((pd_x, pd_gamma, pd_beta), vjp(dy)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_nan_and_inf_propagate_within_their_row(dtype, rng):
    dy, x, var, mean, gamma = grad_inputs(rng, (50, 40), dtype)
    dy[3, 7] = np.nan
    x[10, 0] = np.inf
    var[20] = np.nan
    pd_x, res = (np.asarray(a, np.float32) for a in layer_norm_grad(dy, x, var, mean, gamma))
    assert np.all(np.isnan(pd_x[3])) and np.all(np.isfinite(res[3]))
    assert np.all(~np.isfinite(pd_x[10])) and np.isinf(res[10, 0])
    assert np.all(np.isnan(pd_x[20])) and np.all(np.isnan(res[20]))
    others = np.setdiff1d(np.arange(50), [3, 10, 20])
    assert np.all(np.isfinite(pd_x[others])) and np.all(np.isfinite(res[others]))


def test_zero_rows_and_zero_width():
    for shape in [(0, 5), (2, 0, 5), (4, 0)]:
        z = jnp.zeros(shape)
        pd_x, res = layer_norm_grad(z, z, jnp.zeros(shape[:-1]), jnp.zeros(shape[:-1]), jnp.ones(shape[-1]))
        assert pd_x.shape == shape and res.shape == shape


def test_eager_jit_and_disable_jit_agree_bitwise(rng):
    args = grad_inputs(rng, (3000, 96), jnp.bfloat16)
    eager = layer_norm_grad(*args)
    jitted = jax.jit(layer_norm_grad)(*args)
    with jax.disable_jit():
        nojit = layer_norm_grad(*args)
    for a, b, c in zip(eager, jitted, nojit):
        np.testing.assert_array_equal(np.asarray(a).view(np.uint16), np.asarray(b).view(np.uint16))
        np.testing.assert_array_equal(np.asarray(a).view(np.uint16), np.asarray(c).view(np.uint16))


def test_cpu_lowering_is_the_ffi_custom_call():
    x = jnp.ones((16, 8))
    s = jnp.ones(16)
    text = jax.jit(layer_norm_grad).lower(x, x, s, s, jnp.ones(8)).as_text()
    assert f"custom_call @{FFI_TARGET}(" in text
    assert "stablehlo.reduce" not in text


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_other_platforms_lower_to_jax_numpy(platform):
    x = jax.ShapeDtypeStruct((16, 8), jnp.bfloat16)
    s = jax.ShapeDtypeStruct((16,), jnp.float32)
    g = jax.ShapeDtypeStruct((8,), jnp.float32)
    exported = export.export(jax.jit(layer_norm_grad), platforms=[platform])(x, x, s, s, g)
    text = exported.mlir_module()
    assert FFI_TARGET not in text and "stablehlo.reduce" in text
    assert [a.dtype for a in exported.out_avals] == [jnp.bfloat16, jnp.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_jax_numpy_lowering_matches_kernel(dtype, rng):
    dy, x, var, mean, gamma = grad_inputs(rng, (3, 100, 40), dtype)
    args = [jnp.asarray(a) for a in (dy, x, var, mean, gamma)]
    fb = _grad_jnp(*args, epsilon=EPS, batch_dims=0)
    kern = layer_norm_grad_p.bind(*args, epsilon=EPS, batch_dims=0)
    tol = {jnp.float32: 1e-5, jnp.float16: 2e-3, jnp.bfloat16: 1.6e-2}[dtype]
    for a, b in zip(fb, kern):
        np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32), rtol=tol, atol=tol)


# ------------------------------------------------------------------ vmap


def _loop(args, in_axes):
    size = next(np.shape(a)[d] for a, d in zip(args, in_axes) if d is not None)
    outs = []
    for i in range(size):
        sl = [a if d is None else np.take(a, i, axis=d) for a, d in zip(args, in_axes)]
        outs.append(layer_norm_grad(*sl))
    return [np.stack([o[k] for o in outs]) for k in range(2)]


@pytest.mark.parametrize(
    "in_axes",
    [
        (0, 0, 0, 0, None),
        (1, 1, 1, 1, None),
        (-2, -2, -1, -1, None),
        (0, 0, 0, 0, 0),
        (None, 0, 0, 0, None),
        (0, None, None, None, 0),
    ],
    ids=["leading", "middle", "negative", "gamma_mapped", "dy_shared", "x_shared"],
)
def test_vmap_matches_a_loop_bitwise(in_axes, rng):
    g, r, h = 3, 20, 24
    dy, x, var, mean, gamma = grad_inputs(rng, (g, r, h), jnp.float32)
    gammas = np.stack([gamma * (1 + 0.1 * i) for i in range(g)])
    full = {0: dy, 1: x, 2: var, 3: mean, 4: gammas}
    single = {0: dy[0], 1: x[0], 2: var[0], 3: mean[0], 4: gamma}
    args = []
    for k, d in enumerate(in_axes):
        if d is None:
            args.append(single[k])
        else:
            a = full[k]
            args.append(np.moveaxis(a, 0, d))
    got = jax.vmap(layer_norm_grad, in_axes=in_axes)(*args)
    want = _loop(args, in_axes)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), b)


def test_nested_vmap(rng):
    dy, x, var, mean, gamma = grad_inputs(rng, (2, 3, 10, 16), jnp.float32)
    gammas = np.stack([gamma, 2 * gamma])
    f = jax.vmap(jax.vmap(layer_norm_grad, in_axes=(0, 0, 0, 0, None)), in_axes=(0, 0, 0, 0, 0))
    pd_x, res = f(dy, x, var, mean, gammas)
    for i in range(2):
        for j in range(3):
            a, b = layer_norm_grad(dy[i, j], x[i, j], var[i, j], mean[i, j], gammas[i])
            np.testing.assert_array_equal(pd_x[i, j], a)
            np.testing.assert_array_equal(res[i, j], b)
    text = jax.jit(f).lower(dy, x, var, mean, gammas).as_text()
    assert f"custom_call @{FFI_TARGET}(" in text  # one kernel call, no Python loop
    assert text.count(f"custom_call @{FFI_TARGET}(") == 1


# --------------------------------------------------------------- derivatives


def test_derivatives_of_layer_norm_grad(rng):
    dy, x, var, mean, gamma = (jnp.asarray(a) for a in grad_inputs(rng, (4, 6), jnp.float32))

    def f(dy, x, var, mean, gamma):
        return layer_norm_grad(dy, x, var + 0.5, mean, gamma)

    check_grads(f, (dy, x, var, mean, gamma), order=2, modes=("fwd", "rev"), atol=3e-2, rtol=3e-2, eps=1e-2)


# ------------------------------------------------------------ bad inputs


def trace(f, *args):
    return jax.jit(f).trace(*[jax.ShapeDtypeStruct(np.shape(a), jnp.asarray(a).dtype) for a in args])


F, H = jnp.float32, 8
GOOD = dict(dy=jnp.zeros((4, H)), x=jnp.zeros((4, H)), variance=jnp.ones(4), mean=jnp.zeros(4), gamma=jnp.ones(H))


@pytest.mark.parametrize(
    "name,value,exc,pattern",
    [
        ("dy", jnp.zeros((4, 9)), ValueError, r"dy must have the shape of x \(4, 8\); got \(4, 9\)"),
        ("dy", jnp.zeros((4, H), jnp.bfloat16), TypeError, r"dy must have the dtype of x \(float32\); got bfloat16"),
        ("x", jnp.zeros((4, H), jnp.int32), TypeError, r"x must have dtype float32, float16, bfloat16; got int32"),
        ("variance", jnp.ones(5), ValueError, r"variance must have shape \(4,\) \(x.shape\[:-1\].*got \(5,\)"),
        ("mean", jnp.zeros((4, 1)), ValueError, r"mean must have shape \(4,\).*got \(4, 1\)"),
        ("mean", jnp.zeros(4, jnp.int32), TypeError, r"mean must have dtype.*got int32"),
        ("gamma", jnp.ones(H + 1), ValueError, r"gamma must have shape \(8,\).*got \(9,\)"),
        ("gamma", jnp.ones(H, bool), TypeError, r"gamma must have dtype.*got bool"),
    ],
)
def test_bad_inputs_fail_at_trace_time(name, value, exc, pattern):
    args = dict(GOOD, **{name: value})
    with pytest.raises(exc, match=pattern):
        trace(layer_norm_grad, *args.values())


def test_bad_rank_and_epsilon():
    with pytest.raises(ValueError, match=r"x must have rank >= 1"):
        layer_norm_grad(jnp.zeros(()), jnp.zeros(()), jnp.zeros(()), jnp.zeros(()), jnp.ones(()))
    with pytest.raises(ValueError, match=r"epsilon must be finite and >= 0; got -1.0"):
        layer_norm_grad(*GOOD.values(), epsilon=-1.0)
