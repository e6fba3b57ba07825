"""Bad input is refused at trace time with an error that names the argument,
what it got and what it needs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_lngb import layer_norm, layer_norm_grad_beta, layer_norm_grad_beta_p

F32 = jnp.float32


def trace(f, *args):
    """Abstract tracing only: errors must come from here, not from a kernel."""
    return jax.jit(f).trace(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args])


@pytest.mark.parametrize(
    "res,dy,exc,pattern",
    [
        (jnp.zeros(()), jnp.zeros(()), ValueError, r"res_for_gamma must have rank >= 1.*shape \(\)"),
        (jnp.zeros((4, 8)), jnp.zeros((4, 9)), ValueError, r"dy must have the shape of res_for_gamma \(4, 8\); got \(4, 9\)"),
        (jnp.zeros((4, 8)), jnp.zeros((8,)), ValueError, r"dy must have the shape.*got \(8,\)"),
        (jnp.zeros((4, 8)), jnp.zeros((4, 8), jnp.bfloat16), TypeError, r"dy must have the dtype of res_for_gamma \(float32\); got bfloat16"),
        (jnp.zeros((4, 8), jnp.int32), jnp.zeros((4, 8), jnp.int32), TypeError, r"res_for_gamma must have dtype float32, float16, bfloat16; got int32"),
        (jnp.zeros((4, 8), bool), jnp.zeros((4, 8), bool), TypeError, r"res_for_gamma must have dtype.*got bool"),
        (jnp.zeros((4, 8), jnp.complex64), jnp.zeros((4, 8), jnp.complex64), TypeError, r"got complex64"),
    ],
)
def test_grad_beta_bad_inputs(res, dy, exc, pattern):
    with pytest.raises(exc, match=pattern):
        trace(layer_norm_grad_beta, res, dy)
    with pytest.raises(exc, match=pattern):
        layer_norm_grad_beta(res, dy)


@pytest.mark.parametrize("out_dtype", [jnp.int32, bool, "not-a-dtype", jnp.complex64])
def test_grad_beta_bad_out_dtype(out_dtype):
    x = jnp.zeros((4, 8))
    with pytest.raises(TypeError, match="out_dtype must"):
        layer_norm_grad_beta(x, x, out_dtype=out_dtype)


def test_float64_is_refused_with_the_supported_list():
    with jax.enable_x64(True):
        x = jnp.zeros((4, 8), jnp.float64)
        with pytest.raises(TypeError, match=r"float32, float16, bfloat16; got float64"):
            layer_norm_grad_beta(x, x)


def test_primitive_batch_dims_checked():
    x = jnp.zeros((4,))
    with pytest.raises(ValueError, match=r"rank >= 3"):
        layer_norm_grad_beta_p.bind(x, x, out_dtype=np.dtype(F32), batch_dims=2)


H = 8


@pytest.mark.parametrize(
    "x,gamma,beta,exc,pattern",
    [
        (jnp.zeros(()), jnp.ones(H), jnp.zeros(H), ValueError, r"x must have rank >= 1"),
        (jnp.zeros((4, H)), jnp.ones(H + 1), jnp.zeros(H), ValueError, r"gamma must have shape \(8,\).*got \(9,\)"),
        (jnp.zeros((4, H)), jnp.ones(H), jnp.zeros((1, H)), ValueError, r"beta must have shape \(8,\).*got \(1, 8\)"),
        (jnp.zeros((4, H)), jnp.ones((4, H)), jnp.zeros(H), ValueError, r"gamma must have shape \(8,\)"),
        (jnp.zeros((4, H), jnp.int32), jnp.ones(H), jnp.zeros(H), TypeError, r"x must have dtype.*got int32"),
        (jnp.zeros((4, H)), jnp.ones(H, jnp.int32), jnp.zeros(H), TypeError, r"gamma must have dtype.*got int32"),
    ],
)
def test_layer_norm_bad_inputs(x, gamma, beta, exc, pattern):
    with pytest.raises(exc, match=pattern):
        trace(layer_norm, x, gamma, beta)


@pytest.mark.parametrize(
    "eps,exc,pattern",
    [
        (-1e-5, ValueError, r"epsilon must be finite and >= 0; got -1e-05"),
        (float("nan"), ValueError, r"epsilon must be finite.*nan"),
        (float("inf"), ValueError, r"epsilon must be finite.*inf"),
        (np.ones(2), TypeError, r"epsilon must be a real scalar.*shape \(2,\)"),
        ("1e-5", TypeError, r"epsilon must be a real scalar.*str"),
        (True, TypeError, r"epsilon must be a real scalar.*bool"),
    ],
)
def test_layer_norm_bad_epsilon(eps, exc, pattern):
    x = jnp.zeros((4, H))
    with pytest.raises(exc, match=pattern):
        layer_norm(x, jnp.ones(H), jnp.zeros(H), epsilon=eps)


def test_layer_norm_traced_epsilon_is_refused():
    x = jnp.zeros((4, H))
    with pytest.raises(TypeError, match="epsilon must be a static Python float"):
        jax.jit(lambda x, e: layer_norm(x, jnp.ones(H), jnp.zeros(H), epsilon=e))(x, 1e-5)


def test_layer_norm_accepts_numpy_and_0d_epsilon():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, H)), F32)
    a = layer_norm(x, jnp.ones(H), jnp.zeros(H), epsilon=np.float32(1e-3))
    b = layer_norm(x, jnp.ones(H), jnp.zeros(H), epsilon=jnp.asarray(1e-3))
    np.testing.assert_array_equal(a, b)
