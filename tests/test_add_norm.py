"""add_layer_norm / add_rms_norm: the fused residual add + norm.

Values against the float64 oracles for every dtype combination (mixed x and
residual dtypes included), with and without beta, zero-centred scale on
and off; gradients of every input for cotangents of both outputs against
jax.numpy autodiff of the plain `x + residual` then norm; jit, vmap,
higher order, sharding without gathers, export, determinism across thread
counts, and the trace-time errors.
"""

from __future__ import annotations

import json
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_array, run_python

import jax_lngb
from jax_lngb import add_layer_norm, add_layer_norm_ref, add_rms_norm, add_rms_norm_ref

F32, F16, BF16 = jnp.float32, jnp.float16, jnp.bfloat16
# (x dtype, residual dtype): same dtypes, and 16-bit activations on a float32 residual stream.
PAIRS = [(F32, F32), (F16, F16), (BF16, BF16), (BF16, F32), (F16, F32)]
PAIR_IDS = ["f32", "f16", "bf16", "bf16+f32", "f16+f32"]
# (kind, has_beta, zero_centered)
FORMS = [
    ("layer", True, False),
    ("layer", False, False),
    ("layer", True, True),
    ("layer", False, True),
    ("rms", False, False),
    ("rms", False, True),
]
FORM_IDS = ["ln", "ln-nobeta", "ln-zc", "ln-nobeta-zc", "rms", "rms-zc"]


def _eps(dtype) -> float:
    return float(jnp.finfo(dtype).eps)


def _inputs(rng, shape, xd, rd, zc):
    h = shape[-1]
    x = jnp.asarray(random_array(rng, shape, xd))
    r = jnp.asarray(random_array(rng, shape, rd, scale=2.0))
    g = jnp.asarray(random_array(rng, (h,), F32, scale=0.1 if zc else 1.0))
    b = jnp.asarray(random_array(rng, (h,), F32))
    return x, r, g, b


def _call(kind, has_beta, zc, x, r, g, b, **kw):
    if kind == "layer":
        return add_layer_norm(x, r, g, b if has_beta else None, zero_centered_gamma=zc, **kw)
    return add_rms_norm(x, r, g, zero_centered_gamma=zc, **kw)


def _ref(kind, has_beta, zc, x, r, g, b):
    if kind == "layer":
        return add_layer_norm_ref(x, r, g, b if has_beta else None, zero_centered_gamma=zc)
    return add_rms_norm_ref(x, r, g, zero_centered_gamma=zc)


def _plain(kind, has_beta, zc, x, r, g, b, epsilon=None):
    """x + residual, then the norm, in plain jax.numpy (what autodiff sees)."""
    eps = (1e-5 if kind == "layer" else 1e-6) if epsilon is None else epsilon
    h = (x.astype(F32) + r.astype(F32)).astype(r.dtype)
    h32 = h.astype(F32)
    scale = g.astype(F32) + 1.0 if zc else g.astype(F32)
    if kind == "layer":
        m = jnp.mean(h32, -1, keepdims=True)
        v = jnp.mean(jnp.square(h32 - m), -1, keepdims=True)
        y = (h32 - m) * jax.lax.rsqrt(v + eps) * scale
    else:
        y = h32 * jax.lax.rsqrt(jnp.mean(h32 * h32, -1, keepdims=True) + eps) * scale
    if has_beta:
        y = y + b.astype(F32)
    return y.astype(x.dtype), h


@pytest.mark.parametrize("form", FORMS, ids=FORM_IDS)
@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_forward_matches_float64(rng, pair, form):
    xd, rd = pair
    kind, has_beta, zc = form
    x, r, g, b = _inputs(rng, (3, 37, 96), xd, rd, zc)
    y, h = jax.jit(lambda *a: _call(kind, has_beta, zc, *a))(x, r, g, b)
    assert y.dtype == xd and h.dtype == rd and y.shape == h.shape == x.shape
    y_ref, h_ref = _ref(kind, has_beta, zc, x, r, g, b)
    # h is x + residual rounded once to residual's dtype.
    np.testing.assert_array_equal(np.asarray(h, np.float64), np.asarray(h_ref, np.float64))
    err = np.abs(np.asarray(y, np.float64) - y_ref) / (1.0 + np.abs(y_ref))
    assert err.max() <= 2 * _eps(xd) + 1e-5, err.max()


def test_zero_centered_scale_is_formed_in_float32(rng):
    """A bfloat16 gamma near zero: 1 + gamma rounded to bfloat16 would lose
    gamma entirely; formed in float32 it survives."""
    x, r, _, _ = _inputs(rng, (8, 64), F32, F32, True)
    g = jnp.full((64,), 2.0**-10, BF16)  # 1 + 2^-10 is 1 in bfloat16
    y, _ = add_rms_norm(x, r, g, zero_centered_gamma=True)
    y_ref, _ = add_rms_norm_ref(x, r, np.asarray(g, np.float64), zero_centered_gamma=True)
    y_rounded, _ = add_rms_norm_ref(x, r, np.zeros(64), zero_centered_gamma=True)
    assert np.abs(np.asarray(y) - y_ref).max() < 1e-5
    assert np.abs(y_ref - y_rounded).max() > 5e-4  # the test can tell the two apart


def test_matches_unfused_norms(rng):
    """y agrees with layer_norm / rms_norm applied to the returned h."""
    x, r, g, b = _inputs(rng, (16, 128), BF16, F32, False)
    y, h = add_layer_norm(x, r, g, b)
    want = jax_lngb.layer_norm(h, g, b)
    np.testing.assert_allclose(np.asarray(y, np.float32), np.asarray(want.astype(BF16), np.float32), atol=0.02)
    y2, h2 = add_rms_norm(x, r, g)
    want2 = jax_lngb.rms_norm(h2, g)
    np.testing.assert_allclose(np.asarray(y2, np.float32), np.asarray(want2.astype(BF16), np.float32), atol=0.02)


@pytest.mark.parametrize("form", FORMS, ids=FORM_IDS)
@pytest.mark.parametrize("pair", [(F32, F32), (BF16, F32), (F16, F16)], ids=["f32", "bf16+f32", "f16"])
def test_grad_matches_autodiff(rng, pair, form):
    xd, rd = pair
    kind, has_beta, zc = form
    x, r, g, b = _inputs(rng, (4, 9, 80), xd, rd, zc)
    wy = jnp.asarray(random_array(rng, x.shape, F32))
    wh = jnp.asarray(random_array(rng, x.shape, F32))

    def loss(fn):
        def f(x, r, g, b):
            y, h = fn(kind, has_beta, zc, x, r, g, b)
            return jnp.sum(y.astype(F32) * wy) + jnp.sum(h.astype(F32) * wh)

        return f

    got = jax.jit(jax.grad(loss(_call), argnums=(0, 1, 2, 3)))(x, r, g, b)
    want = jax.grad(loss(_plain), argnums=(0, 1, 2, 3))(x, r, g, b)
    for name, a, w in zip(("x", "residual", "gamma", "beta"), got, want):
        assert a.dtype == w.dtype, name
        a64, w64 = np.asarray(a, np.float64), np.asarray(w, np.float64)
        tol = 4 * max(_eps(a.dtype), _eps(xd)) * (1.0 + np.abs(w64).max())
        assert np.abs(a64 - w64).max() <= tol, (name, np.abs(a64 - w64).max(), tol)
    if not has_beta:
        np.testing.assert_array_equal(np.asarray(got[3]), 0.0)  # beta never reached y
    # d_x = d_residual: one value, in each argument's dtype.
    np.testing.assert_array_equal(np.asarray(got[0], np.float32), np.asarray(got[1].astype(xd), np.float32))


def test_backward_is_one_kernel_and_oracle(rng):
    x, r, g, b = _inputs(rng, (50, 64), F32, F32, False)
    dy = jnp.asarray(random_array(rng, x.shape, F32))
    dh = jnp.asarray(random_array(rng, x.shape, F32))
    (y, h), vjp = jax.vjp(lambda *a: add_layer_norm(*a), x, r, g, b)
    dx, dr, dg, db = vjp((dy, dh))
    want = jax_lngb.add_norm_backward_ref(dy, dh, h, g)
    for got, w in zip((dx, dg, db), want):
        np.testing.assert_allclose(np.asarray(got, np.float64), w, rtol=2e-5, atol=2e-5)
    hlo = jax.jit(jax.grad(lambda *a: jnp.sum(add_layer_norm(*a)[0]), (0, 1, 2, 3))).lower(x, r, g, b).as_text()
    assert hlo.count("jax_lngb_add_layer_norm_backward") == 1
    assert hlo.count("jax_lngb_add_layer_norm_forward") == 1


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_forward_mode_and_higher_order(rng, kind):
    x, r, g, b = _inputs(rng, (3, 12), F32, F32, True)
    has_beta = kind == "layer"
    f = lambda *a: _call(kind, has_beta, True, *a)
    p = lambda *a: _plain(kind, has_beta, True, *a)
    ts = [jnp.asarray(random_array(rng, a.shape, F32)) for a in (x, r, g, b)]
    _, t_got = jax.jvp(f, (x, r, g, b), tuple(ts))
    _, t_want = jax.jvp(p, (x, r, g, b), tuple(ts))
    for a, w in zip(t_got, t_want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(w), rtol=1e-4, atol=1e-4)

    def inner(fn):
        return lambda x, r, g, b: jnp.sum(jnp.sin(fn(x, r, g, b)[0]) + fn(x, r, g, b)[1] ** 2)

    def outer(fn):
        def h(x, r, g, b):
            gx, gr, gg, _ = jax.grad(inner(fn), (0, 1, 2, 3))(x, r, g, b)
            return jnp.sum(gx**2) + jnp.sum(gr * gg[None])

        return h

    got = jax.grad(outer(f), (0, 1, 2, 3))(x, r, g, b)
    want = jax.grad(outer(p), (0, 1, 2, 3))(x, r, g, b)
    for a, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(w), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_vmap(rng, kind):
    has_beta = kind == "layer"
    x, r, g, b = _inputs(rng, (5, 6, 32), F32, F32, False)
    f = lambda *a: _call(kind, has_beta, False, *a)
    # Shared parameters: more rows.
    y, h = jax.vmap(f, in_axes=(0, 0, None, None))(x, r, g, b)
    y1, h1 = f(x, r, g, b)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(y1))
    np.testing.assert_array_equal(np.asarray(h), np.asarray(h1))
    # Mapped parameters: one problem per element, and per-element gradients.
    gs = jnp.stack([g * (1 + 0.1 * i) for i in range(5)])
    bs = jnp.stack([b + i for i in range(5)])
    loss = lambda x, r, g, b: jnp.sum(f(x, r, g, b)[0] ** 2) + jnp.sum(f(x, r, g, b)[1])
    got = jax.jit(jax.vmap(jax.grad(loss, (0, 1, 2, 3))))(x, r, gs, bs)
    for i in range(5):
        want = jax.grad(loss, (0, 1, 2, 3))(x[i], r[i], gs[i], bs[i])
        for a, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(a[i]), np.asarray(w), rtol=1e-5, atol=1e-5)
    # Shared parameters under vmap(grad): per-element gradients too.
    got = jax.vmap(jax.grad(loss, (2, 3)), in_axes=(0, 0, None, None))(x, r, g, b)
    want = jax.grad(loss, (2, 3))(x[2], r[2], g, b)
    for a, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(a[2]), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_export_lists_targets(rng):
    targets = jax_lngb.export.custom_call_targets()
    for t in (
        "jax_lngb_add_layer_norm_forward",
        "jax_lngb_add_layer_norm_backward",
        "jax_lngb_add_rms_norm_forward",
        "jax_lngb_add_rms_norm_backward",
    ):
        assert t in targets
    x, r, g, b = _inputs(rng, (4, 16), F32, F32, False)
    f = jax.grad(lambda x, r: jnp.sum(add_layer_norm(x, r, g, b)[0] ** 2), (0, 1))
    exp = jax_lngb.export.export(jax.jit(f))(x, r)
    back = jax.export.deserialize(exp.serialize())
    for a, w in zip(back.call(x, r), f(x, r)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(w))


_DIGEST = textwrap.dedent("""
    import hashlib, json, numpy as np, jax, jax.numpy as jnp, jax_lngb
    rng = np.random.default_rng(3)
    out = {}
    for shape in ((6000, 96), (3, 700, 200)):
        x = jnp.asarray(rng.standard_normal(shape), jnp.bfloat16)
        r = jnp.asarray(rng.standard_normal(shape), jnp.float32)
        g = jnp.asarray(rng.standard_normal(shape[-1:]), jnp.float32)
        b = jnp.asarray(rng.standard_normal(shape[-1:]), jnp.float32)
        for name, f in (("ln", lambda x, r, g: jax_lngb.add_layer_norm(x, r, g, b)),
                        ("rms", lambda x, r, g: jax_lngb.add_rms_norm(x, r, g))):
            loss = lambda x, r, g: jnp.sum(f(x, r, g)[0].astype(jnp.float32) ** 2) + jnp.sum(f(x, r, g)[1])
            h = hashlib.sha256()
            for a in (*f(x, r, g), *jax.jit(jax.grad(loss, (0, 1, 2)))(x, r, g)):
                h.update(np.asarray(a).tobytes())
            out[f"{name}-{shape}"] = h.hexdigest()
    print(json.dumps(out))
""")


def test_bits_do_not_depend_on_threads():
    digests = []
    for threads in ("1", "4"):
        proc = run_python(
            _DIGEST, env={"JAX_LNGB_NUM_THREADS": threads, "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true"}
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        digests.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert digests[0] == digests[1]


_SHARDED = textwrap.dedent("""
    import json, numpy as np, jax, jax.numpy as jnp, jax_lngb
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.standard_normal((16, 8, 64)), jnp.float32)
    r = jnp.asarray(rng.standard_normal((16, 8, 64)), jnp.float32)
    g = jnp.asarray(rng.standard_normal(64), jnp.float32)
    b = jnp.asarray(rng.standard_normal(64), jnp.float32)
    out = {}
    for name, f in (("ln", lambda x, r, g, b: jax_lngb.add_layer_norm(x, r, g, b)),
                    ("rms", lambda x, r, g, b: jax_lngb.add_rms_norm(x, r, g))):
        loss = lambda x, r, g, b: jnp.sum(f(x, r, g, b)[0] ** 2) + jnp.sum(jnp.sin(f(x, r, g, b)[1]))
        step = jax.jit(jax.grad(loss, (0, 1, 2, 3)))
        rows = NamedSharding(mesh, P("data"))
        rep = NamedSharding(mesh, P())
        args = (jax.device_put(x, rows), jax.device_put(r, rows), jax.device_put(g, rep), jax.device_put(b, rep))
        hlo = step.lower(*args).compile().as_text()
        got = step(*args)
        out[name] = {"all-gather": hlo.count("all-gather"), "all-reduce": hlo.count("all-reduce"),
                     "grads": [np.asarray(a).tolist() for a in got]}
    print(json.dumps(out))
""")


def test_sharded_rows_need_no_gather(rng):
    proc = run_python(_SHARDED, env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    x = np.random.default_rng(5)
    xs = [jnp.asarray(x.standard_normal((16, 8, 64)), F32) for _ in range(2)]
    g, b = (jnp.asarray(x.standard_normal(64), F32) for _ in range(2))
    for name, f in (
        ("ln", lambda x, r, g, b: add_layer_norm(x, r, g, b)),
        ("rms", lambda x, r, g, b: add_rms_norm(x, r, g)),
    ):
        assert res[name]["all-gather"] == 0, name
        assert res[name]["all-reduce"] >= 1, name  # the parameter sums
        loss = lambda x, r, g, b: jnp.sum(f(x, r, g, b)[0] ** 2) + jnp.sum(jnp.sin(f(x, r, g, b)[1]))
        want = jax.grad(loss, (0, 1, 2, 3))(*xs, g, b)
        for a, w in zip(res[name]["grads"], want):
            np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(w), rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------ hostile inputs


@pytest.mark.parametrize(
    "args, kw, err, match",
    [
        ((np.ones((4, 8)), np.ones((4, 9)), np.ones(8)), {}, ValueError, "residual must have the shape of x"),
        ((np.ones((4, 8)), np.ones((3, 8)), np.ones(8)), {}, ValueError, "residual"),
        ((np.ones((4, 8), np.int32), np.ones((4, 8)), np.ones(8)), {}, TypeError, "x must have dtype"),
        (
            (np.ones((4, 8), np.float32), np.ones((4, 8), np.int8), np.ones(8)),
            {},
            TypeError,
            "residual must have dtype",
        ),
        (
            (np.ones((4, 8), np.float32), np.ones((4, 8), np.float32), np.ones(7, np.float32)),
            {},
            ValueError,
            "gamma must have shape",
        ),
        (
            (np.ones((4, 8), np.float32), np.ones((4, 8), np.float32), np.ones(8, np.float32), np.ones(3, np.float32)),
            {},
            ValueError,
            "beta must have shape",
        ),
        (
            (np.ones((4, 8), np.float32), np.ones((4, 8), np.float32), np.ones(8, np.int32)),
            {},
            TypeError,
            "gamma must have dtype",
        ),
        (
            (np.ones((4, 8), np.float32), np.ones((4, 8), np.float32), np.ones(8, np.float32)),
            {"epsilon": -1.0},
            ValueError,
            "epsilon",
        ),
        (
            (np.ones((4, 8), np.float32), np.ones((4, 8), np.float32), np.ones(8, np.float32)),
            {"zero_centered_gamma": 1},
            TypeError,
            "zero_centered_gamma must be a bool",
        ),
        ((np.float32(1.0), np.float32(1.0), np.ones(1, np.float32)), {}, ValueError, "rank"),
    ],
)
def test_bad_arguments_name_the_argument(args, kw, err, match):
    with pytest.raises(err, match=match):
        jax.jit(lambda *a: add_layer_norm(*a, **kw))(*args)
    if len(args) == 3:
        with pytest.raises(err, match=match):
            add_rms_norm(*args, **kw)


def test_bad_primitive_binds_fail_at_trace_time():
    x = jnp.ones((4, 8), F32)
    with pytest.raises(ValueError, match="kind"):
        jax_lngb.add_norm_forward_p.bind(
            x, x, jnp.ones(8), kind="batch", epsilon=1e-5, zero_centered=False, has_beta=False, batch_dims=0
        )
    with pytest.raises(ValueError, match="no beta"):
        jax_lngb.add_norm_forward_p.bind(
            x, x, jnp.ones(8), jnp.ones(8), kind="rms", epsilon=1e-5, zero_centered=False, has_beta=True, batch_dims=0
        )
    with pytest.raises(TypeError, match="parameter operands"):
        jax_lngb.add_norm_forward_p.bind(
            x, x, jnp.ones(8), kind="layer", epsilon=1e-5, zero_centered=False, has_beta=True, batch_dims=0
        )


def test_empty_and_nonfinite_rows():
    y, h = add_layer_norm(jnp.zeros((0, 8), F32), jnp.zeros((0, 8), F32), jnp.ones(8, F32))
    assert y.shape == h.shape == (0, 8)
    g = jax.grad(lambda r: jnp.sum(add_rms_norm(jnp.zeros((0, 8)), r, jnp.ones(8))[0]))(jnp.zeros((0, 8)))
    assert g.shape == (0, 8)
    x = jnp.asarray([[1.0, np.nan, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]], F32)
    y, h = add_layer_norm(x, jnp.ones_like(x), jnp.ones(4, F32))
    assert np.isnan(np.asarray(y[0])).all() and np.isfinite(np.asarray(y[1])).all()
