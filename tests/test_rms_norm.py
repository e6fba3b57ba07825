"""jax_lngb.rms_norm: values against float64 NumPy, gradients against XLA
autodiff of the plain jax.numpy RMSNorm, the fused and chained backward,
the primitives against their oracles, higher-order derivatives, vmap (with
unmapped gamma joining the rows), validation errors, NaN/Inf, empty rows,
eager/jit/disable_jit, and jax.export with a symbolic batch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, assert_sums_close, random_array, unit_roundoff
from jax.test_util import check_grads

import jax_lngb
from jax_lngb import (
    rms_norm,
    rms_norm_backward_p,
    rms_norm_forward_p,
    rms_norm_grad_p,
    rms_norm_jnp,
    rms_norm_ref,
    rms_norm_tangent_p,
    rms_norm_tangent_ref,
)

MODES = ["fused", "chained"]
# Relative tolerances of outputs rounded to the dtype (float32 statistics).
RTOL = {np.dtype(jnp.float32): 2e-5, np.dtype(jnp.float16): 2e-3, np.dtype(jnp.bfloat16): 1.6e-2}


def data(rng, shape, dtype, gamma_dtype=jnp.float32):
    x = random_array(rng, shape, dtype, 2.0)
    g = (1 + 0.2 * rng.standard_normal(shape[-1])).astype(np.float32).astype(gamma_dtype)
    dy = random_array(rng, shape, dtype)
    return jnp.asarray(x), jnp.asarray(g), jnp.asarray(dy)


def f64(a):
    return np.asarray(jnp.asarray(a).astype(jnp.float32), np.float64)


def rms_backward_ref(dy, x, rstd, gamma):
    """float64 dx and dgamma (rows summed) from the saved rstd."""
    dy, x, r, g = f64(dy), f64(x), f64(rstd)[..., None], f64(gamma)
    xhat = x * r
    gd = dy * g
    dx = r * (gd - xhat * np.mean(gd * xhat, -1, keepdims=True))
    return dx, (xhat * dy).reshape(-1, x.shape[-1]).sum(0)


def dx_magnitude(dy, x, rstd, gamma):
    """The size of dx's two terms (what its rounding errors scale with)."""
    dy, x, r, g = f64(dy), f64(x), f64(rstd)[..., None], f64(gamma)
    xhat = x * r
    return r * np.abs(dy * g) + np.abs(xhat) * r * np.mean(np.abs(dy * g * xhat), -1, keepdims=True)


def gamma_terms(x, rstd, dy):
    """sum over rows of |x * rstd * dy|: what dgamma's rounding errors scale with."""
    return np.abs(f64(x) * f64(rstd)[..., None] * f64(dy)).reshape(-1, np.shape(x)[-1]).sum(0)


def assert_close(got, ref, rtol, scale, what):
    """|got - ref| <= rtol * (|ref| + scale), elementwise."""
    got, ref = f64(got), np.asarray(ref, np.float64)
    err = np.abs(got - ref)
    bound = rtol * (np.abs(ref) + scale)
    assert (err <= bound).all(), f"{what}: worst excess {np.max(err - bound)} (max err {err.max()})"


# ----------------------------------------------------------------- forward


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(64, 768), (3, 5, 33), (7, 1), (2, 16400)])
def test_forward_matches_float64(rng, dtype, shape):
    x, g, _ = data(rng, shape, dtype)
    y, rstd = jax.jit(lambda x, g: rms_norm_forward_p.bind(x, g, epsilon=1e-6, batch_dims=0, backward="fused"))(x, g)
    assert y.dtype == x.dtype and y.shape == x.shape and rstd.dtype == jnp.float32 and rstd.shape == shape[:-1]
    x64 = f64(x)
    rstd64 = 1 / np.sqrt((x64 * x64).mean(-1) + 1e-6)
    np.testing.assert_allclose(np.asarray(rstd), rstd64, rtol=2e-6)
    ref = rms_norm_ref(x, g)
    assert_close(y, ref, 2 * unit_roundoff(dtype) + 1e-6, 1e-30, "y")
    np.testing.assert_array_equal(np.asarray(rms_norm(x, g)), np.asarray(y))


def test_forward_follows_cann_order_and_epsilon(rng):
    # The mean of squares is the sum times the float32 1/H, plus epsilon; a
    # large epsilon dominates it.
    x, g, _ = data(rng, (4, 96), jnp.float32)
    y = rms_norm(x, g, epsilon=100.0)
    np.testing.assert_allclose(np.asarray(y), rms_norm_ref(x, g, epsilon=100.0), rtol=3e-6)
    # CANN's documented example: x = gamma = 0..15.
    a = jnp.arange(16, dtype=jnp.float32)
    want = [
        0,
        0.11359233,
        0.4543693,
        1.022331,
        1.8174772,
        2.8398082,
        4.089324,
        5.566024,
        7.269909,
        9.200979,
        11.359233,
        13.744672,
        16.357296,
        19.197104,
        22.264095,
        25.558275,
    ]
    np.testing.assert_allclose(np.asarray(rms_norm(a[None], a, epsilon=1e-5))[0], want, rtol=2e-6)


# ----------------------------------------------------------------- gradients


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_vjp_matches_xla_autodiff(rng, dtype, mode):
    x, g, dy = data(rng, (3, 40, 96), dtype)
    y, back = jax.vjp(lambda x, g: rms_norm(x, g, backward=mode), x, g)
    y_r, back_r = jax.vjp(rms_norm_jnp, x, g)
    dx, dg = jax.jit(back)(dy)
    dx_r, dg_r = back_r(dy)
    assert dx.dtype == x.dtype and dg.dtype == g.dtype
    rtol = RTOL[np.dtype(dtype)]
    assert_close(y, f64(y_r), rtol, 1e-3, "y")
    assert_close(dx, f64(dx_r), rtol, np.abs(f64(dx_r)).max() * 1e-2, "dx")
    # And against float64 from the kernel's own rstd.
    _, rstd = rms_norm_forward_p.bind(x, g, epsilon=1e-6, batch_dims=0, backward=mode)
    terms = np.abs(f64(x) * f64(rstd)[..., None] * f64(dy)).reshape(-1, x.shape[-1]).sum(0)
    assert_close(dg, f64(dg_r), rtol, terms, "dgamma")
    dx64, dg64 = rms_backward_ref(dy, x, rstd, g)
    u = unit_roundoff(dtype)
    err = np.abs(f64(dx) - dx64)
    assert (err <= 2 * u * np.abs(dx64) + 1e-5 * dx_magnitude(dy, x, rstd, g)).all(), "dx vs float64"
    # The chained res_for_gamma is rounded to x's dtype: one rounding per term.
    # A float32 sum of 120 terms, each off by the rounding of rstd and
    # x * rstd (and, chained, of res_for_gamma to x's dtype), narrowed once.
    per_term = 4 * 2.0**-24 + (u if mode == "chained" else 0)
    assert_sums_close(dg, dg64, terms * (1 + per_term / 2.0**-24 / 121), 120, g.dtype, "dgamma vs float64")


@pytest.mark.parametrize("gamma_dtype", DTYPES, ids=DTYPE_IDS)
def test_dgamma_in_gamma_dtype(rng, gamma_dtype):
    x, g, dy = data(rng, (50, 64), jnp.bfloat16, gamma_dtype)
    for mode in MODES:
        _, back = jax.vjp(lambda x, g: rms_norm(x, g, backward=mode), x, g)
        dx, dg = back(dy)
        assert dx.dtype == jnp.bfloat16 and dg.dtype == np.dtype(gamma_dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_fused_and_chained_dx_same_bits(rng, dtype):
    x, g, dy = data(rng, (300, 200), dtype)
    outs = {}
    for mode in MODES:
        _, back = jax.vjp(lambda x, g: rms_norm(x, g, backward=mode), x, g)
        outs[mode] = jax.jit(back)(dy)
    np.testing.assert_array_equal(np.asarray(outs["fused"][0]), np.asarray(outs["chained"][0]))
    # dgamma: the chained res_for_gamma is rounded to x's dtype.
    _, rstd = rms_norm_forward_p.bind(x, g, epsilon=1e-6, batch_dims=0, backward="fused")
    terms = np.abs(f64(x) * f64(rstd)[..., None] * f64(dy)).sum(0)
    err = np.abs(f64(outs["fused"][1]) - f64(outs["chained"][1]))
    assert (err <= (unit_roundoff(dtype) + 1e-5) * terms).all()


def test_primitives_against_oracles(rng):
    x, g, dy = data(rng, (2, 30, 48), jnp.float32)
    _, rstd = rms_norm_forward_p.bind(x, g, epsilon=1e-6, batch_dims=0, backward="fused")
    dx64, dg64 = rms_backward_ref(dy, x, rstd, g)
    dx, dg = rms_norm_backward_p.bind(dy, x, rstd, g, batch_dims=0, out_dtype=np.dtype(jnp.float32))
    assert (np.abs(f64(dx) - dx64) <= 1e-6 * (np.abs(dx64) + dx_magnitude(dy, x, rstd, g))).all(), "fused dx"
    assert (np.abs(f64(dg) - dg64) <= 1e-5 * gamma_terms(x, rstd, dy)).all(), "fused dgamma"
    dx2, res = rms_norm_grad_p.bind(dy, x, rstd, g, batch_dims=0)
    np.testing.assert_array_equal(np.asarray(dx2), np.asarray(dx))
    np.testing.assert_array_equal(np.asarray(res), np.asarray(x * rstd[..., None]))
    # Per group: batch_dims=1 gives one dgamma per leading index.
    gg = jnp.stack([g, 2 * g])
    dxg, dgg = rms_norm_backward_p.bind(dy, x, rstd, gg, batch_dims=1, out_dtype=np.dtype(jnp.float32))
    for i in range(2):
        dxi, dgi = rms_backward_ref(dy[i], x[i], rstd[i], gg[i])
        assert (np.abs(f64(dxg[i]) - dxi) <= 1e-6 * (np.abs(dxi) + dx_magnitude(dy[i], x[i], rstd[i], gg[i]))).all()
        assert (np.abs(f64(dgg[i]) - dgi) <= 1e-5 * gamma_terms(x[i], rstd[i], dy[i])).all(), "group dgamma"
    # The tangent map.
    tx, tg = random_array(rng, x.shape, np.float32), random_array(rng, g.shape, np.float32)
    t_y, t_r = rms_norm_tangent_p.bind(jnp.asarray(tx), jnp.asarray(tg), x, rstd, g, batch_dims=0, backward="fused")
    ty64, tr64 = rms_norm_tangent_ref(tx, tg, x, rstd, g)
    assert_close(t_y, ty64, 1e-5, 1e-4, "t_y")
    assert_close(t_r, tr64, 1e-5, 1e-6, "t_rstd")


@pytest.mark.parametrize("mode", MODES)
def test_higher_order(rng, mode):
    x, g, _ = data(rng, (3, 16), jnp.float32)
    f = lambda x, g: rms_norm(x, g, backward=mode)
    check_grads(f, (x, g), order=2, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2)
    # Hessian-vector products and linearize against the jax.numpy RMSNorm.
    loss = lambda f: lambda x, g: jnp.sum(jnp.sin(f(x, g)) * x)
    v = jnp.asarray(random_array(rng, x.shape, np.float32))
    hvp = lambda f: jax.jvp(jax.grad(loss(f)), (x, g), (v, jnp.zeros_like(g)))[1]
    np.testing.assert_allclose(np.asarray(hvp(f)), np.asarray(hvp(rms_norm_jnp)), rtol=1e-4, atol=1e-4)
    y, lin = jax.linearize(f, x, g)
    np.testing.assert_allclose(
        np.asarray(lin(v, g)), np.asarray(jax.jvp(rms_norm_jnp, (x, g), (v, g))[1]), rtol=1e-5, atol=1e-5
    )
    gg = jax.grad(lambda g: jnp.sum(jax.grad(lambda x: jnp.sum(f(x, g) ** 3))(x) ** 2))(g)
    gg_r = jax.grad(lambda g: jnp.sum(jax.grad(lambda x: jnp.sum(rms_norm_jnp(x, g) ** 3))(x) ** 2))(g)
    np.testing.assert_allclose(np.asarray(gg), np.asarray(gg_r), rtol=1e-4, atol=1e-4)


def test_rstd_cotangent(rng):
    # A loss that uses the saved rstd directly exercises its cotangent.
    x, g, _ = data(rng, (5, 24), jnp.float32)

    def loss(x, g):
        y, r = rms_norm_forward_p.bind(x, g, epsilon=1e-6, batch_dims=0, backward="fused")
        return jnp.sum(y * y) + jnp.sum(jnp.log(r))

    def loss_r(x, g):
        r = jax.lax.rsqrt(jnp.mean(x * x, -1) + 1e-6)
        return jnp.sum(rms_norm_jnp(x, g) ** 2) + jnp.sum(jnp.log(r))

    for a, b in zip(jax.grad(loss, (0, 1))(x, g), jax.grad(loss_r, (0, 1))(x, g)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)


# ------------------------------------------------------------------ vmap


def loss_of(f):
    return lambda x, g: jnp.sum(jnp.sin(f(x, g).astype(jnp.float32)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "in_axes", [(0, None), (1, None), (2, None), (0, 0), (None, 0), (1, 0)], ids=lambda a: str(a).replace(" ", "")
)
def test_vmap_in_axes(rng, mode, in_axes):
    b, r, h = 3, 10, 32
    shape = {0: (b, r, h), 1: (r, b, h), 2: (r, h, b), None: (r, h)}[in_axes[0]]
    x = jnp.asarray(random_array(rng, shape, np.float32, 2))
    g = jnp.asarray(1 + 0.2 * rng.standard_normal((b, h) if in_axes[1] == 0 else (h,)).astype(np.float32))
    if in_axes[0] == 2:
        x = jnp.asarray(random_array(rng, (r, h, b), np.float32, 2))
    f = lambda x, g: rms_norm(x, g, backward=mode)
    for fn, fn_r in [(f, rms_norm_jnp), (jax.grad(loss_of(f), (0, 1)), jax.grad(loss_of(rms_norm_jnp), (0, 1)))]:
        got = jax.vmap(fn, in_axes)(x, g)
        want = jax.vmap(fn_r, in_axes)(x, g)
        for a, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            assert a.shape == w.shape
            np.testing.assert_allclose(np.asarray(a), np.asarray(w), rtol=3e-5, atol=3e-5)


@pytest.mark.parametrize("mode", MODES)
def test_nested_vmap_joins_rows(rng, mode):
    # Equinox applies a layer per token: vmap(vmap(norm)) with gamma unmapped.
    x, g, _ = data(rng, (4, 6, 64), jnp.float32)
    f = lambda x, g: jnp.sum(jnp.sin(jax.vmap(jax.vmap(lambda t: rms_norm(t, g, backward=mode)))(x)))
    jaxpr = str(jax.make_jaxpr(jax.grad(f, (0, 1)))(x, g))
    kernels = [
        p
        for p in ("rms_norm_forward", "rms_norm_backward", "rms_norm_grad", "layer_norm_grad_beta")
        if p + "[" in jaxpr
    ]
    assert "rms_norm_forward" in kernels
    for p in kernels:
        assert jaxpr.count(p + "[") == 1, jaxpr
    assert "batch_dims=1" not in jaxpr and "broadcast_in_dim[" not in jaxpr.split("rms_norm_forward[")[0], jaxpr
    dx, dg = jax.grad(f, (0, 1))(x, g)
    dx_r, dg_r = jax.grad(loss_of(rms_norm_jnp), (0, 1))(x, g)
    np.testing.assert_allclose(np.asarray(dx), np.asarray(dx_r), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(dg), np.asarray(dg_r), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("mode", MODES)
def test_per_example_gradients(rng, mode):
    x, g, _ = data(rng, (5, 12, 40), jnp.bfloat16)
    per = jax.jit(jax.vmap(jax.grad(loss_of(lambda x, g: rms_norm(x, g, backward=mode)), 1), (0, None)))(x, g)
    assert per.shape == (5, 40)
    for i in range(5):
        one = jax.grad(loss_of(lambda x, g: rms_norm(x, g, backward=mode)), 1)(x[i], g)
        np.testing.assert_array_equal(np.asarray(per[i]), np.asarray(one))


# ------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "x, gamma, kwargs, exc, words",
    [
        (np.float32(1.0), np.ones(1, np.float32), {}, ValueError, ["rms_norm", "x", "rank"]),
        (np.ones((2, 4), np.int32), np.ones(4, np.float32), {}, TypeError, ["x", "int32"]),
        (np.ones((2, 4), np.uint16), np.ones(4, np.float32), {}, TypeError, ["x", "uint16"]),
        (np.ones((2, 4), np.float32), np.ones(5, np.float32), {}, ValueError, ["gamma", "(4,)", "(5,)"]),
        (np.ones((2, 4), np.float32), np.ones((1, 4), np.float32), {}, ValueError, ["gamma", "(1, 4)"]),
        (np.ones((2, 4), np.float32), np.ones(4, np.int8), {}, TypeError, ["gamma", "int8"]),
        (np.ones((2, 4), np.float32), np.ones(4, np.float32), {"epsilon": -1.0}, ValueError, ["epsilon", "-1.0"]),
        (np.ones((2, 4), np.float32), np.ones(4, np.float32), {"epsilon": float("nan")}, ValueError, ["epsilon"]),
        (np.ones((2, 4), np.float32), np.ones(4, np.float32), {"epsilon": 1e39}, ValueError, ["epsilon", "float32"]),
        (np.ones((2, 4), np.float32), np.ones(4, np.float32), {"backward": "xla"}, ValueError, ["backward", "'xla'"]),
    ],
)
def test_validation_errors_name_the_argument(x, gamma, kwargs, exc, words):
    with pytest.raises(exc) as e:
        jax.jit(lambda x, g: rms_norm(x, g, **kwargs)).trace(x, gamma)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_traced_epsilon_and_bad_primitive_operands():
    with pytest.raises(TypeError, match="epsilon must be a static"):
        jax.jit(lambda e: rms_norm(jnp.ones((2, 4)), jnp.ones(4), epsilon=e)).trace(1e-6)
    x = jnp.ones((2, 4))
    with pytest.raises(ValueError, match="rstd must have shape"):
        jax.eval_shape(
            lambda: rms_norm_backward_p.bind(
                x, x, jnp.ones(3), jnp.ones(4), batch_dims=0, out_dtype=np.dtype("float32")
            )
        )
    with pytest.raises(TypeError, match="dy must have the dtype of x"):
        jax.eval_shape(lambda: rms_norm_grad_p.bind(x.astype(jnp.bfloat16), x, jnp.ones(2), jnp.ones(4), batch_dims=0))
    with pytest.raises(ValueError, match=r"gamma must have shape \(2, 4\)"):
        jax.eval_shape(lambda: rms_norm_forward_p.bind(x, jnp.ones(4), epsilon=1e-6, batch_dims=1, backward="fused"))


# --------------------------------------------------- NaN/Inf, empty rows


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_nonfinite_rows_stay_in_their_rows(rng, dtype, mode):
    x, g, dy = data(rng, (40, 48), dtype)
    x = x.at[3, 5].set(jnp.inf).at[7, :].set(jnp.nan)
    y, back = jax.vjp(lambda x, g: rms_norm(x, g, backward=mode), x, g)
    dx, dg = back(dy)
    y, dx, dg = f64(y), f64(dx), f64(dg)
    bad_rows = np.zeros(40, bool)
    bad_rows[[3, 7]] = True
    assert np.isfinite(y[~bad_rows]).all() and np.isfinite(dx[~bad_rows]).all()
    assert np.isnan(y[7]).all() and np.isnan(dx[7]).all()
    # Row 3: rstd = 0, so y is 0 except inf * 0 = NaN at column 5.
    assert np.isnan(y[3, 5]) and (y[3, np.arange(48) != 5] == 0).all()
    assert np.isnan(dg).all()  # row 7 is NaN in every column


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(0, 8), (2, 0, 8), (3, 0)])
def test_empty(mode, shape):
    x = jnp.ones(shape, jnp.bfloat16)
    g = jnp.ones(shape[-1], jnp.float32)
    y, back = jax.vjp(lambda x, g: rms_norm(x, g, backward=mode), x, g)
    dx, dg = back(jnp.ones_like(y))
    assert y.shape == shape and dx.shape == shape and dg.shape == (shape[-1],)
    np.testing.assert_array_equal(np.asarray(dg), np.zeros(shape[-1]))


def test_eager_jit_disable_jit_agree(rng):
    x, g, dy = data(rng, (20, 70), jnp.float16)
    f = lambda x, g: jax.vjp(rms_norm, x, g)[1](dy)
    a = f(x, g)
    b = jax.jit(f)(x, g)
    with jax.disable_jit():
        c = f(x, g)
    for u, v, w in zip(a, b, c):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
        np.testing.assert_array_equal(np.asarray(u), np.asarray(w))


# ------------------------------------------------------------------ export


@pytest.mark.parametrize("mode", MODES)
def test_export_with_symbolic_batch(rng, mode):
    from jax import export as jax_export

    (b,) = jax_export.symbolic_shape("b")

    def step(x, g):
        return jax.value_and_grad(loss_of(lambda x, g: rms_norm(x, g, backward=mode)), (0, 1))(x, g)

    exp = jax_lngb.export.export(jax.jit(step))(
        jax.ShapeDtypeStruct((b, 7, 64), jnp.bfloat16), jax.ShapeDtypeStruct((64,), jnp.float32)
    )
    text = exp.mlir_module()
    assert "jax_lngb_rms_norm_forward" in text
    assert ("jax_lngb_rms_norm_backward" if mode == "fused" else "jax_lngb_rms_norm_grad") in text
    round_trip = jax_export.deserialize(exp.serialize())
    for n in (1, 3):
        x, g, _ = data(rng, (n, 7, 64), jnp.bfloat16)
        got = round_trip.call(x, g)
        want = jax.jit(step)(x, g)
        for u, v in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


@pytest.mark.parametrize("mode", MODES)
def test_vmap_over_tangents_only(rng, mode):
    # Batched tangent directions with x and gamma unmapped: the row operands
    # that are not mapped (x, rstd) are broadcast into the joined rows.
    x, g, _ = data(rng, (6, 32), jnp.float32)
    ts = jnp.asarray(random_array(rng, (4, 6, 32), np.float32))
    f = lambda x, g: rms_norm(x, g, backward=mode)
    got = jax.vmap(lambda t: jax.jvp(f, (x, g), (t, g))[1])(ts)
    want = jax.vmap(lambda t: jax.jvp(rms_norm_jnp, (x, g), (t, g))[1])(ts)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)
    # And reverse mode through it (the batched tangent's transpose).
    loss = lambda f: lambda x: jnp.sum(jax.vmap(lambda t: jax.jvp(lambda x: f(x, g), (x,), (t,))[1])(ts) ** 2)
    np.testing.assert_allclose(
        np.asarray(jax.grad(loss(f))(x)), np.asarray(jax.grad(loss(rms_norm_jnp))(x)), rtol=1e-4, atol=1e-4
    )
