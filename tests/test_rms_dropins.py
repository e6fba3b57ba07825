"""The RMSNorm drop-ins (linen, nnx, Equinox) against the upstream classes on
the same parameters: attributes and constructors, parameter trees and
checkpoints, outputs and gradients against a float64 oracle (upstream's
meeting the same bounds), which calls take the kernel and which run
upstream's own code (bit for bit), nn.scan / nn.remat, jitted training, and
the nested-vmap Equinox case as one kernel call over all tokens."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import subprocess
import sys

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import enable_x64
from flax import nnx, serialization
from norm_reference import (
    BF16,
    F16,
    F32,
    assert_close,
    assert_same_training,
    data,
    exercises_dtypes,
    in_modes,
    promotion_fixture,  # noqa: F401 - the `promotion` fixture
    random_like,
    run_upstream,
    train,
)

from jax_lngb import equinox as je
from jax_lngb import flax as jflax
from jax_lngb import nnx as jnnx
from jax_lngb._integrations.flax_common import canonical_axes

FWD_TARGET, BWD_TARGET = "jax_lngb_rms_norm_forward", "jax_lngb_rms_norm_backward"


# ----------------------------------------------------------------- helpers


def rms_reference(x, scale, bias, ct, epsilon, red, feat):
    """float64 RMSNorm over the axes `red` of x (scale and bias over the
    axes `feat`, in Flax's [x.shape[a] for a in feat] layout, or None) and
    its VJP for `ct`, with the sums of term magnitudes the bounds need."""
    x, ct = np.asarray(x, np.float64), np.asarray(ct, np.float64)
    fshape = [x.shape[a] if a in feat else 1 for a in range(x.ndim)]
    s = np.ones(fshape) if scale is None else np.asarray(scale, np.float64).reshape(fshape)
    r = 1 / np.sqrt((x * x).mean(red, keepdims=True) + epsilon)
    xhat = x * r
    y = xhat * s + (0 if bias is None else np.asarray(bias, np.float64).reshape(fshape))
    dxhat = ct * s
    dx = r * (dxhat - xhat * (dxhat * xhat).mean(red, keepdims=True))
    dx_terms = r * (np.abs(dxhat) + np.abs(xhat) * np.abs(dxhat * xhat).mean(red, keepdims=True))
    other = tuple(a for a in range(x.ndim) if a not in feat)
    return dict(
        y=y,
        y_terms=np.abs(xhat * s) + (0 if bias is None else np.abs(bias).reshape(fshape)),
        d_scale=(ct * xhat).sum(other),
        d_scale_terms=np.abs(ct * xhat).sum(other),
        d_bias=ct.sum(other),
        d_bias_terms=np.abs(ct).sum(other),
        d_x=dx,
        d_x_terms=dx_terms,
    )


def check(y, g_scale, g_x, ref, *, out_dtype, param_dtype, x_dtype, g_bias=None, rounded_to=None, what=""):
    """Output and gradients within the dtype bounds of the float64 oracle."""
    assert_close(y, ref["y"], result_dtype=out_dtype, input_dtype=x_dtype, scale=ref["y_terms"], what=what + " y")
    if g_scale is not None:
        assert_close(
            g_scale,
            ref["d_scale"],
            result_dtype=param_dtype,
            input_dtype=out_dtype,
            rounded_to=rounded_to,
            scale=ref["d_scale_terms"],
            what=what + " d scale",
        )
    if g_bias is not None:
        assert_close(
            g_bias,
            ref["d_bias"],
            result_dtype=param_dtype,
            input_dtype=out_dtype,
            rounded_to=rounded_to,
            scale=ref["d_bias_terms"],
            what=what + " d bias",
        )
    if g_x is not None:
        # One more rounding allowed where dx passes through a 16-bit value
        # on its way (Flax's promote, or the cast back to a 16-bit input).
        narrow = rounded_to or x_dtype
        assert_close(
            g_x,
            ref["d_x"],
            result_dtype=x_dtype,
            input_dtype=narrow if narrow != F32 else out_dtype,
            rounded_to=rounded_to,
            scale=ref["d_x_terms"],
            what=what + " d x",
        )


def kernel_in(fn, *args) -> bool:
    """Whether tracing fn(*args) binds rms_norm's forward primitive."""
    return "rms_norm_forward" in str(jax.make_jaxpr(fn)(*args))


def assert_identical(a, b, what=""):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b), what
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        assert np.dtype(u.dtype) == np.dtype(v.dtype), what
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v), err_msg=what)


def test_import_jax_lngb_imports_neither_flax_nor_equinox():
    code = (
        "import sys, jax_lngb; bad = [m for m in sys.modules if m.split('.')[0] in ('flax', 'equinox') "
        "or m.startswith('jax_lngb._integrations')]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "module,upstream,pip", [("linen", "flax", "flax"), ("nnx", "flax", "flax"), ("equinox", "equinox", "equinox")]
)
def test_missing_upstream_raises_a_clear_import_error(monkeypatch, module, upstream, pip):
    # The modules that define the RMSNorm drop-ins, imported afresh without
    # their upstream library.
    for name in [m for m in sys.modules if m == upstream or m.startswith(upstream + ".")]:
        monkeypatch.setitem(sys.modules, name, None)  # None: "import fails"
    for name in [m for m in sys.modules if m.startswith("jax_lngb._integrations.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match=rf"needs \w+.*pip install 'jax_lngb\[{pip}\]'"):
        importlib.import_module(f"jax_lngb._integrations.{module}")


# ================================================================== linen

# One batch, four steps: the loss must fall (the trajectories are compared).
_BATCHES = [(data((16, 8), F32, std=1.0), data((16, 4), F32, seed=100, std=1.0))] * 4


def test_linen_is_flax_rmsnorm_with_the_same_attributes_and_name():
    assert issubclass(jflax.RMSNorm, nn.RMSNorm)
    ours = {f.name: f.default for f in dataclasses.fields(jflax.RMSNorm)}
    assert ours == {f.name: f.default for f in dataclasses.fields(nn.RMSNorm)}
    assert ours["epsilon"] == 1e-6 and ours["dtype"] is None and ours["param_dtype"] == F32


class _MLP(nn.Module):
    """Dense -> RMSNorm -> gelu -> Dense, the norm class a field."""

    norm: type
    dtype: object = None
    norm_kwargs: tuple = ()

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(32, dtype=self.dtype)(x)
        h = self.norm(dtype=self.dtype, **dict(self.norm_kwargs))(h)
        return nn.Dense(4, dtype=self.dtype)(nn.gelu(h))


def test_linen_init_gives_the_same_parameter_tree():
    x = data((4, 8), F32)
    kw = (("scale_init", nn.initializers.normal(1.0)),)  # random: equal values need equal names/shapes/order
    theirs = _MLP(nn.RMSNorm, norm_kwargs=kw).init(jax.random.key(3), x)
    ours = _MLP(jflax.RMSNorm, norm_kwargs=kw).init(jax.random.key(3), x)
    assert set(ours["params"]) == {"Dense_0", "RMSNorm_0", "Dense_1"}
    assert_identical(ours, theirs)


def test_linen_checkpoints_load_both_ways():
    x = data((4, 8), F32, std=1.0)
    theirs, ours = _MLP(nn.RMSNorm), _MLP(jflax.RMSNorm)
    v_t = random_like(theirs.init(jax.random.key(0), x))
    restored = serialization.from_bytes(ours.init(jax.random.key(9), x), serialization.to_bytes(v_t))
    assert_identical(restored, v_t)
    want = theirs.apply(v_t, x)
    assert_close(ours.apply(restored, x), want, result_dtype=F32, scale=np.abs(want).max(), what="model")
    back = serialization.from_bytes(theirs.init(jax.random.key(9), x), serialization.to_bytes(restored))
    assert_identical(back, v_t)


def _linen_loss_and_grads(module, variables, x, ct):
    def loss(v, x):
        return jnp.sum(module.apply(v, x).astype(F32) * ct.astype(F32))

    g_v, g_x = jax.grad(loss, argnums=(0, 1))(variables, x)
    return module.apply(variables, x), g_v.get("params", {}).get("scale"), g_x


# (id, attributes, x dtype, x shape): every one is served by the kernel.
LINEN_CASES = [
    ("f32", {}, F32, (2, 6, 32)),
    ("bf16-x", {}, BF16, (2, 6, 32)),  # f32 scale: output f32
    ("bf16-all", dict(param_dtype=BF16), BF16, (2, 6, 32)),
    ("f32-x-bf16-out", dict(dtype=BF16), F32, (2, 6, 32)),
    ("bf16-x-bf16-out", dict(dtype=BF16), BF16, (2, 6, 32)),
    ("f16-all", dict(param_dtype=F16, dtype=F16), F16, (2, 6, 32)),
    ("no-scale", dict(use_scale=False), F32, (2, 6, 32)),
    ("eps-slow-var", dict(epsilon=1e-2, use_fast_variance=False), F32, (2, 6, 32)),
    ("no-force-f32", dict(force_float32_reductions=False), F32, (2, 6, 32)),
    ("red12", dict(reduction_axes=(1, 2)), F32, (3, 6, 8)),
    ("red-2-1-feat-2-1", dict(reduction_axes=(-2, -1), feature_axes=(-2, -1)), BF16, (3, 6, 8)),
    ("red02-feat0", dict(reduction_axes=(0, 2), feature_axes=0), F32, (3, 6, 8)),
]


@pytest.mark.parametrize(
    "promotion,attrs,x_dtype,shape",
    indirect=["promotion"],
    argvalues=in_modes(
        [c[1:] for c in LINEN_CASES], [c[0] for c in LINEN_CASES], also=lambda c: exercises_dtypes(c[0], c[1])
    ),
)
def test_linen_outputs_and_gradients_match_flax(attrs, x_dtype, shape, promotion):
    x = data(shape, x_dtype, std=1.0)
    theirs, ours = nn.RMSNorm(**attrs), jflax.RMSNorm(**attrs)
    refused, variables = run_upstream(
        promotion, lambda: theirs.init(jax.random.key(0), x), lambda: ours.init(jax.random.key(0), x)
    )
    if refused:  # strict promotion: Flax's own error, from ours too
        return
    variables = random_like(variables)
    assert_identical(random_like(ours.init(jax.random.key(0), x)), variables, "parameters")
    assert kernel_in(lambda v: ours.apply(v, x), variables)
    out_dtype = theirs.apply(variables, x).dtype
    ct = data(shape, out_dtype, seed=5, std=1.0)
    red = canonical_axes(attrs.get("reduction_axes", -1), x.ndim)
    feat = canonical_axes(attrs.get("feature_axes", -1), x.ndim)
    scale = variables["params"]["scale"] if variables else None
    ref = rms_reference(x, scale, None, ct, attrs.get("epsilon", 1e-6), red, feat)
    dt = dict(out_dtype=out_dtype, param_dtype=attrs.get("param_dtype", F32), x_dtype=x_dtype)
    step = jax.jit(_linen_loss_and_grads, static_argnums=0)
    for name, module in (("ours", ours), ("flax", theirs)):
        y, g_scale, g_x = step(module, variables, x, ct)
        assert (g_scale is None) == (scale is None)
        check(y, g_scale, g_x, ref, **dt, what=name)


def test_linen_integer_input_takes_the_kernel_with_a_float32_result():
    x = jnp.arange(-12, 12, dtype=jnp.int32).reshape(2, 12)
    variables = random_like(nn.RMSNorm().init(jax.random.key(0), x))
    assert kernel_in(lambda v: jflax.RMSNorm().apply(v, x), variables)
    want = nn.RMSNorm().apply(variables, x)
    assert_close(jflax.RMSNorm().apply(variables, x), want, result_dtype=F32, scale=np.abs(want), what="y")


def _declined_linen_cases():
    x = data((2, 3, 4), F32, std=1.0)
    return [
        ("feat-outside-red", dict(reduction_axes=-1, feature_axes=(-2, -1)), x, {}),
        ("feat-outside-red2", dict(reduction_axes=1), x, {}),
        ("mask", {}, x, dict(mask=jnp.asarray(np.arange(24).reshape(2, 3, 4) % 3 > 0))),
        ("bf16-stats", dict(force_float32_reductions=False, param_dtype=BF16), x.astype(BF16), {}),
        ("complex-scale", dict(param_dtype=jnp.complex64), x, {}),
        ("negative-eps", dict(epsilon=-1e-3), x, {}),
        ("bool-x", {}, x > 0, {}),
    ]


@pytest.mark.parametrize("case", _declined_linen_cases(), ids=lambda c: c[0])
def test_linen_options_the_kernel_does_not_serve_run_flax_bit_for_bit(case):
    _, attrs, x, kw = case
    theirs, ours = nn.RMSNorm(**attrs), jflax.RMSNorm(**attrs)
    y_t, v_t = theirs.init_with_output(jax.random.key(0), x, **kw)
    y_o, v_o = ours.init_with_output(jax.random.key(0), x, **kw)
    assert_identical((y_o, v_o), (y_t, v_t), str(attrs))
    assert not kernel_in(lambda v: ours.apply(v, x, **kw), v_o)


def test_linen_float64_and_axis_name_run_flax():
    with enable_x64():
        x = data((2, 8), F32, std=1.0).astype(jnp.float64)
        for attrs in ({}, dict(param_dtype=jnp.float64)):
            y_t, v_t = nn.RMSNorm(**attrs).init_with_output(jax.random.key(0), x)
            y_o, v_o = jflax.RMSNorm(**attrs).init_with_output(jax.random.key(0), x)
            assert_identical((y_o, v_o), (y_t, v_t), "float64")
            assert y_o.dtype == jnp.float64
            assert not kernel_in(lambda v: jflax.RMSNorm(**attrs).apply(v, x), v_o)
    # Statistics over a named (vmapped) axis: Flax's pmean.
    x = data((3, 2, 8), F32, std=1.0)
    variables = nn.RMSNorm().init(jax.random.key(0), x[0])
    outs = [
        jax.vmap(lambda r, m=m: m(axis_name="b").apply(variables, r), axis_name="b")(x)
        for m in (nn.RMSNorm, jflax.RMSNorm)
    ]
    np.testing.assert_array_equal(outs[0], outs[1])


def test_linen_invalid_axes_give_flax_s_error():
    x = data((3, 6, 8), F32)
    with pytest.raises(Exception) as theirs:
        nn.RMSNorm(reduction_axes=3).init(jax.random.key(0), x)
    with pytest.raises(type(theirs.value)):
        jflax.RMSNorm(reduction_axes=3).init(jax.random.key(0), x)


class _Block(nn.Module):
    norm: type

    @nn.compact
    def __call__(self, c, _):
        return nn.Dense(c.shape[-1])(self.norm()(c)), None


class _Stack(nn.Module):
    """Three scanned blocks, then a rematerialised norm."""

    norm: type

    @nn.compact
    def __call__(self, x):
        scan = nn.scan(_Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=3)
        h, _ = scan(norm=self.norm)(x, None)
        return nn.remat(self.norm)()(h)


def test_linen_under_scan_and_remat():
    x = data((4, 16), F32, std=1.0)
    theirs, ours = _Stack(nn.RMSNorm), _Stack(jflax.RMSNorm)
    variables = random_like(theirs.init(jax.random.key(0), x))
    assert_identical(random_like(ours.init(jax.random.key(0), x)), variables, "parameters")
    ct = data(x.shape, F32, seed=5, std=1.0)

    def run(model):
        loss = lambda v, x: jnp.sum(model.apply(v, x) * ct)
        return jax.jit(lambda v, x: (model.apply(v, x), jax.grad(loss, argnums=(0, 1))(v, x)))

    text = run(ours).lower(variables, x).as_text()
    assert FWD_TARGET in text and BWD_TARGET in text
    (y_t, (gv_t, gx_t)), (y_o, (gv_o, gx_o)) = run(theirs)(variables, x), run(ours)(variables, x)
    for a, b, what in [(y_o, y_t, "y"), (gx_o, gx_t, "dx")] + [
        (a, b, "d params") for a, b in zip(jax.tree_util.tree_leaves(gv_o), jax.tree_util.tree_leaves(gv_t))
    ]:
        assert_close(a, b, result_dtype=F32, scale=16 * np.abs(b).max(), what=what)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_linen_jitted_training_follows_flax(dtype):
    batches = _BATCHES
    theirs, ours = _MLP(nn.RMSNorm, dtype=dtype), _MLP(jflax.RMSNorm, dtype=dtype)
    init = theirs.init(jax.random.key(0), batches[0][0])

    def loss_of(model):
        return lambda p, x, y: jnp.mean(jnp.square(model.apply(p, x).astype(F32) - y))

    p_t, loss_t, _ = train(loss_of(theirs), init, batches)
    p_o, loss_o, text = train(loss_of(ours), init, batches)
    assert BWD_TARGET in text
    assert_same_training(p_o, p_t, init, loss_o, loss_t, dtype)


# ==================================================================== nnx


def test_nnx_is_flax_rmsnorm_with_the_same_constructor_and_state():
    assert issubclass(jnnx.RMSNorm, nnx.RMSNorm)
    assert inspect.signature(jnnx.RMSNorm) == inspect.signature(nnx.RMSNorm)
    kw = dict(scale_init=nnx.initializers.normal(1.0), rngs=nnx.Rngs(3))
    ours, theirs = jnnx.RMSNorm(16, **kw), nnx.RMSNorm(16, **dict(kw, rngs=nnx.Rngs(3)))
    assert_identical(nnx.state(ours), nnx.state(theirs))
    assert vars(ours).keys() == vars(theirs).keys()
    none = jnnx.RMSNorm(16, use_scale=False, rngs=nnx.Rngs(0))
    assert none.scale is None and not jax.tree_util.tree_leaves(nnx.state(none))


def _nnx_pair(features, **kw):
    theirs = nnx.RMSNorm(features, **kw, rngs=nnx.Rngs(0))
    ours = jnnx.RMSNorm(features, **kw, rngs=nnx.Rngs(1))
    nnx.update(theirs, random_like(nnx.state(theirs)))
    nnx.update(ours, nnx.state(theirs))  # an upstream state loads unchanged
    return theirs, ours


@jax.jit
def _nnx_loss_and_grads(graphdef, state, x, ct):
    def loss(s, x):
        return jnp.sum(nnx.merge(graphdef, s)(x).astype(F32) * ct.astype(F32))

    return nnx.merge(graphdef, state)(x), jax.grad(loss, argnums=(0, 1))(state, x)


NNX_CASES = [
    ("f32", 32, {}, F32, (2, 6, 32)),
    ("bf16-x", 32, {}, BF16, (2, 6, 32)),  # promoted with the f32 scale: f32 out
    ("bf16-all", 32, dict(param_dtype=BF16), BF16, (2, 6, 32)),
    ("f32-x-bf16-dtype", 32, dict(dtype=BF16), F32, (2, 6, 32)),  # x and scale promoted to bf16
    ("no-scale", 32, dict(use_scale=False), F32, (2, 6, 32)),
    ("red12", 8, dict(reduction_axes=(1, 2)), F32, (3, 6, 8)),
    ("red-2-1-feat-2-1", 48, dict(reduction_axes=(-2, -1), feature_axes=(-2, -1)), F32, (3, 6, 8)),
]


@pytest.mark.parametrize(
    "promotion,features,attrs,x_dtype,shape",
    indirect=["promotion"],
    argvalues=in_modes(
        [c[1:] for c in NNX_CASES], [c[0] for c in NNX_CASES], also=lambda c: exercises_dtypes(c[1], c[2])
    ),
)
def test_nnx_outputs_and_gradients_match_flax(features, attrs, x_dtype, shape, promotion):
    theirs, ours = _nnx_pair(features, **attrs)
    x = data(shape, x_dtype, std=1.0)
    if run_upstream(promotion, lambda: theirs(x), lambda: ours(x))[0]:
        return  # strict promotion: Flax's own error, from ours too
    assert kernel_in(lambda x: ours(x), x)
    out_dtype = theirs(x).dtype
    ct = data(shape, out_dtype, seed=5, std=1.0)
    red = canonical_axes(attrs.get("reduction_axes", -1), x.ndim)
    feat = canonical_axes(attrs.get("feature_axes", -1), x.ndim)
    scale = theirs.scale[...] if theirs.scale is not None else None
    # The oracle sees what Flax's promote_dtype hands the arithmetic.
    xr, sr = (x, scale) if "dtype" not in attrs else (x.astype(attrs["dtype"]), scale.astype(attrs["dtype"]))
    ref = rms_reference(xr, sr, None, ct, 1e-6, red, feat)
    dt = dict(
        out_dtype=out_dtype, param_dtype=attrs.get("param_dtype", F32), x_dtype=x_dtype, rounded_to=attrs.get("dtype")
    )
    for name, module in (("ours", ours), ("flax", theirs)):
        graphdef, state = nnx.split(module)
        y, (g_s, g_x) = _nnx_loss_and_grads(graphdef, state, x, ct)
        g_scale = g_s["scale"][...].reshape(ref["d_scale"].shape) if scale is not None else None
        check(y, g_scale, g_x, ref, **dt, what=name)


def test_nnx_custom_promote_dtype_is_used_on_the_kernel_path():
    def to_f16(args, dtype=None):
        return [None if a is None else jnp.asarray(a, F16) for a in args]

    theirs, ours = _nnx_pair(32, promote_dtype=to_f16)
    x = data((4, 32), F32, std=1.0)
    assert kernel_in(lambda x: ours(x), x)
    want, got = theirs(x), ours(x)
    assert got.dtype == want.dtype == F16
    assert_close(got, want, result_dtype=F16, scale=np.abs(np.asarray(want, np.float64)), what="y")


def test_nnx_options_the_kernel_does_not_serve_run_flax_bit_for_bit():
    x = data((2, 3, 4), F32, std=1.0)
    mask = jnp.asarray(np.arange(24).reshape(2, 3, 4) % 3 > 0)
    for features, attrs, kw in [
        (12, dict(reduction_axes=-1, feature_axes=(-2, -1)), {}),  # feature axes outside
        (4, {}, dict(mask=mask)),
        (4, dict(param_dtype=jnp.complex64), {}),
        (4, dict(epsilon=-1e-3), {}),
    ]:
        theirs, ours = _nnx_pair(features, **attrs)
        assert_identical(ours(x, **kw), theirs(x, **kw), str(attrs))
        assert not kernel_in(lambda x: ours(x, **kw), x)
    theirs, ours = _nnx_pair(4)
    assert_identical(ours(x, mask), theirs(x, mask), "positional mask")
    # A scale that does not fit the feature axes: Flax's own error.
    theirs, ours = _nnx_pair(5)
    with pytest.raises(Exception) as err:
        theirs(x)
    with pytest.raises(type(err.value)):
        ours(x)


def test_nnx_jitted_training_and_state_round_trip():
    class Net(nnx.Module):
        def __init__(self, norm, rngs):
            self.a, self.norm, self.b = nnx.Linear(8, 32, rngs=rngs), norm(32, rngs=rngs), nnx.Linear(32, 4, rngs=rngs)

        def __call__(self, x):
            return self.b(nnx.gelu(self.norm(self.a(x))))

    theirs, ours = Net(nnx.RMSNorm, nnx.Rngs(0)), Net(jnnx.RMSNorm, nnx.Rngs(7))
    g_t, init = nnx.split(theirs)
    g_o, s_o = nnx.split(ours)
    # A pure-dict checkpoint of the Flax model loads into ours.
    nnx.replace_by_pure_dict(s_o, nnx.to_pure_dict(init))
    assert_identical(s_o, init)
    batches = _BATCHES

    def loss_of(graphdef):
        return lambda s, x, y: jnp.mean(jnp.square(nnx.merge(graphdef, s)(x) - y))

    p_t, loss_t, _ = train(loss_of(g_t), init, batches)
    p_o, loss_o, text = train(loss_of(g_o), s_o, batches)
    assert BWD_TARGET in text
    assert_same_training(p_o, p_t, init, loss_o, loss_t, F32)


# ================================================================ Equinox


def test_equinox_is_eqx_rmsnorm_with_the_same_fields_and_constructor():
    assert issubclass(je.RMSNorm, eqx.nn.RMSNorm)
    assert inspect.signature(je.RMSNorm.__init__) == inspect.signature(eqx.nn.RMSNorm.__init__)
    assert [f.name for f in dataclasses.fields(je.RMSNorm)] == [f.name for f in dataclasses.fields(eqx.nn.RMSNorm)]
    for kw in ({}, dict(use_weight=False), dict(use_bias=False, dtype=BF16)):
        ours, theirs = je.RMSNorm((4, 8), **kw), eqx.nn.RMSNorm((4, 8), **kw)
        assert_identical(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs), str(kw))
        for f in dataclasses.fields(theirs):
            assert (getattr(ours, f.name) is None) == (getattr(theirs, f.name) is None), f.name
            if f.name not in ("weight", "bias"):
                assert getattr(ours, f.name) == getattr(theirs, f.name), f.name
    assert je.RMSNorm(8).eps == 1e-5 and je.RMSNorm(8).shape == (8,)


def _eqx_pair(shape, **kw):
    theirs = random_like(eqx.nn.RMSNorm(shape, **kw))
    return theirs, je.from_equinox(theirs)


@jax.jit
def _eqx_loss_and_grads(layer, x, ct):
    def loss(m, x):
        return jnp.sum(jax.vmap(m)(x).astype(F32) * ct.astype(F32))

    return jax.vmap(layer)(x), jax.grad(loss, argnums=(0, 1))(layer, x)


EQX_CASES = [
    ("f32", (32,), {}, F32),
    ("bf16", (32,), {}, BF16),
    ("bf16-weights", (32,), dict(dtype=BF16), BF16),
    ("f16-no-bias", (32,), dict(use_bias=False), F16),
    ("2d-shape", (4, 8), {}, F32),
    ("no-weight", (32,), dict(use_weight=False), BF16),
    ("neither", (32,), dict(use_weight=False, use_bias=False, eps=1e-2), F32),
]


# Under x64 Equinox's default parameter dtype changes: every case with
# parameters, one shape (the shape does not meet the dtype rules).
@pytest.mark.parametrize(
    "promotion,shape,attrs,x_dtype",
    indirect=["promotion"],
    argvalues=in_modes([c[1:] for c in EQX_CASES], [c[0] for c in EQX_CASES], also=lambda c: len(c[0]) == 1),
)
def test_equinox_vmap_outputs_and_gradients_match_equinox(shape, attrs, x_dtype, promotion):
    # Equinox casts explicitly: every case runs, and takes the kernel, under
    # strict promotion too. Under jax_enable_x64 Equinox's default parameter
    # dtype is float64; cast to float32 before use, as Equinox casts them.
    theirs, ours = _eqx_pair(shape, **attrs)
    x = data((6, *shape), x_dtype, std=1.0)
    assert kernel_in(jax.vmap(ours), x)
    ct = data(x.shape, x_dtype, seed=5, std=1.0)
    red = tuple(range(1, x.ndim))
    ref = rms_reference(x, theirs.weight, theirs.bias, ct, theirs.eps, red, red)
    params = [p for p in (theirs.weight, theirs.bias) if p is not None]
    p_dtype = params[0].dtype if params else F32
    if params:
        assert np.dtype(p_dtype) == np.dtype(attrs.get("dtype", jnp.float64 if promotion == "x64" else F32))
    # float64 parameter gradients are float32 sums, widened.
    via = F32 if np.dtype(p_dtype) == np.dtype(jnp.float64) else None
    for name, layer in (("ours", ours), ("equinox", theirs)):
        y, (g, g_x) = _eqx_loss_and_grads(layer, x, ct)
        check(
            y,
            g.weight,
            g_x,
            ref,
            g_bias=g.bias,
            out_dtype=x_dtype,
            param_dtype=p_dtype,
            x_dtype=x_dtype,
            rounded_to=via,
            what=name,
        )


def test_equinox_nested_vmap_is_one_kernel_call_over_all_tokens():
    # grad(vmap(vmap(layer))): one forward and one backward over all 3 * 5
    # tokens with the [16] weight as it is, dweight summed by the kernel.
    x = data((3, 5, 16), F32, std=1.0)
    ct = data(x.shape, F32, seed=5, std=1.0)
    grad = jax.grad(lambda m, x: jnp.sum(jax.vmap(jax.vmap(m))(x) * ct), argnums=(0, 1))
    for use_bias in (False, True):
        _, ours = _eqx_pair((16,), use_bias=use_bias)
        jaxpr = jax.make_jaxpr(grad)(ours, x).jaxpr
        kernels = [e for e in jaxpr.eqns if e.primitive.name.startswith("rms_norm")]
        assert [e.primitive.name for e in kernels] == ["rms_norm_forward", "rms_norm_backward"]
        for e in kernels:
            assert e.params["batch_dims"] == 0 and e.invars[0].aval.shape == (3, 5, 16)
            assert e.invars[-1].aval.shape == (16,)  # the weight, not one copy per token
        assert kernels[1].outvars[1].aval.shape == (16,)
        # Without a bias nothing [16] is broadcast; with one, the bias is added
        # outside the kernel (fused by XLA), and no broadcast feeds a kernel.
        bcast = [
            e.outvars[0]
            for e in jaxpr.eqns
            if e.primitive.name == "broadcast_in_dim" and e.invars[0].aval.shape == (16,)
        ]
        assert bool(bcast) == use_bias
        assert not any(v in bcast for e in kernels for v in e.invars)
        text = jax.jit(grad).lower(ours, x).as_text()
        assert re.findall(r"@(jax_lngb_\w+)\(", text) == [FWD_TARGET, BWD_TARGET]


def test_equinox_state_is_passed_through_and_key_ignored():
    theirs, ours = _eqx_pair((8,))
    x = data((8,), F32, std=1.0)
    state = {"count": jnp.ones(2)}
    y, s = ours(x, state, key=jax.random.key(0))
    assert s is state
    assert_close(y, theirs(x), result_dtype=F32, scale=np.abs(theirs(x)), what="y")
    assert_close(ours(x, key=jax.random.key(1)), theirs(x), result_dtype=F32, scale=np.abs(theirs(x)), what="y")
    assert kernel_in(lambda x: ours(x, state)[0], x)


def test_equinox_inputs_the_kernel_does_not_serve_run_equinox():
    theirs, ours = _eqx_pair((8,))
    xi = jnp.arange(-4, 4, dtype=jnp.int32) * 3  # the cast back truncates: Equinox's own
    assert_identical(ours(xi), theirs(xi), "int32")
    assert not kernel_in(ours, xi)
    with pytest.raises(ValueError, match="shape == x.shape"):
        ours(data((9,), F32))
    e_t, e_o = _eqx_pair((0,))
    assert_identical(e_o(jnp.zeros((0,))), e_t(jnp.zeros((0,))), "empty")
    with enable_x64():
        x = data((8,), F32, std=1.0).astype(jnp.float64)
        for kw in ({}, dict(dtype=jnp.float64)):
            theirs, ours = _eqx_pair((8,), **kw)
            assert_identical(ours(x), theirs(x), f"float64 {kw}")
            assert not kernel_in(ours, x)


class _EqxNet(eqx.Module):
    a: eqx.nn.Linear
    norm: eqx.nn.RMSNorm
    b: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.a, self.norm, self.b = eqx.nn.Linear(8, 32, key=k1), eqx.nn.RMSNorm(32), eqx.nn.Linear(32, 4, key=k2)

    def __call__(self, x):
        return self.b(jax.nn.gelu(self.norm(self.a(x))))


def _convert(tree):
    return jax.tree_util.tree_map(
        lambda n: je.from_equinox(n) if isinstance(n, eqx.nn.RMSNorm) else n,
        tree,
        is_leaf=lambda n: isinstance(n, eqx.nn.RMSNorm),
    )


def test_equinox_checkpoints_and_from_equinox(tmp_path):
    model = random_like(_EqxNet(jax.random.key(0)))
    path = tmp_path / "model.eqx"
    eqx.tree_serialise_leaves(path, model)
    like = eqx.tree_at(lambda m: m.norm, _EqxNet(jax.random.key(1)), je.RMSNorm(32))
    loaded = eqx.tree_deserialise_leaves(path, like)
    assert type(loaded.norm) is je.RMSNorm
    converted = _convert(model)
    assert type(converted.norm) is je.RMSNorm and je.from_equinox(converted.norm) is converted.norm
    assert_identical(jax.tree_util.tree_leaves(loaded), jax.tree_util.tree_leaves(model))
    assert_identical(jax.tree_util.tree_leaves(converted), jax.tree_util.tree_leaves(model))
    with pytest.raises(TypeError, match="equinox.nn.RMSNorm"):
        je.from_equinox(model.a)


def test_equinox_jitted_training_follows_equinox():
    net = _EqxNet(jax.random.key(0))
    theirs = eqx.tree_at(lambda m: m.norm, net, random_like(net.norm))
    ours = _convert(theirs)
    batches = _BATCHES

    def loss(m, x, y):
        return jnp.mean(jnp.square(jax.vmap(m)(x) - y))

    p_t, loss_t, _ = train(loss, theirs, batches)
    p_o, loss_o, text = train(loss, ours, batches)
    assert BWD_TARGET in text
    assert_same_training(p_o, p_t, theirs, loss_o, loss_t, F32)


def test_the_public_modules_export_the_rms_drop_ins():
    import equinox as _eqx

    import jax_lngb.equinox as jeqx
    import jax_lngb.flax as jflax
    import jax_lngb.nnx as jnnx

    assert issubclass(jflax.RMSNorm, nn.RMSNorm) and "RMSNorm" in jflax.__all__
    assert issubclass(jnnx.RMSNorm, nnx.RMSNorm) and "RMSNorm" in jnnx.__all__
    assert issubclass(jeqx.RMSNorm, _eqx.nn.RMSNorm) and "RMSNorm" in jeqx.__all__
    model = [_eqx.nn.RMSNorm(8), _eqx.nn.LayerNorm(8)]
    converted = jeqx.convert(model)
    assert isinstance(converted[0], jeqx.RMSNorm) and isinstance(converted[1], jeqx.LayerNorm)
    x = jnp.linspace(-1.0, 2.0, 8)
    np.testing.assert_allclose(converted[0](x), model[0](x), rtol=1e-6, atol=1e-6)
