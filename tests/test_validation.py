"""Bad input is refused at trace time with an error that names the function,
the argument, what it got and what it needs.

The cases are one table (CASES); each runs three ways: traced abstractly
(jax.jit(...).trace on ShapeDtypeStructs, so no kernel can be involved),
under jax.eval_shape, and eagerly on concrete arrays. To cover a new public
function or primitive, add its rows to CASES (and, for a primitive, a row
binding it directly with bad parameters).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import enable_x64
from jax_lngb import _validate, layer_norm, layer_norm_grad_beta, layer_norm_grad_beta_p

F32, F16, BF16 = jnp.float32, jnp.float16, jnp.bfloat16
KEY = jax.random.key(0).dtype  # an extended (non-NumPy) dtype
H = 8
S = jax.ShapeDtypeStruct


@dataclasses.dataclass(frozen=True)
class Bad:
    fn: Callable[..., Any]
    args: tuple[S, ...]
    exc: type[Exception]
    pattern: str
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    name: str = ""  # the function name the message must start with

    def call(self) -> Callable[..., Any]:
        return functools.partial(self.fn, **self.kwargs)


def s(shape, dtype=F32) -> S:
    return S(shape, dtype)


def grad_beta(res, dy, exc, pattern, **kw) -> Bad:
    return Bad(layer_norm_grad_beta, (res, dy), exc, pattern, kw, "layer_norm_grad_beta")


def norm(x, gamma, beta, exc, pattern, **kw) -> Bad:
    return Bad(layer_norm, (x, gamma, beta), exc, pattern, kw, "layer_norm")


def bind_grad_beta(res, dy, exc, pattern, **params) -> Bad:
    params = {"out_dtype": np.dtype(F32), "batch_dims": 0, **params}
    return Bad(lambda r, d: layer_norm_grad_beta_p.bind(r, d, **params), (res, dy), exc, pattern, {}, "layer_norm_grad_beta")


X = s((4, H))
GAMMA, BETA = s((H,)), s((H,))

CASES: dict[str, Bad] = {
    # --- layer_norm_grad_beta: rank, shapes, dtypes, out_dtype
    "grad_beta/rank0": grad_beta(s(()), s(()), ValueError, r"res_for_gamma must have rank >= 1.*got shape \(\) of rank 0"),
    "grad_beta/rank0-dy": grad_beta(s((H,)), s(()), ValueError, r"dy must have the shape of res_for_gamma \(8,\); got \(\)"),
    "grad_beta/shape-H": grad_beta(X, s((4, 9)), ValueError, r"dy must have the shape of res_for_gamma \(4, 8\); got \(4, 9\)"),
    "grad_beta/shape-rank": grad_beta(X, s((H,)), ValueError, r"dy must have the shape.*got \(8,\)"),
    "grad_beta/shape-rows": grad_beta(s((2, 3, H)), s((3, 2, H)), ValueError, r"got \(3, 2, 8\)"),
    "grad_beta/mixed-f32-bf16": grad_beta(X, s((4, H), BF16), TypeError, r"dy must have the dtype of res_for_gamma \(float32\); got bfloat16"),
    "grad_beta/mixed-f16-f32": grad_beta(s((4, H), F16), X, TypeError, r"dy must have the dtype of res_for_gamma \(float16\); got float32"),
    "grad_beta/mixed-f32-int": grad_beta(X, s((4, H), jnp.int32), TypeError, r"dy must have the dtype of res_for_gamma \(float32\); got int32"),
    "grad_beta/int32": grad_beta(s((4, H), jnp.int32), s((4, H), jnp.int32), TypeError, r"res_for_gamma must have dtype float32, float16, bfloat16; got int32"),
    "grad_beta/uint8": grad_beta(s((4, H), jnp.uint8), s((4, H), jnp.uint8), TypeError, r"res_for_gamma must have dtype.*got uint8"),
    "grad_beta/bool": grad_beta(s((4, H), bool), s((4, H), bool), TypeError, r"res_for_gamma must have dtype.*got bool"),
    "grad_beta/complex": grad_beta(s((4, H), jnp.complex64), s((4, H), jnp.complex64), TypeError, r"got complex64"),
    "grad_beta/float8": grad_beta(s((4, H), jnp.float8_e4m3fn), s((4, H), jnp.float8_e4m3fn), TypeError, r"res_for_gamma must have dtype.*got float8_e4m3fn"),
    "grad_beta/prng-key-res": grad_beta(s((4, H), KEY), X, TypeError, r"res_for_gamma must be a floating dtype.*got key<fry>"),
    "grad_beta/prng-key-dy": grad_beta(X, s((4, H), KEY), TypeError, r"dy must have the dtype of res_for_gamma \(float32\); got key<fry>"),
    "grad_beta/out-int32": grad_beta(X, X, TypeError, r"out_dtype must have dtype float32, float16, bfloat16; got int32", out_dtype=jnp.int32),
    "grad_beta/out-bool": grad_beta(X, X, TypeError, r"out_dtype must have dtype.*got bool", out_dtype=bool),
    "grad_beta/out-complex": grad_beta(X, X, TypeError, r"out_dtype must.*got complex64", out_dtype=jnp.complex64),
    "grad_beta/out-float8": grad_beta(X, X, TypeError, r"out_dtype must.*got float8_e5m2", out_dtype=jnp.float8_e5m2),
    "grad_beta/out-string": grad_beta(X, X, TypeError, r"out_dtype must be a floating dtype.*got 'not-a-dtype'", out_dtype="not-a-dtype"),
    "grad_beta/out-float0": grad_beta(X, X, TypeError, r"out_dtype must have dtype.*got float0", out_dtype=jax.dtypes.float0),
    "grad_beta/out-prng-key": grad_beta(X, X, TypeError, r"out_dtype must be a floating dtype.*got key<fry>", out_dtype=KEY),
    # --- the primitive bound directly
    "grad_beta_p/batch-dims-too-many": bind_grad_beta(s((H,)), s((H,)), ValueError, r"res_for_gamma must have rank >= 3", batch_dims=2),
    "grad_beta_p/out-int": bind_grad_beta(X, X, TypeError, r"out_dtype must have dtype.*got int32", out_dtype=np.dtype(jnp.int32)),
    "grad_beta_p/mixed": bind_grad_beta(X, s((4, H), F16), TypeError, r"dy must have the dtype of res_for_gamma"),
    # --- layer_norm: rank, gamma/beta shapes and dtypes, epsilon
    "norm/rank0": norm(s(()), GAMMA, BETA, ValueError, r"x must have rank >= 1.*got shape \(\) of rank 0"),
    "norm/gamma-H": norm(X, s((H + 1,)), BETA, ValueError, r"gamma must have shape \(8,\).*got \(9,\)"),
    "norm/beta-2d": norm(X, GAMMA, s((1, H)), ValueError, r"beta must have shape \(8,\).*got \(1, 8\)"),
    "norm/gamma-like-x": norm(X, s((4, H)), BETA, ValueError, r"gamma must have shape \(8,\)"),
    "norm/gamma-scalar": norm(X, s(()), BETA, ValueError, r"gamma must have shape \(8,\).*got \(\)"),
    "norm/x-int": norm(s((4, H), jnp.int32), GAMMA, BETA, TypeError, r"x must have dtype.*got int32"),
    "norm/x-float8": norm(s((4, H), jnp.float8_e4m3fn), GAMMA, BETA, TypeError, r"x must have dtype.*got float8_e4m3fn"),
    "norm/gamma-int": norm(X, s((H,), jnp.int32), BETA, TypeError, r"gamma must have dtype.*got int32"),
    "norm/beta-bool": norm(X, GAMMA, s((H,), bool), TypeError, r"beta must have dtype.*got bool"),
    "norm/beta-prng-key": norm(X, GAMMA, s((H,), KEY), TypeError, r"beta must be a floating dtype.*got key<fry>"),
    "norm/eps-negative": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite and >= 0; got -1e-05", epsilon=-1e-5),
    "norm/eps-nan": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*nan", epsilon=float("nan")),
    "norm/eps-inf": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*inf", epsilon=float("inf")),
    "norm/eps-neg-inf": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*-inf", epsilon=-math.inf),
    "norm/eps-np-nan": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*nan", epsilon=np.float32("nan")),
    "norm/eps-f32-overflow": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite in float32.*got 1e\+39", epsilon=1e39),
    "norm/eps-huge-int": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite and >= 0; got an int of \d+ bits", epsilon=10**400),
    "norm/eps-vector": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*shape \(2,\)", epsilon=np.ones(2)),
    "norm/eps-1-vector": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*shape \(1,\)", epsilon=np.ones(1)),
    "norm/eps-string": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*str", epsilon="1e-5"),
    "norm/eps-bool": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*bool", epsilon=True),
    "norm/eps-none": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*NoneType", epsilon=None),
    "norm/eps-complex": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*complex", epsilon=1e-5 + 1j),
    "norm/eps-np-complex": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*complex", epsilon=np.complex64(1)),
}


def concrete(a: S) -> jax.Array:
    if a.dtype == KEY:
        return jax.random.split(jax.random.key(0), math.prod(a.shape)).reshape(a.shape)
    return jnp.zeros(a.shape, a.dtype)


def check_message(case: Bad, err: Exception) -> None:
    msg = str(err)
    assert msg.startswith(case.name + ": "), msg  # the function ...
    assert "must" in msg and "got" in msg, msg  # ... what it needs and what it got


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_refused_at_trace_time(case):
    with pytest.raises(case.exc, match=case.pattern) as info:
        jax.jit(case.call()).trace(*case.args)
    check_message(case, info.value)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_refused_by_eval_shape(case):
    with pytest.raises(case.exc, match=case.pattern):
        jax.eval_shape(case.call(), *case.args)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_refused_eagerly(case):
    with pytest.raises(case.exc, match=case.pattern) as info:
        case.call()(*map(concrete, case.args))
    check_message(case, info.value)


def test_float64_is_refused_with_the_supported_list():
    with enable_x64():
        x = jnp.zeros((4, 8), jnp.float64)
        with pytest.raises(TypeError, match=r"float32, float16, bfloat16; got float64"):
            layer_norm_grad_beta(x, x)
        with pytest.raises(TypeError, match=r"dy must have the dtype of res_for_gamma \(float32\); got float64"):
            layer_norm_grad_beta(jnp.zeros((4, 8), jnp.float32), x)
        with pytest.raises(TypeError, match=r"out_dtype must have dtype.*got float64"):
            layer_norm_grad_beta(jnp.zeros((4, 8), jnp.float32), jnp.zeros((4, 8), jnp.float32), out_dtype=jnp.float64)
        with pytest.raises(TypeError, match=r"x must have dtype.*got float64"):
            layer_norm(x, jnp.ones(8), jnp.zeros(8))


def test_layer_norm_traced_epsilon_is_refused():
    x = jnp.zeros((4, H))
    with pytest.raises(TypeError, match="epsilon must be a static Python float"):
        jax.jit(lambda x, e: layer_norm(x, jnp.ones(H), jnp.zeros(H), epsilon=e))(x, 1e-5)


def test_layer_norm_accepts_numpy_and_0d_epsilon():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, H)), F32)
    a = layer_norm(x, jnp.ones(H), jnp.zeros(H), epsilon=np.float32(1e-3))
    b = layer_norm(x, jnp.ones(H), jnp.zeros(H), epsilon=jnp.asarray(1e-3))
    c = layer_norm(x, jnp.ones(H), jnp.zeros(H), epsilon=1e-3)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_epsilon_boundaries_are_accepted():
    # 0 and the largest float32 are legal (if unusual) choices.
    x = jnp.asarray(np.random.default_rng(1).standard_normal((4, H)), F32)
    for eps in (0, 0.0, np.float64(0.0), float(np.finfo(np.float32).max), 1):
        y = layer_norm(x, jnp.ones(H), jnp.zeros(H), epsilon=eps)
        assert y.shape == x.shape


def test_out_dtype_spellings_are_accepted():
    x = jnp.ones((4, H), BF16)
    for spelling in ("float32", np.float32, jnp.float32, np.dtype("float32"), "bfloat16", jnp.float16):
        g, b = layer_norm_grad_beta(x, x, out_dtype=spelling)
        assert g.dtype == np.dtype(spelling) and b.dtype == np.dtype(spelling)


# ------------------------------------------------------------------- vmap


def test_vmap_of_layer_norm_names_per_example_shapes():
    with pytest.raises(ValueError, match=r"layer_norm: x must have rank >= 1.*got shape \(\)"):
        jax.vmap(layer_norm, in_axes=(0, None, None))(jnp.zeros(3), jnp.ones(H), jnp.zeros(H))
    with pytest.raises(ValueError, match=r"layer_norm: gamma must have shape \(8,\).*got \(9,\)"):
        jax.vmap(layer_norm, in_axes=(0, None, 0))(jnp.zeros((3, 4, H)), jnp.ones(H + 1), jnp.zeros((3, H)))


def test_vmap_of_grad_beta_refuses_mismatched_dtypes():
    with pytest.raises(TypeError, match=r"layer_norm_grad_beta: dy must have the dtype of res_for_gamma"):
        jax.vmap(layer_norm_grad_beta)(jnp.zeros((5, 4, H)), jnp.zeros((5, 4, H), F16))


# Under vmap the refusal must speak of the user's per-example shapes, not of
# the batched ones abstract evaluation sees.
def test_vmap_of_grad_beta_names_per_example_rank():
    with pytest.raises(ValueError, match=r"res_for_gamma must have rank >= 1.*got shape \(\) of rank 0"):
        jax.vmap(layer_norm_grad_beta)(jnp.zeros(5), jnp.zeros(5))


def test_vmap_of_grad_beta_names_per_example_shapes():
    with pytest.raises(ValueError, match=r"dy must have the shape of res_for_gamma \(4, 8\); got \(4, 9\)"):
        jax.vmap(layer_norm_grad_beta)(jnp.zeros((5, 4, H)), jnp.zeros((5, 4, 9)))


# --------------------------------------------------- primitive parameters


@pytest.mark.parametrize("batch_dims,exc", [(-1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_primitive_refuses_bad_batch_dims(batch_dims, exc):
    x = jnp.zeros((4, H))
    with pytest.raises(exc, match=r"layer_norm_grad_beta: batch_dims must be"):
        jax.eval_shape(lambda a: layer_norm_grad_beta_p.bind(a, a, out_dtype=np.dtype(F32), batch_dims=batch_dims), x)


@pytest.mark.parametrize(
    "batch_dims,shape,exc,pattern",
    [
        (-1, (4, H), ValueError, r"batch_dims must be >= 0; got -1"),
        (1.5, (4, H), TypeError, r"batch_dims must be an int >= 0; got float 1.5"),
        (True, (4, H), TypeError, r"batch_dims must be an int >= 0; got bool"),
        (2, (4, H), ValueError, r"res_for_gamma must have rank >= 3.*got shape \(4, 8\)"),
    ],
)
def test_check_batch_dims_helper(batch_dims, shape, exc, pattern):
    with pytest.raises(exc, match=pattern):
        _validate.check_batch_dims("layer_norm_grad_beta", batch_dims, "res_for_gamma", shape)
    assert _validate.check_batch_dims("f", 1, "a", (2, 3)) == 1
    assert _validate.check_batch_dims("f", np.int64(0), "a", (3,)) == 0
