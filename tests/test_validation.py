"""Bad input is refused at trace time with an error that names the function,
the argument, what it got and what it needs.

Covered: the public functions (layer_norm, layer_norm_grad,
layer_norm_grad_beta) and every primitive bound directly (the grad-beta,
forward, LayerNormGrad, fused backward and tangent primitives), which must
refuse what their public function refuses: a primitive reaches a kernel
without passing through the public function under vmap, differentiation and
jax.export, or when a user binds it.

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

from jax_lngb import (
    layer_norm,
    layer_norm_backward_p,
    layer_norm_forward_p,
    layer_norm_grad,
    layer_norm_grad_beta,
    layer_norm_grad_beta_p,
    layer_norm_grad_p,
    layer_norm_tangent_p,
)
from jax_lngb._core import validate as _validate

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
    return Bad(
        lambda r, d: layer_norm_grad_beta_p.bind(r, d, **params), (res, dy), exc, pattern, {}, "layer_norm_grad_beta"
    )


def ln_grad(dy, x, variance, mean, gamma, exc, pattern, **kw) -> Bad:
    return Bad(layer_norm_grad, (dy, x, variance, mean, gamma), exc, pattern, kw, "layer_norm_grad")


def bind(prim, name: str, defaults: dict[str, Any]):
    """A constructor of Bad rows binding `prim` directly; params override
    `defaults` (which are valid)."""

    def make(*args_and_expectation, **params) -> Bad:
        *args, exc, pattern = args_and_expectation
        full = {**defaults, **params}
        return Bad(lambda *a: prim.bind(*a, **full), tuple(args), exc, pattern, {}, name)

    return make


bind_forward = bind(layer_norm_forward_p, "layer_norm", {"epsilon": 1e-5, "batch_dims": 0, "backward": "fused"})
bind_grad = bind(layer_norm_grad_p, "layer_norm_grad", {"epsilon": 1e-5, "batch_dims": 0})
bind_backward = bind(
    layer_norm_backward_p, "layer_norm_backward", {"epsilon": 1e-5, "batch_dims": 0, "out_dtype": np.dtype(F32)}
)
bind_tangent = bind(
    layer_norm_tangent_p, "layer_norm (tangent)", {"epsilon": 1e-5, "batch_dims": 0, "backward": "fused"}
)


X = s((4, H))
GAMMA, BETA = s((H,)), s((H,))
STAT = s((4,))  # one value per row of X

CASES: dict[str, Bad] = {
    # --- layer_norm_grad_beta: rank, shapes, dtypes, out_dtype
    "grad_beta/rank0": grad_beta(
        s(()), s(()), ValueError, r"res_for_gamma must have rank >= 1.*got shape \(\) of rank 0"
    ),
    "grad_beta/rank0-dy": grad_beta(
        s((H,)), s(()), ValueError, r"dy must have the shape of res_for_gamma \(8,\); got \(\)"
    ),
    "grad_beta/shape-H": grad_beta(
        X, s((4, 9)), ValueError, r"dy must have the shape of res_for_gamma \(4, 8\); got \(4, 9\)"
    ),
    "grad_beta/shape-rank": grad_beta(X, s((H,)), ValueError, r"dy must have the shape.*got \(8,\)"),
    "grad_beta/shape-rows": grad_beta(s((2, 3, H)), s((3, 2, H)), ValueError, r"got \(3, 2, 8\)"),
    "grad_beta/mixed-f32-bf16": grad_beta(
        X, s((4, H), BF16), TypeError, r"dy must have the dtype of res_for_gamma \(float32\); got bfloat16"
    ),
    "grad_beta/mixed-f16-f32": grad_beta(
        s((4, H), F16), X, TypeError, r"dy must have the dtype of res_for_gamma \(float16\); got float32"
    ),
    "grad_beta/mixed-f32-int": grad_beta(
        X, s((4, H), jnp.int32), TypeError, r"dy must have the dtype of res_for_gamma \(float32\); got int32"
    ),
    "grad_beta/int32": grad_beta(
        s((4, H), jnp.int32),
        s((4, H), jnp.int32),
        TypeError,
        r"res_for_gamma must have dtype float32, float16, bfloat16; got int32",
    ),
    "grad_beta/uint8": grad_beta(
        s((4, H), jnp.uint8), s((4, H), jnp.uint8), TypeError, r"res_for_gamma must have dtype.*got uint8"
    ),
    "grad_beta/bool": grad_beta(
        s((4, H), bool), s((4, H), bool), TypeError, r"res_for_gamma must have dtype.*got bool"
    ),
    "grad_beta/complex": grad_beta(s((4, H), jnp.complex64), s((4, H), jnp.complex64), TypeError, r"got complex64"),
    "grad_beta/float8": grad_beta(
        s((4, H), jnp.float8_e4m3fn),
        s((4, H), jnp.float8_e4m3fn),
        TypeError,
        r"res_for_gamma must have dtype.*got float8_e4m3fn",
    ),
    "grad_beta/prng-key-res": grad_beta(
        s((4, H), KEY), X, TypeError, r"res_for_gamma must be a floating dtype.*got key<fry>"
    ),
    "grad_beta/prng-key-dy": grad_beta(
        X, s((4, H), KEY), TypeError, r"dy must have the dtype of res_for_gamma \(float32\); got key<fry>"
    ),
    "grad_beta/out-int32": grad_beta(
        X, X, TypeError, r"out_dtype must have dtype float32, float16, bfloat16; got int32", out_dtype=jnp.int32
    ),
    "grad_beta/out-bool": grad_beta(X, X, TypeError, r"out_dtype must have dtype.*got bool", out_dtype=bool),
    "grad_beta/out-complex": grad_beta(X, X, TypeError, r"out_dtype must.*got complex64", out_dtype=jnp.complex64),
    "grad_beta/out-float8": grad_beta(X, X, TypeError, r"out_dtype must.*got float8_e5m2", out_dtype=jnp.float8_e5m2),
    "grad_beta/out-string": grad_beta(
        X, X, TypeError, r"out_dtype must be a floating dtype.*got 'not-a-dtype'", out_dtype="not-a-dtype"
    ),
    "grad_beta/out-float0": grad_beta(
        X, X, TypeError, r"out_dtype must have dtype.*got float0", out_dtype=jax.dtypes.float0
    ),
    "grad_beta/out-prng-key": grad_beta(
        X, X, TypeError, r"out_dtype must be a floating dtype.*got key<fry>", out_dtype=KEY
    ),
    # --- the primitive bound directly
    "grad_beta_p/batch-dims-too-many": bind_grad_beta(
        s((H,)), s((H,)), ValueError, r"res_for_gamma must have rank >= 3", batch_dims=2
    ),
    "grad_beta_p/out-int": bind_grad_beta(
        X, X, TypeError, r"out_dtype must have dtype.*got int32", out_dtype=np.dtype(jnp.int32)
    ),
    "grad_beta_p/mixed": bind_grad_beta(X, s((4, H), F16), TypeError, r"dy must have the dtype of res_for_gamma"),
    # --- layer_norm: rank, gamma/beta shapes and dtypes, epsilon
    "norm/rank0": norm(s(()), GAMMA, BETA, ValueError, r"x must have rank >= 1.*got shape \(\) of rank 0"),
    "norm/gamma-H": norm(X, s((H + 1,)), BETA, ValueError, r"gamma must have shape \(8,\).*got \(9,\)"),
    "norm/beta-2d": norm(X, GAMMA, s((1, H)), ValueError, r"beta must have shape \(8,\).*got \(1, 8\)"),
    "norm/gamma-like-x": norm(X, s((4, H)), BETA, ValueError, r"gamma must have shape \(8,\)"),
    "norm/gamma-scalar": norm(X, s(()), BETA, ValueError, r"gamma must have shape \(8,\).*got \(\)"),
    "norm/x-int": norm(s((4, H), jnp.int32), GAMMA, BETA, TypeError, r"x must have dtype.*got int32"),
    "norm/x-float8": norm(
        s((4, H), jnp.float8_e4m3fn), GAMMA, BETA, TypeError, r"x must have dtype.*got float8_e4m3fn"
    ),
    "norm/gamma-int": norm(X, s((H,), jnp.int32), BETA, TypeError, r"gamma must have dtype.*got int32"),
    "norm/beta-bool": norm(X, GAMMA, s((H,), bool), TypeError, r"beta must have dtype.*got bool"),
    "norm/beta-prng-key": norm(X, GAMMA, s((H,), KEY), TypeError, r"beta must be a floating dtype.*got key<fry>"),
    "norm/eps-negative": norm(
        X, GAMMA, BETA, ValueError, r"epsilon must be finite and >= 0; got -1e-05", epsilon=-1e-5
    ),
    "norm/eps-nan": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*nan", epsilon=float("nan")),
    "norm/eps-inf": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*inf", epsilon=float("inf")),
    "norm/eps-neg-inf": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*-inf", epsilon=-math.inf),
    "norm/eps-np-nan": norm(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*nan", epsilon=np.float32("nan")),
    "norm/eps-f32-overflow": norm(
        X, GAMMA, BETA, ValueError, r"epsilon must be finite in float32.*got 1e\+39", epsilon=1e39
    ),
    "norm/eps-huge-int": norm(
        X, GAMMA, BETA, ValueError, r"epsilon must be finite and >= 0; got an int of \d+ bits", epsilon=10**400
    ),
    "norm/eps-vector": norm(
        X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*shape \(2,\)", epsilon=np.ones(2)
    ),
    "norm/eps-1-vector": norm(
        X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*shape \(1,\)", epsilon=np.ones(1)
    ),
    "norm/eps-string": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*str", epsilon="1e-5"),
    "norm/eps-bool": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*bool", epsilon=True),
    "norm/eps-none": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*NoneType", epsilon=None),
    "norm/eps-complex": norm(X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*complex", epsilon=1e-5 + 1j),
    "norm/eps-np-complex": norm(
        X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*complex", epsilon=np.complex64(1)
    ),
    "norm/backward-unknown": norm(
        X, GAMMA, BETA, ValueError, r"backward must be one of 'fused', 'chained'; got 'fast'", backward="fast"
    ),
    "norm/backward-case": norm(X, GAMMA, BETA, ValueError, r"backward must be one of.*got 'Fused'", backward="Fused"),
    "norm/backward-none": norm(X, GAMMA, BETA, ValueError, r"backward must be one of.*got None", backward=None),
    "norm/backward-bool": norm(X, GAMMA, BETA, ValueError, r"backward must be one of.*got True", backward=True),
    # --- layer_norm_grad: rank, dy vs x, statistics, gamma, dtypes, epsilon
    "grad/rank0": ln_grad(
        s(()), s(()), s(()), s(()), s(()), ValueError, r"x must have rank >= 1.*got shape \(\) of rank 0"
    ),
    "grad/rank0-dy": ln_grad(
        s(()), s((H,)), s(()), s(()), GAMMA, ValueError, r"dy must have the shape of x \(8,\); got \(\)"
    ),
    "grad/dy-H": ln_grad(
        s((4, 9)), X, STAT, STAT, GAMMA, ValueError, r"dy must have the shape of x \(4, 8\); got \(4, 9\)"
    ),
    "grad/dy-rows": ln_grad(
        s((3, 2, H)),
        s((2, 3, H)),
        s((2, 3)),
        s((2, 3)),
        GAMMA,
        ValueError,
        r"dy must have the shape of x \(2, 3, 8\); got \(3, 2, 8\)",
    ),
    "grad/dy-rank": ln_grad(
        s((1, 4, H)), X, STAT, STAT, GAMMA, ValueError, r"dy must have the shape of x \(4, 8\); got \(1, 4, 8\)"
    ),
    "grad/dy-bf16": ln_grad(
        s((4, H), BF16), X, STAT, STAT, GAMMA, TypeError, r"dy must have the dtype of x \(float32\); got bfloat16"
    ),
    "grad/dy-f32-x-f16": ln_grad(
        X, s((4, H), F16), STAT, STAT, GAMMA, TypeError, r"dy must have the dtype of x \(float16\); got float32"
    ),
    "grad/dy-int": ln_grad(
        s((4, H), jnp.int32), X, STAT, STAT, GAMMA, TypeError, r"dy must have the dtype of x \(float32\); got int32"
    ),
    "grad/dy-prng-key": ln_grad(
        s((4, H), KEY), X, STAT, STAT, GAMMA, TypeError, r"dy must have the dtype of x \(float32\); got key<fry>"
    ),
    "grad/x-int": ln_grad(
        s((4, H), jnp.int32),
        s((4, H), jnp.int32),
        STAT,
        STAT,
        GAMMA,
        TypeError,
        r"x must have dtype float32, float16, bfloat16; got int32",
    ),
    "grad/x-bool": ln_grad(
        s((4, H), bool), s((4, H), bool), STAT, STAT, GAMMA, TypeError, r"x must have dtype.*got bool"
    ),
    "grad/x-complex": ln_grad(
        s((4, H), jnp.complex64),
        s((4, H), jnp.complex64),
        STAT,
        STAT,
        GAMMA,
        TypeError,
        r"x must have dtype.*got complex64",
    ),
    "grad/x-float8": ln_grad(
        s((4, H), jnp.float8_e5m2),
        s((4, H), jnp.float8_e5m2),
        STAT,
        STAT,
        GAMMA,
        TypeError,
        r"x must have dtype.*got float8_e5m2",
    ),
    "grad/x-prng-key": ln_grad(
        s((4, H), KEY), s((4, H), KEY), STAT, STAT, GAMMA, TypeError, r"x must be a floating dtype.*got key<fry>"
    ),
    "grad/variance-keepdims": ln_grad(
        X,
        X,
        s((4, 1)),
        STAT,
        GAMMA,
        ValueError,
        r"variance must have shape \(4,\) \(x\.shape\[:-1\], one value per row\); got \(4, 1\)",
    ),
    "grad/variance-like-x": ln_grad(X, X, X, STAT, GAMMA, ValueError, r"variance must have shape \(4,\).*got \(4, 8\)"),
    "grad/variance-scalar": ln_grad(X, X, s(()), STAT, GAMMA, ValueError, r"variance must have shape \(4,\).*got \(\)"),
    "grad/variance-rank1-x": ln_grad(
        s((H,)),
        s((H,)),
        s((1,)),
        s(()),
        GAMMA,
        ValueError,
        r"variance must have shape \(\) \(x\.shape\[:-1\].*got \(1,\)",
    ),
    "grad/mean-rows": ln_grad(X, X, STAT, s((5,)), GAMMA, ValueError, r"mean must have shape \(4,\).*got \(5,\)"),
    "grad/mean-transposed": ln_grad(
        s((2, 3, H)),
        s((2, 3, H)),
        s((2, 3)),
        s((3, 2)),
        GAMMA,
        ValueError,
        r"mean must have shape \(2, 3\).*got \(3, 2\)",
    ),
    "grad/variance-int": ln_grad(
        X,
        X,
        s((4,), jnp.int32),
        STAT,
        GAMMA,
        TypeError,
        r"variance must have dtype float32, float16, bfloat16; got int32",
    ),
    "grad/mean-bool": ln_grad(X, X, STAT, s((4,), bool), GAMMA, TypeError, r"mean must have dtype.*got bool"),
    "grad/mean-prng-key": ln_grad(
        X, X, STAT, s((4,), KEY), GAMMA, TypeError, r"mean must be a floating dtype.*got key<fry>"
    ),
    "grad/gamma-H": ln_grad(
        X,
        X,
        STAT,
        STAT,
        s((H + 1,)),
        ValueError,
        r"gamma must have shape \(8,\) \(\[H\], H = x\.shape\[-1\]\); got \(9,\)",
    ),
    "grad/gamma-2d": ln_grad(X, X, STAT, STAT, s((1, H)), ValueError, r"gamma must have shape \(8,\).*got \(1, 8\)"),
    "grad/gamma-like-x": ln_grad(X, X, STAT, STAT, X, ValueError, r"gamma must have shape \(8,\).*got \(4, 8\)"),
    "grad/gamma-scalar": ln_grad(X, X, STAT, STAT, s(()), ValueError, r"gamma must have shape \(8,\).*got \(\)"),
    "grad/gamma-int": ln_grad(X, X, STAT, STAT, s((H,), jnp.int32), TypeError, r"gamma must have dtype.*got int32"),
    "grad/gamma-float8": ln_grad(
        X, X, STAT, STAT, s((H,), jnp.float8_e4m3fn), TypeError, r"gamma must have dtype.*got float8_e4m3fn"
    ),
    "grad/eps-negative": ln_grad(
        X, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite and >= 0; got -0.5", epsilon=-0.5
    ),
    "grad/eps-nan": ln_grad(X, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite.*nan", epsilon=math.nan),
    "grad/eps-inf": ln_grad(X, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite.*inf", epsilon=math.inf),
    "grad/eps-f32-overflow": ln_grad(
        X, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite in float32.*got 3.5e\+38", epsilon=3.5e38
    ),
    "grad/eps-vector": ln_grad(
        X, X, STAT, STAT, GAMMA, TypeError, r"epsilon must be a real scalar.*shape \(4,\)", epsilon=np.zeros(4)
    ),
    "grad/eps-string": ln_grad(
        X, X, STAT, STAT, GAMMA, TypeError, r"epsilon must be a real scalar.*str", epsilon="1e-5"
    ),
    "grad/eps-none": ln_grad(
        X, X, STAT, STAT, GAMMA, TypeError, r"epsilon must be a real scalar.*NoneType", epsilon=None
    ),
    # --- the LayerNorm primitives bound directly: what their public
    # functions check (those never run here), and their own parameters
    "forward_p/rank0": bind_forward(s(()), GAMMA, BETA, ValueError, r"x must have rank >= 1.*got shape \(\)"),
    "forward_p/x-int": bind_forward(s((4, H), jnp.int32), GAMMA, BETA, TypeError, r"x must have dtype.*got int32"),
    "forward_p/gamma-H": bind_forward(X, s((H - 1,)), BETA, ValueError, r"gamma must have shape \(8,\).*got \(7,\)"),
    "forward_p/beta-int": bind_forward(X, GAMMA, s((H,), jnp.int8), TypeError, r"beta must have dtype.*got int8"),
    "forward_p/group-gamma-missing": bind_forward(
        s((3, 4, H)),
        GAMMA,
        s((3, H)),
        ValueError,
        r"gamma must have shape \(3, 8\) \(\[H\], H = x\.shape\[-1\], one per vmapped group\); got \(8,\)",
        batch_dims=1,
    ),
    "forward_p/batch-dims-too-many": bind_forward(
        s((H,)), GAMMA, BETA, ValueError, r"x must have rank >= 2", batch_dims=1
    ),
    "forward_p/batch-dims-negative": bind_forward(
        X, GAMMA, BETA, ValueError, r"batch_dims must be >= 0; got -1", batch_dims=-1
    ),
    "forward_p/eps-negative": bind_forward(
        X, GAMMA, BETA, ValueError, r"epsilon must be finite and >= 0; got -1.0", epsilon=-1.0
    ),
    "forward_p/eps-nan": bind_forward(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*nan", epsilon=math.nan),
    "forward_p/eps-inf": bind_forward(X, GAMMA, BETA, ValueError, r"epsilon must be finite.*inf", epsilon=math.inf),
    "forward_p/eps-string": bind_forward(
        X, GAMMA, BETA, TypeError, r"epsilon must be a real scalar.*str", epsilon="1e-5"
    ),
    "forward_p/backward-unknown": bind_forward(
        X, GAMMA, BETA, ValueError, r"backward must be one of 'fused', 'chained'; got 'both'", backward="both"
    ),
    "forward_p/backward-none": bind_forward(
        X, GAMMA, BETA, ValueError, r"backward must be one of.*got None", backward=None
    ),
    "grad_p/rank0": bind_grad(s(()), s(()), s(()), s(()), GAMMA, ValueError, r"x must have rank >= 1.*got shape \(\)"),
    "grad_p/dy-shape": bind_grad(
        s((4, 9)), X, STAT, STAT, GAMMA, ValueError, r"dy must have the shape of x \(4, 8\); got \(4, 9\)"
    ),
    "grad_p/dy-dtype": bind_grad(
        s((4, H), F16), X, STAT, STAT, GAMMA, TypeError, r"dy must have the dtype of x \(float32\); got float16"
    ),
    "grad_p/variance-shape": bind_grad(
        X, X, s((4, 1)), STAT, GAMMA, ValueError, r"variance must have shape \(4,\).*got \(4, 1\)"
    ),
    "grad_p/mean-int": bind_grad(X, X, STAT, s((4,), jnp.int32), GAMMA, TypeError, r"mean must have dtype.*got int32"),
    "grad_p/group-gamma-wrong": bind_grad(
        s((3, 4, H)),
        s((3, 4, H)),
        s((3, 4)),
        s((3, 4)),
        s((4, H)),
        ValueError,
        r"gamma must have shape \(3, 8\).*one per vmapped group.*got \(4, 8\)",
        batch_dims=1,
    ),
    "grad_p/batch-dims-float": bind_grad(
        X, X, STAT, STAT, GAMMA, TypeError, r"batch_dims must be an int >= 0; got float 0.5", batch_dims=0.5
    ),
    "grad_p/eps-negative": bind_grad(
        X, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite and >= 0; got -1e-05", epsilon=-1e-5
    ),
    "grad_p/eps-nan": bind_grad(X, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite.*nan", epsilon=math.nan),
    "grad_p/eps-f32-overflow": bind_grad(
        X, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite in float32", epsilon=1e300
    ),
    "backward_p/rank0": bind_backward(
        s(()), s(()), s(()), s(()), GAMMA, ValueError, r"x must have rank >= 1.*got shape \(\)"
    ),
    "backward_p/dy-shape": bind_backward(
        s((5, H)), X, STAT, STAT, GAMMA, ValueError, r"dy must have the shape of x \(4, 8\); got \(5, 8\)"
    ),
    "backward_p/dy-dtype": bind_backward(
        s((4, H), BF16), X, STAT, STAT, GAMMA, TypeError, r"dy must have the dtype of x \(float32\); got bfloat16"
    ),
    "backward_p/x-bool": bind_backward(
        s((4, H), bool), s((4, H), bool), STAT, STAT, GAMMA, TypeError, r"x must have dtype.*got bool"
    ),
    "backward_p/variance-shape": bind_backward(
        X, X, s((H,)), STAT, GAMMA, ValueError, r"variance must have shape \(4,\).*got \(8,\)"
    ),
    "backward_p/mean-shape": bind_backward(
        X, X, STAT, s((4, 1)), GAMMA, ValueError, r"mean must have shape \(4,\).*got \(4, 1\)"
    ),
    "backward_p/gamma-H": bind_backward(
        X, X, STAT, STAT, s((H + 1,)), ValueError, r"gamma must have shape \(8,\).*got \(9,\)"
    ),
    "backward_p/gamma-int": bind_backward(
        X, X, STAT, STAT, s((H,), jnp.int32), TypeError, r"gamma must have dtype.*got int32"
    ),
    "backward_p/out-int": bind_backward(
        X, X, STAT, STAT, GAMMA, TypeError, r"out_dtype must have dtype.*got int32", out_dtype=np.dtype(jnp.int32)
    ),
    "backward_p/out-float0": bind_backward(
        X, X, STAT, STAT, GAMMA, TypeError, r"out_dtype must have dtype.*got float0", out_dtype=jax.dtypes.float0
    ),
    "backward_p/batch-dims-too-many": bind_backward(
        X, X, STAT, STAT, GAMMA, ValueError, r"x must have rank >= 3", batch_dims=2
    ),
    "backward_p/eps-negative": bind_backward(
        X, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite and >= 0; got -2.0", epsilon=-2.0
    ),
    "backward_p/eps-inf": bind_backward(
        X, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite.*inf", epsilon=math.inf
    ),
    "backward_p/eps-none": bind_backward(
        X, X, STAT, STAT, GAMMA, TypeError, r"epsilon must be a real scalar.*NoneType", epsilon=None
    ),
    "tangent_p/rank0": bind_tangent(
        s(()), GAMMA, BETA, s(()), s(()), s(()), GAMMA, ValueError, r"x must have rank >= 1.*got shape \(\)"
    ),
    "tangent_p/x-int": bind_tangent(
        X, GAMMA, BETA, s((4, H), jnp.int32), STAT, STAT, GAMMA, TypeError, r"x must have dtype.*got int32"
    ),
    "tangent_p/t_x-shape": bind_tangent(
        s((4, 9)), GAMMA, BETA, X, STAT, STAT, GAMMA, ValueError, r"t_x must have the shape of x \(4, 8\); got \(4, 9\)"
    ),
    "tangent_p/t_x-dtype": bind_tangent(
        s((4, H), F16),
        GAMMA,
        BETA,
        X,
        STAT,
        STAT,
        GAMMA,
        TypeError,
        r"t_x must have the dtype of x \(float32\); got float16",
    ),
    "tangent_p/t_gamma-shape": bind_tangent(
        X, s((1, H)), BETA, X, STAT, STAT, GAMMA, ValueError, r"t_gamma must have shape \(8,\).*got \(1, 8\)"
    ),
    "tangent_p/t_beta-int": bind_tangent(
        X, GAMMA, s((H,), jnp.int32), X, STAT, STAT, GAMMA, TypeError, r"t_beta must have dtype.*got int32"
    ),
    "tangent_p/gamma-shape": bind_tangent(
        X, GAMMA, BETA, X, STAT, STAT, s((H - 1,)), ValueError, r"gamma must have shape \(8,\).*got \(7,\)"
    ),
    "tangent_p/variance-shape": bind_tangent(
        X, GAMMA, BETA, X, X, STAT, GAMMA, ValueError, r"variance must have shape \(4,\).*got \(4, 8\)"
    ),
    "tangent_p/mean-bool": bind_tangent(
        X, GAMMA, BETA, X, STAT, s((4,), bool), GAMMA, TypeError, r"mean must have dtype.*got bool"
    ),
    "tangent_p/batch-dims-bool": bind_tangent(
        X, GAMMA, BETA, X, STAT, STAT, GAMMA, TypeError, r"batch_dims must be an int >= 0; got bool", batch_dims=True
    ),
    "tangent_p/eps-nan": bind_tangent(
        X, GAMMA, BETA, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite.*nan", epsilon=math.nan
    ),
    "tangent_p/eps-negative": bind_tangent(
        X, GAMMA, BETA, X, STAT, STAT, GAMMA, ValueError, r"epsilon must be finite and >= 0", epsilon=-1e-5
    ),
    "tangent_p/backward-unknown": bind_tangent(
        X,
        GAMMA,
        BETA,
        X,
        STAT,
        STAT,
        GAMMA,
        ValueError,
        r"backward must be one of 'fused', 'chained'; got 'unfused'",
        backward="unfused",
    ),
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
        with pytest.raises(TypeError, match=r"gamma must have dtype.*got float64"):
            layer_norm(jnp.zeros((4, 8), F32), jnp.ones(8, jnp.float64), jnp.zeros(8, F32))
        # (under x64 an unspecified dtype is float64: spell float32 out)
        x32, stat, gamma = jnp.zeros((4, 8), F32), jnp.zeros(4, F32), jnp.ones(8, F32)
        with pytest.raises(TypeError, match=r"layer_norm_grad: x must have dtype.*got float64"):
            layer_norm_grad(x, x, stat, stat, gamma)
        with pytest.raises(TypeError, match=r"layer_norm_grad: variance must have dtype.*got float64"):
            layer_norm_grad(x32, x32, stat.astype(jnp.float64), stat, gamma)


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


def test_vmap_of_layer_norm_grad_names_per_example_shapes():
    x = jnp.zeros((3, 4, H))
    with pytest.raises(ValueError, match=r"layer_norm_grad: mean must have shape \(4,\).*got \(5,\)"):
        jax.vmap(layer_norm_grad)(x, x, jnp.zeros((3, 4)), jnp.zeros((3, 5)), jnp.ones((3, H)))
    with pytest.raises(ValueError, match=r"layer_norm_grad: gamma must have shape \(8,\).*got \(3, 8\)"):
        jax.vmap(layer_norm_grad, in_axes=(0, 0, 0, 0, None))(
            x, x, jnp.zeros((3, 4)), jnp.zeros((3, 4)), jnp.ones((3, H))
        )
    with pytest.raises(TypeError, match=r"layer_norm_grad: dy must have the dtype of x \(float32\); got bfloat16"):
        jax.vmap(layer_norm_grad)(x.astype(BF16), x, jnp.zeros((3, 4)), jnp.zeros((3, 4)), jnp.ones((3, H)))


def test_gradient_of_layer_norm_refuses_bad_input_before_any_kernel():
    # Reverse mode binds the forward, tangent and backward primitives: the
    # public checks refuse first, with the user's argument names.
    loss = lambda x, g, b: jnp.sum(layer_norm(x, g, b, backward="chained"))
    with pytest.raises(ValueError, match=r"layer_norm: beta must have shape \(8,\).*got \(7,\)"):
        jax.jit(jax.grad(loss)).trace(S((4, H), F32), S((H,), F32), S((H - 1,), F32))
    with pytest.raises(ValueError, match=r"layer_norm: backward must be one of"):
        jax.grad(lambda x: jnp.sum(layer_norm(x, jnp.ones(H), jnp.zeros(H), backward="separate")))(jnp.zeros((4, H)))


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
