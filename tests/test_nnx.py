"""jax_lngb.nnx.LayerNorm against flax.nnx.LayerNorm on the same state:
constructor, state tree, outputs, gradients, dtype rules (including the
promotion newer Flax releases apply first), a jitted training step, what it
leaves to Flax, and the import error when Flax is missing."""

from __future__ import annotations

import functools
import importlib
import inspect
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from norm_reference import (
    BF16,
    CUSTOM_CALL,
    F32,
    assert_close,
    assert_same_training,
    check_against_reference,
    data,
    layer_norm_reference,
    random_like,
    train,
)

import jax_lngb
import jax_lngb.nnx as jn

H = 32


def _pair(**kwargs):
    """Flax's LayerNorm (two-pass variance: the same math) and the drop-in,
    holding the same random state."""
    theirs = nnx.LayerNorm(H, use_fast_variance=False, rngs=nnx.Rngs(0), **kwargs)
    nnx.update(theirs, random_like(nnx.state(theirs)))
    ours = jn.LayerNorm(H, rngs=nnx.Rngs(1), **kwargs)
    nnx.update(ours, nnx.state(theirs))  # an nnx checkpoint loads unchanged
    return theirs, ours


@functools.partial(jax.jit, static_argnums=0)
def _loss_and_grads(graphdef, state, x, ct):
    def loss(state, x):
        return jnp.sum(nnx.merge(graphdef, state)(x).astype(F32) * ct)

    y = nnx.merge(graphdef, state)(x)
    g_state, g_x = jax.grad(loss, argnums=(0, 1))(state, x)
    return y, g_state, g_x


def _run(module, x, ct):
    graphdef, state = nnx.split(module)
    y, g, g_x = _loss_and_grads(graphdef, state, x, ct)
    return y, {k: v for k, v in nnx.to_flat_state(g)}, g_x


def _flat(state):
    return {k: v for k, v in nnx.to_flat_state(state)}


# ---------------------------------------------------------- the interface


def test_is_an_nnx_layer_norm_with_the_same_constructor_and_state():
    assert issubclass(jn.LayerNorm, nnx.LayerNorm)
    assert inspect.signature(jn.LayerNorm.__init__) == inspect.signature(nnx.LayerNorm.__init__)
    defaults = {k: p.default for k, p in inspect.signature(jn.LayerNorm.__init__).parameters.items()}
    assert defaults["epsilon"] == 1e-6 and defaults["dtype"] is None and defaults["param_dtype"] == F32
    theirs = nnx.LayerNorm(H, rngs=nnx.Rngs(0), scale_init=nnx.initializers.normal(1.0))
    ours = jn.LayerNorm(H, rngs=nnx.Rngs(0), scale_init=nnx.initializers.normal(1.0))
    flat_t, flat_o = _flat(nnx.state(theirs)), _flat(nnx.state(ours))
    assert set(flat_o) == set(flat_t) == {("scale",), ("bias",)}
    for k in flat_t:
        assert type(flat_o[k]) is type(flat_t[k]) is nnx.Param
        np.testing.assert_array_equal(flat_o[k][...], flat_t[k][...])
    assert jax_lngb.nnx is jn


def test_graphdef_of_the_drop_in_merges_with_a_flax_state():
    theirs, _ = _pair()
    x = data((4, H), F32)
    graphdef, _ = nnx.split(jn.LayerNorm(H, rngs=nnx.Rngs(5)))
    ours = nnx.merge(graphdef, nnx.state(theirs))
    assert isinstance(ours, jn.LayerNorm)
    want = theirs(x)
    assert_close(ours(x), want, result_dtype=F32, scale=np.abs(want).max(), what="output")


# ------------------------------------------------- outputs and gradients

# (input dtype, param_dtype, dtype)
DTYPE_CASES = [
    (F32, F32, None),
    (BF16, F32, None),  # -> f32
    (BF16, BF16, None),  # -> bf16
    (F32, F32, BF16),  # -> bf16; with promotion, x and parameters are cast to bf16 first
    (BF16, F32, BF16),
]
DTYPE_IDS = ["f32", "bf16-x", "bf16-all", "f32-x-bf16-out", "bf16-x-bf16-out"]


@pytest.mark.parametrize("x_dtype,param_dtype,dtype", DTYPE_CASES, ids=DTYPE_IDS)
def test_outputs_and_gradients_match_nnx(x_dtype, param_dtype, dtype):
    theirs, ours = _pair(param_dtype=param_dtype, dtype=dtype)
    x = data((2, 6, H), x_dtype)
    out_dtype = theirs(x).dtype
    ct = data(x.shape, out_dtype, seed=5, std=1.0)
    scale, bias = theirs.scale[...], theirs.bias[...]
    compute_dtype = None
    promote = getattr(theirs, "promote_dtype", None)
    if promote is not None:  # newer Flax: x and the parameters promoted together first
        x_eff, scale, bias = promote((x, scale, bias), dtype=dtype)
        compute_dtype = x_eff.dtype
    else:
        x_eff = x
    ref = layer_norm_reference(x_eff, scale, bias, ct, 1e-6)
    dtypes = dict(out_dtype=out_dtype, param_dtype=param_dtype, x_dtype=x_dtype, compute_dtype=compute_dtype)

    y, g, g_x = _run(ours, x, ct)
    check_against_reference(y, g[("scale",)][...], g[("bias",)][...], g_x, ref, **dtypes)
    y, g, g_x = _run(theirs, x, ct)  # the oracle is nnx's semantics
    check_against_reference(
        y,
        g[("scale",)][...],
        g[("bias",)][...],
        g_x,
        ref,
        **dtypes,
        double_rounded_dx=np.dtype(x_eff.dtype) != np.dtype(F32),
    )


def test_other_reduction_and_feature_axes_match_nnx():
    x = data((3, 6, 8), F32)
    kw = dict(reduction_axes=(1, 2), feature_axes=(1, 2))
    theirs = nnx.LayerNorm(48, use_fast_variance=False, rngs=nnx.Rngs(0), **kw)
    nnx.update(theirs, random_like(nnx.state(theirs)))
    ours = jn.LayerNorm(48, rngs=nnx.Rngs(0), **kw)
    nnx.update(ours, nnx.state(theirs))
    ct = data(x.shape, F32, seed=5, std=1.0)
    (y_t, g_t, gx_t), (y_o, g_o, gx_o) = _run(theirs, x, ct), _run(ours, x, ct)
    assert_close(y_o, y_t, result_dtype=F32, scale=np.abs(y_t).max(), what="output")
    assert_close(gx_o, gx_t, result_dtype=F32, scale=np.abs(gx_t).max(), what="d x")
    for k in g_t:
        assert_close(g_o[k][...], g_t[k][...], result_dtype=F32, scale=3 * 4 * np.abs(ct).max(), what=str(k))


def test_without_scale_and_bias():
    theirs, ours = _pair(use_scale=False, use_bias=False)
    assert _flat(nnx.state(ours)) == {}
    x = data((4, H), F32)
    ct = data(x.shape, F32, seed=5, std=1.0)
    ref = layer_norm_reference(x, None, None, ct, 1e-6)
    y, g, g_x = _run(ours, x, ct)
    assert g == {}
    check_against_reference(y, None, None, g_x, ref, out_dtype=F32, param_dtype=F32, x_dtype=F32)


# -------------------------------------------------------------- training


class _MLP(nnx.Module):
    def __init__(self, norm, dtype, rngs):
        self.dense1 = nnx.Linear(8, H, dtype=dtype, rngs=rngs)
        self.norm = norm(H, dtype=dtype, rngs=rngs)
        self.dense2 = nnx.Linear(H, 4, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        return self.dense2(nnx.gelu(self.norm(self.dense1(x))))


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_jitted_training_step_follows_nnx(dtype):
    batches = [(data((16, 8), F32, seed=s, std=1.0), data((16, 4), F32, seed=100 + s, std=1.0)) for s in range(4)]
    theirs = _MLP(functools.partial(nnx.LayerNorm, use_fast_variance=False), dtype, nnx.Rngs(0))
    ours = _MLP(jn.LayerNorm, dtype, nnx.Rngs(1))
    nnx.update(ours, nnx.state(theirs))  # the Flax model's checkpoint
    init = nnx.state(theirs)

    def loss_of(model):
        graphdef = nnx.graphdef(model)
        return lambda state, x, y: jnp.mean(jnp.square(nnx.merge(graphdef, state)(x).astype(F32) - y))

    p_t, loss_t, _ = train(loss_of(theirs), init, batches)
    p_o, loss_o, text = train(loss_of(ours), init, batches)
    assert CUSTOM_CALL in text
    assert_same_training(p_o, p_t, init, loss_o, loss_t, dtype)


# ------------------------------------- what the kernel leaves to Flax


def test_options_the_kernel_does_not_serve_run_flax():
    # Each gives Flax's own result (or Flax's own error), bit for bit.
    x = data((3, 6, H), F32, std=1.0)
    cases = [
        (dict(num_features=6, reduction_axes=-1, feature_axes=1), {}),
        (dict(num_features=H), dict(mask=jnp.asarray(np.arange(x.size).reshape(x.shape) % 3 > 0))),
        (dict(num_features=H, param_dtype=jnp.complex64), {}),
    ]
    for kwargs, call in cases:
        want = nnx.LayerNorm(rngs=nnx.Rngs(0), **kwargs)(x, **call)
        got = jn.LayerNorm(rngs=nnx.Rngs(0), **kwargs)(x, **call)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(Exception) as theirs:  # a scale that does not fit x
        nnx.LayerNorm(H + 1, rngs=nnx.Rngs(0))(x)
    with pytest.raises(type(theirs.value)):
        jn.LayerNorm(H + 1, rngs=nnx.Rngs(0))(x)


def test_missing_flax_raises_a_clear_import_error(monkeypatch):
    for name in [m for m in sys.modules if m == "flax" or m.startswith("flax.")]:
        monkeypatch.setitem(sys.modules, name, None)  # None: "import fails"
    monkeypatch.delitem(sys.modules, "jax_lngb.nnx")
    for name in [m for m in sys.modules if m.startswith("jax_lngb._integrations.")]:
        monkeypatch.delitem(sys.modules, name)  # the modules behind it, imported afresh
    monkeypatch.delattr(jax_lngb, "nnx")
    with pytest.raises(ImportError, match=r"jax_lngb\.nnx needs Flax.*pip install 'jax_lngb\[flax\]'"):
        importlib.import_module("jax_lngb.nnx")
    with pytest.raises(ImportError, match=r"jax_lngb\[flax\]"):
        jax_lngb.nnx  # noqa: B018 - the lazy attribute gives the same error
