"""layer_norm: forward against float64, gradients against autodiff of the
plain jax.numpy LayerNorm, and the ways users differentiate it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, random_array
from jax import export
from jax.test_util import check_grads

from jax_lngb import layer_norm, layer_norm_jnp, layer_norm_ref
from jax_lngb._ops.primitives import LAYER_NORM_BACKWARD_TARGET as FUSED_TARGET
from jax_lngb._ops.primitives import LAYER_NORM_FORWARD_TARGET as FORWARD_TARGET
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_BETA_TARGET as GRAD_BETA_TARGET
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_TARGET as GRAD_TARGET

# Agreement with the jnp LayerNorm: both compute in float32 and round to the
# output dtype, so they differ by an ulp or two of that dtype.
FWD_TOL = {np.dtype(jnp.float32): 2e-5, np.dtype(jnp.float16): 2e-3, np.dtype(jnp.bfloat16): 2e-2}


def params(rng, h, dtype=jnp.float32):
    gamma = (1.0 + 0.1 * rng.standard_normal(h)).astype(np.float32).astype(dtype)
    beta = (0.1 * rng.standard_normal(h)).astype(np.float32).astype(dtype)
    return jnp.asarray(gamma), jnp.asarray(beta)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(7,), (64, 33), (4, 16, 128)])
def test_forward_against_float64(shape, dtype, rng):
    x = jnp.asarray(random_array(rng, shape, dtype, scale=2.0) + 0.5)
    gamma, beta = params(rng, shape[-1])
    y = jax.jit(layer_norm)(x, gamma, beta)
    assert y.dtype == dtype and y.shape == shape
    ref = layer_norm_ref(x, gamma, beta)
    tol = FWD_TOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=tol, atol=tol)


def loss_fn(norm):
    def loss(x, gamma, beta, w):
        y = norm(x, gamma, beta)
        return jnp.sum(jnp.sin(y.astype(jnp.float32)) * w)

    return loss


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(9,), (128, 64), (3, 20, 33)])
def test_gradients_match_jnp_autodiff(shape, dtype, rng):
    x = jnp.asarray(random_array(rng, shape, dtype))
    gamma, beta = params(rng, shape[-1])
    w = jnp.asarray(rng.standard_normal(shape).astype(np.float32))
    ours = jax.jit(jax.grad(loss_fn(layer_norm), argnums=(0, 1, 2)))(x, gamma, beta, w)
    theirs = jax.jit(jax.grad(loss_fn(layer_norm_jnp), argnums=(0, 1, 2)))(x, gamma, beta, w)
    for name, a, b in zip(("dx", "dgamma", "dbeta"), ours, theirs):
        assert a.dtype == b.dtype, name
        assert a.shape == b.shape, name
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        # 16-bit: res_for_gamma and dx are rounded to the activation dtype.
        scale = np.abs(b64).max() + 1e-6
        tol = {jnp.float32: 1e-5, jnp.float16: 4e-3, jnp.bfloat16: 3e-2}[dtype]
        np.testing.assert_allclose(a64, b64, atol=tol * scale, rtol=tol, err_msg=name)


def test_check_grads_reverse_mode(rng):
    x = jnp.asarray(random_array(rng, (6, 10), jnp.float32))
    gamma, beta = params(rng, 10)
    check_grads(layer_norm, (x, gamma, beta), order=1, modes=("rev",), atol=2e-2, rtol=2e-2, eps=1e-2)


@pytest.mark.parametrize(
    "backward,targets,absent",
    [
        ("fused", (FORWARD_TARGET, FUSED_TARGET), (GRAD_TARGET, GRAD_BETA_TARGET)),
        ("chained", (FORWARD_TARGET, GRAD_TARGET, GRAD_BETA_TARGET), (FUSED_TARGET,)),
    ],
)
def test_gradient_uses_the_kernels(backward, targets, absent):
    x = jnp.ones((16, 8))
    g = jnp.ones(8)

    def f(x, g, b):
        return layer_norm(x, g, b, backward=backward).sum()

    text = jax.jit(jax.grad(f, argnums=(0, 1, 2))).lower(x, g, g).as_text()
    for t in targets:
        assert f"custom_call @{t}(" in text, t
    for t in absent:
        assert f"custom_call @{t}(" not in text, t


@pytest.mark.parametrize("act_dtype", [jnp.bfloat16, jnp.float16], ids=["bf16", "f16"])
def test_16bit_activations_with_float32_parameters(act_dtype, rng):
    x = jnp.asarray(random_array(rng, (256, 64), act_dtype))
    gamma, beta = params(rng, 64, jnp.float32)
    y, vjp = jax.vjp(layer_norm, x, gamma, beta)
    assert y.dtype == act_dtype
    dx, dgamma, dbeta = vjp(jnp.ones_like(y))
    assert dx.dtype == act_dtype and dgamma.dtype == jnp.float32 and dbeta.dtype == jnp.float32
    np.testing.assert_allclose(dbeta, np.full(64, 256.0))  # sum of ones, exact in float32


def test_mixed_parameter_dtypes(rng):
    x = jnp.asarray(random_array(rng, (32, 16), jnp.float32))
    gamma, _ = params(rng, 16, jnp.bfloat16)
    _, beta = params(rng, 16, jnp.float32)
    _, vjp = jax.vjp(layer_norm, x, gamma, beta)
    _, dgamma, dbeta = vjp(jnp.ones((32, 16)))
    assert dgamma.dtype == jnp.bfloat16 and dbeta.dtype == jnp.float32


def test_value_and_grad_and_epsilon(rng):
    x = jnp.asarray(random_array(rng, (40, 12), jnp.float32) * 1e-3)
    gamma, beta = params(rng, 12)
    for eps in (1e-5, 1e-2):
        v1, g1 = jax.value_and_grad(lambda x: layer_norm(x, gamma, beta, epsilon=eps).sum() ** 2)(x)
        v2, g2 = jax.value_and_grad(lambda x: layer_norm_jnp(x, gamma, beta, epsilon=eps).sum() ** 2)(x)
        np.testing.assert_allclose(v1, v2, rtol=1e-4)
        np.testing.assert_allclose(g1, g2, rtol=1e-3, atol=1e-3 * np.abs(g2).max())


def _mlp(norm):
    def model(p, x):
        h = x @ p["w1"]
        h = norm(h, p["gamma"], p["beta"])
        return jnp.tanh(h) @ p["w2"]

    def loss(p, x, y):
        return jnp.mean((model(p, x) - y) ** 2)

    return loss


def _mlp_params(rng):
    return {
        "w1": jnp.asarray(rng.standard_normal((16, 32)).astype(np.float32) / 4),
        "gamma": jnp.ones(32),
        "beta": jnp.zeros(32),
        "w2": jnp.asarray(rng.standard_normal((32, 4)).astype(np.float32) / 6),
    }


def test_jitted_training_step_matches_jnp(rng):
    p = _mlp_params(rng)
    x = jnp.asarray(rng.standard_normal((64, 16)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((64, 4)).astype(np.float32))

    def make_step(norm):
        @jax.jit
        def step(p, x, y):
            loss, g = jax.value_and_grad(_mlp(norm))(p, x, y)
            return jax.tree.map(lambda a, b: a - 0.1 * b, p, g), loss

        return step

    ours, theirs = make_step(layer_norm), make_step(layer_norm_jnp)
    text = ours.lower(p, x, y).as_text()
    assert f"custom_call @{FUSED_TARGET}(" in text
    p1, p2 = p, p
    losses = []
    for _ in range(20):
        p1, l1 = ours(p1, x, y)
        p2, l2 = theirs(p2, x, y)
        np.testing.assert_allclose(l1, l2, rtol=1e-4)
        losses.append(float(l1))
    assert losses[-1] < losses[0]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4), p1, p2)


def test_vmap_of_grad_gives_per_example_gradients(rng):
    # Per-example gradients of gamma/beta: the batching rule must not fold
    # the mapped axis into the rows (that would sum over examples).
    p = _mlp_params(rng)
    p["gamma"] = jnp.asarray(1 + 0.1 * rng.standard_normal(32).astype(np.float32))
    xs = jnp.asarray(rng.standard_normal((5, 3, 16)).astype(np.float32))
    ys = jnp.asarray(rng.standard_normal((5, 3, 4)).astype(np.float32))
    per_ex = jax.jit(jax.vmap(jax.grad(_mlp(layer_norm)), in_axes=(None, 0, 0)))(p, xs, ys)
    ref = jax.vmap(jax.grad(_mlp(layer_norm_jnp)), in_axes=(None, 0, 0))(p, xs, ys)
    assert per_ex["gamma"].shape == (5, 32)
    for k in p:
        np.testing.assert_allclose(per_ex[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=k)
    # And they really differ per example.
    assert not np.allclose(per_ex["gamma"][0], per_ex["gamma"][1])
    for i in range(5):
        gi = jax.grad(_mlp(layer_norm))(p, xs[i], ys[i])
        np.testing.assert_allclose(per_ex["beta"][i], gi["beta"], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------- the forward kernel


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(
    "shape", [(1,), (1, 4097), (0, 8), (300, 768), (2, 3, 17), (2000, 1)], ids=lambda s: "x".join(map(str, s))
)
def test_forward_kernel_and_saved_statistics(shape, dtype, rng):
    from jax_lngb import layer_norm_forward_p

    x = jnp.asarray(random_array(rng, shape, dtype, scale=3.0) + 2.0)
    gamma, beta = params(rng, shape[-1])
    y, mean, var = jax.jit(lambda *a: layer_norm_forward_p.bind(*a, epsilon=1e-5, batch_dims=0, backward="fused"))(
        x, gamma, beta
    )
    assert y.dtype == dtype and mean.dtype == jnp.float32 and var.dtype == jnp.float32
    assert mean.shape == shape[:-1] and var.shape == shape[:-1]
    x64 = np.asarray(x, np.float64)
    if x64.size:
        from jax_lngb import layer_norm_forward_ref

        _, m64, v64 = layer_norm_forward_ref(x, gamma, beta)
        h = shape[-1]
        # float32 two-pass statistics of h terms.
        mean_err = np.abs(np.asarray(mean, np.float64) - m64)
        assert np.all(mean_err <= (h + 2) * 2**-24 * np.abs(x64).max(-1)), mean_err.max()
        var_err = np.abs(np.asarray(var, np.float64) - v64)
        assert np.all(var_err <= (2 * h + 8) * 2**-24 * v64 + 1e-30), var_err.max()
    ref = layer_norm_ref(x, gamma, beta)
    tol = FWD_TOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=tol, atol=tol)


def test_forward_is_a_custom_call_and_other_platforms_use_jax_numpy():
    x = jax.ShapeDtypeStruct((16, 8), jnp.bfloat16)
    g = jax.ShapeDtypeStruct((8,), jnp.float32)
    text = jax.jit(layer_norm).lower(x, g, g).as_text()
    assert f"custom_call @{FORWARD_TARGET}(" in text and "stablehlo.reduce" not in text
    for platform in ("cuda", "tpu"):
        exported = export.export(
            jax.jit(jax.grad(lambda x, g, b: layer_norm(x, g, b).astype(jnp.float32).sum(), argnums=(0, 1, 2))),
            platforms=[platform],
        )(x, g, g)
        module = exported.mlir_module()
        assert "stablehlo.custom_call" not in module and "stablehlo.reduce" in module


def test_forward_nan_stays_in_its_row(rng):
    x = random_array(rng, (20, 16), jnp.float32)
    x[4, 2] = np.nan
    x[9, 0] = np.inf
    y = np.asarray(layer_norm(x, jnp.ones(16), jnp.zeros(16)))
    assert np.all(np.isnan(y[4])) and np.all(np.isnan(y[9]))
    assert np.all(np.isfinite(np.delete(y, [4, 9], axis=0)))


def test_forward_eager_jit_disable_jit_bitwise(rng):
    x = jnp.asarray(random_array(rng, (3000, 100), jnp.float16))
    gamma, beta = params(rng, 100)
    a = layer_norm(x, gamma, beta)
    b = jax.jit(layer_norm)(x, gamma, beta)
    with jax.disable_jit():
        c = layer_norm(x, gamma, beta)
    np.testing.assert_array_equal(np.asarray(a).view(np.uint16), np.asarray(b).view(np.uint16))
    np.testing.assert_array_equal(np.asarray(a).view(np.uint16), np.asarray(c).view(np.uint16))


def test_vmap_of_forward_with_batched_parameters(rng):
    x = jnp.asarray(random_array(rng, (4, 10, 12), jnp.float32))
    gs = jnp.asarray(1 + 0.1 * rng.standard_normal((4, 12)), jnp.float32)
    bs = jnp.asarray(0.1 * rng.standard_normal((12, 4)), jnp.float32)  # mapped on axis 1
    y = jax.vmap(layer_norm, in_axes=(0, 0, 1))(x, gs, bs)
    for i in range(4):
        np.testing.assert_array_equal(y[i], layer_norm(x[i], gs[i], bs[:, i]))
    y2 = jax.vmap(jax.vmap(layer_norm, in_axes=(0, None, None)), in_axes=(0, 0, 1))(x[:, :, None], gs, bs)
    np.testing.assert_array_equal(y2[:, :, 0], y)


@pytest.mark.parametrize("bad", ["unfused", "Fused", None, 1])
def test_bad_backward_choice(bad):
    with pytest.raises(ValueError, match=r"backward must be one of 'fused', 'chained'; got"):
        layer_norm(jnp.zeros((2, 4)), jnp.ones(4), jnp.zeros(4), backward=bad)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bf16", "f16"])
def test_narrowing_rounds_to_nearest_even(dtype, rng):
    # gamma = 0 makes y = 0 + beta: beta's float32 values reach the 16-bit
    # narrowing unchanged (ties, carries into the exponent, overflow, values
    # that become 16-bit subnormals, NaN and Inf), in whole and partial
    # 16-lane blocks and in pairs of blocks.
    specials = [
        1 + 2**-8,
        1 + 3 * 2**-8,
        1 - 2**-9,
        255.5,
        3.4e38,
        -3.4e38,
        65519.0,
        65520.0,
        1e-6,
        -3e-7,
        6e-8,
        np.inf,
        -np.inf,
        0.75,
        -1.5e-5,
    ]
    vals = np.array((specials * 5)[:67], np.float32)  # 67 = 4 blocks + a partial one
    beta = jnp.asarray(vals)
    x = jnp.asarray(random_array(rng, (8, vals.size), dtype))
    y = np.asarray(layer_norm(x, jnp.zeros(vals.size), beta))
    want = np.asarray(beta.astype(dtype))
    for row in y:
        np.testing.assert_array_equal(row.view(np.uint16), want.view(np.uint16))
    nan_beta = beta.at[3].set(np.nan)
    y = np.asarray(layer_norm(x, jnp.zeros(vals.size), nan_beta), np.float32)
    assert np.all(np.isnan(y[:, 3])) and np.all(~np.isnan(np.delete(y, 3, axis=1)))
