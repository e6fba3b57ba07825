"""Derivatives of every order through jax_lngb.layer_norm: forward mode,
linearize, Hessians, grad-of-grad, transposition, and vmap of them, all
against XLA autodiff of the plain jax.numpy LayerNorm."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_array
from jax.test_util import check_grads

from jax_lngb import layer_norm, layer_norm_backward_p, layer_norm_jnp, layer_norm_tangent_p, layer_norm_tangent_ref
from jax_lngb._ops.primitives import LAYER_NORM_BACKWARD_TARGET as FUSED_TARGET

BACKWARDS = ["fused", "chained"]


def setup(rng, shape=(3, 6), dtype=jnp.float32):
    x = jnp.asarray(random_array(rng, shape, dtype, scale=1.5) + 0.3)
    h = shape[-1]
    gamma = jnp.asarray(1 + 0.2 * rng.standard_normal(h), jnp.float32)
    beta = jnp.asarray(0.1 * rng.standard_normal(h), jnp.float32)
    w = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    return x, gamma, beta, w


def losses(w, backward):
    def ours(x, g, b):
        return jnp.sum(jnp.sin(layer_norm(x, g, b, backward=backward).astype(jnp.float32)) * w)

    def ref(x, g, b):
        return jnp.sum(jnp.sin(layer_norm_jnp(x, g, b).astype(jnp.float32)) * w)

    return ours, ref


def assert_trees_close(a, b, rtol=2e-5, atol=2e-5):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        assert u.shape == v.shape and u.dtype == v.dtype
        scale = float(np.abs(np.asarray(v, np.float64)).max()) + 1e-6
        np.testing.assert_allclose(np.asarray(u, np.float64), np.asarray(v, np.float64), rtol=rtol, atol=atol * scale)


@pytest.mark.parametrize("backward", BACKWARDS)
def test_check_grads_second_order_forward_and_reverse(backward, rng):
    x, gamma, beta, _ = setup(rng, (4, 7))

    def f(x, g, b):
        return layer_norm(x, g, b, backward=backward)

    check_grads(f, (x, gamma, beta), order=2, modes=("fwd", "rev"), atol=3e-2, rtol=3e-2, eps=1e-2)


@pytest.mark.parametrize("backward", BACKWARDS)
def test_jvp_and_linearize(backward, rng):
    x, gamma, beta, w = setup(rng)
    ours, ref = losses(w, backward)
    t = (jnp.asarray(rng.standard_normal(x.shape), jnp.float32), jnp.ones_like(gamma), 0.5 * jnp.ones_like(beta))
    (p1, t1), (p2, t2) = jax.jvp(ours, (x, gamma, beta), t), jax.jvp(ref, (x, gamma, beta), t)
    np.testing.assert_allclose(p1, p2, rtol=1e-5)
    np.testing.assert_allclose(t1, t2, rtol=1e-5, atol=1e-5)
    y, lin = jax.linearize(ours, x, gamma, beta)
    np.testing.assert_allclose(lin(*t), t2, rtol=1e-5, atol=1e-5)
    # The layer itself, tangents of every output element.
    ty1 = jax.jvp(lambda *a: layer_norm(*a, backward=backward), (x, gamma, beta), t)[1]
    ty2 = jax.jvp(layer_norm_jnp, (x, gamma, beta), t)[1]
    np.testing.assert_allclose(ty1, ty2, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backward", BACKWARDS)
@pytest.mark.parametrize("argnums", [0, 1, (0, 1, 2)], ids=["x", "gamma", "all"])
def test_hessian(argnums, backward, rng):
    x, gamma, beta, w = setup(rng)
    ours, ref = losses(w, backward)
    assert_trees_close(jax.jit(jax.hessian(ours, argnums))(x, gamma, beta), jax.hessian(ref, argnums)(x, gamma, beta))


@pytest.mark.parametrize("backward", BACKWARDS)
def test_grad_of_grad_and_reverse_over_reverse(backward, rng):
    x, gamma, beta, w = setup(rng)
    ours, ref = losses(w, backward)

    def outer(loss):
        return lambda x, g, b: (
            jnp.sum(jax.grad(loss, argnums=(0, 1, 2))(x, g, b)[0] ** 2)
            + jnp.sum(jax.grad(loss, argnums=1)(x, g, b) * g)
        )

    assert_trees_close(
        jax.jit(jax.grad(outer(ours), argnums=(0, 1, 2)))(x, gamma, beta),
        jax.jit(jax.grad(outer(ref), argnums=(0, 1, 2)))(x, gamma, beta),
    )
    for nest in (lambda f: jax.jacrev(jax.jacrev(f)), lambda f: jax.jacfwd(jax.jacfwd(f))):
        assert_trees_close(jax.jit(nest(ours))(x, gamma, beta), jax.jit(nest(ref))(x, gamma, beta))


def test_third_order(rng):
    x, gamma, beta, w = setup(rng, (2, 5))
    ours, ref = losses(w, "fused")
    big = jnp.asarray(rng.standard_normal(x.shape + x.shape), jnp.float32)

    def third(loss):
        return jax.jit(jax.grad(lambda x: jnp.sum(jax.hessian(loss)(x, gamma, beta) * big)))

    want = third(ref)(x)
    assert float(np.abs(want).max()) > 0.1  # a real third derivative, not noise
    assert_trees_close(third(ours)(x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backward", BACKWARDS)
def test_jacobians_of_the_layer(backward, rng):
    x, gamma, beta, _ = setup(rng, (2, 3, 5))

    def f(*a):
        return layer_norm(*a, backward=backward)

    for jac in (jax.jacrev, jax.jacfwd):
        got = jax.jit(jac(f, argnums=(0, 1, 2)))(x, gamma, beta)
        assert_trees_close(got, jac(layer_norm_jnp, argnums=(0, 1, 2))(x, gamma, beta))


def test_transposing_the_vjp_gives_the_jvp(rng):
    # The fused backward is linear in dy; its transpose is the forward's
    # tangent map again.
    x, gamma, beta, _ = setup(rng, (5, 8))
    y, vjp = jax.vjp(layer_norm, x, gamma, beta)
    t = (jnp.asarray(rng.standard_normal(x.shape), jnp.float32), jnp.ones_like(gamma), jnp.ones_like(beta))
    (ty,) = jax.linear_transpose(vjp, y)(t)
    np.testing.assert_allclose(ty, jax.jvp(layer_norm_jnp, (x, gamma, beta), t)[1], rtol=1e-5, atol=1e-5)


def test_tangent_and_backward_are_exact_adjoints(rng):
    # <backward(ct), t> == <ct, tangent(t)>, the dot-product test, for
    # arbitrary statistics (not only the exact mean/variance of x).
    x = jnp.asarray(random_array(rng, (6, 10), jnp.float32))
    var = jnp.asarray(rng.uniform(0.5, 2.0, 6), jnp.float32)
    mean = jnp.asarray(rng.standard_normal(6), jnp.float32)
    gamma = jnp.asarray(1 + 0.3 * rng.standard_normal(10), jnp.float32)
    ct = jnp.asarray(rng.standard_normal((6, 10)), jnp.float32)
    tx = jnp.asarray(rng.standard_normal((6, 10)), jnp.float32)
    tg = jnp.asarray(rng.standard_normal(10), jnp.float32)
    tb = jnp.asarray(rng.standard_normal(10), jnp.float32)
    dx, dg, db = layer_norm_backward_p.bind(
        ct, x, var, mean, gamma, epsilon=1e-5, batch_dims=0, out_dtype=np.dtype(np.float32)
    )
    ty, _, _ = layer_norm_tangent_p.bind(tx, tg, tb, x, var, mean, gamma, epsilon=1e-5, batch_dims=0, backward="fused")
    lhs = float(jnp.vdot(dx, tx) + jnp.vdot(dg, tg) + jnp.vdot(db, tb))
    rhs = float(jnp.vdot(ct, ty))
    assert abs(lhs - rhs) <= 1e-4 * (abs(lhs) + 1.0)


def test_vmap_of_hessian_vector_products_per_example(rng):
    x, gamma, beta, w = setup(rng, (4, 3, 6))

    def hvp(loss):
        def one(x, v):
            return jax.jvp(jax.grad(loss), (x, gamma, beta), (v, jnp.zeros_like(gamma), jnp.zeros_like(beta)))[1]

        return jax.vmap(one)

    ours, ref = losses(1.0, "fused")
    v = jnp.asarray(rng.standard_normal(x.shape), jnp.float32)
    assert_trees_close(jax.jit(hvp(ours))(x, v), hvp(ref)(x, v))


def test_per_example_gradients_of_batched_parameters(rng):
    # vmap over gamma and beta too (one parameter set per example).
    x, gamma, beta, w = setup(rng, (4, 3, 6))
    gs = jnp.stack([gamma * (1 + 0.1 * i) for i in range(4)])
    bs = jnp.stack([beta + 0.1 * i for i in range(4)])
    ours, ref = losses(w[0], "fused")
    g1 = jax.vmap(jax.grad(ours, argnums=(0, 1, 2)))(x, gs, bs)
    g2 = jax.vmap(jax.grad(ref, argnums=(0, 1, 2)))(x, gs, bs)
    assert_trees_close(g1, g2)
    text = jax.jit(jax.vmap(jax.grad(ours, argnums=(0, 1, 2)))).lower(x, gs, bs).as_text()
    assert f"custom_call @{FUSED_TARGET}(" in text


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bf16", "f16"])
def test_second_order_with_16bit_activations(dtype, rng):
    x, gamma, beta, w = setup(rng, (8, 16), dtype)
    ours, ref = losses(w, "fused")
    hv = jax.jit(jax.grad(lambda g: jnp.sum(jax.grad(ours, argnums=1)(x, g, beta) ** 2)))(gamma)
    hv_ref = jax.grad(lambda g: jnp.sum(jax.grad(ref, argnums=1)(x, g, beta) ** 2))(gamma)
    assert hv.dtype == jnp.float32
    np.testing.assert_allclose(hv, hv_ref, rtol=5e-2, atol=5e-2 * float(np.abs(hv_ref).max()))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_tangent_map_against_float64(dtype, rng):
    # Arbitrary statistics: the map follows its formulas, not only the
    # exact derivative at the true mean and variance.
    x = jnp.asarray(random_array(rng, (5, 3, 40), dtype))
    var = jnp.asarray(rng.uniform(0.5, 2.0, (5, 3)), jnp.float32)
    mean = jnp.asarray(rng.standard_normal((5, 3)), jnp.float32)
    gamma = jnp.asarray(1 + 0.3 * rng.standard_normal(40), jnp.float32)
    tx = jnp.asarray(random_array(rng, (5, 3, 40), dtype))
    tg, tb = (jnp.asarray(rng.standard_normal(40), jnp.float32) for _ in range(2))
    got = layer_norm_tangent_p.bind(tx, tg, tb, x, var, mean, gamma, epsilon=1e-5, batch_dims=0, backward="fused")
    want = layer_norm_tangent_ref(tx, tg, tb, x, var, mean, gamma)
    assert got[0].dtype == dtype and got[1].dtype == jnp.float32
    tol = 1e-5 if dtype == jnp.float32 else 1e-2
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=tol, atol=tol * np.abs(b).max())
