"""jax_lngb.equinox.LayerNorm against equinox.nn.LayerNorm on the same
parameters: fields and constructor, outputs and gradients under jax.vmap
(parameter gradients summed over the batch, and per example under
vmap(grad)), what the vmapped backward lowers to, a jitted training step,
`convert`, checkpoints, and the import error when Equinox is missing."""

from __future__ import annotations

import importlib
import inspect
import re
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from norm_reference import (
    BF16,
    CUSTOM_CALL,
    F16,
    F32,
    assert_close,
    assert_same_training,
    check_against_reference,
    data,
    in_modes,
    layer_norm_reference,
    promotion_fixture,  # noqa: F401 - the `promotion` fixture
    random_like,
    train,
)

import jax_lngb
import jax_lngb.equinox as je

EPS = 1e-5  # Equinox's default


def _pair(shape, dtype=None, **kwargs):
    """Equinox's LayerNorm with random weight/bias and the drop-in holding
    the same arrays."""
    theirs = random_like(eqx.nn.LayerNorm(shape, dtype=dtype, **kwargs))
    return theirs, je.convert(theirs)


def _batch_loss(model, x, ct):
    return jnp.sum(jax.vmap(model)(x).astype(F32) * ct.astype(F32))


def _example_loss(model, x, ct):
    return jnp.sum(model(x).astype(F32) * ct.astype(F32))


@jax.jit
def _summed(model, x, ct):
    """jax.vmap(model) inside the loss: parameter gradients summed over the batch."""
    (g_model, g_x) = jax.grad(_batch_loss, argnums=(0, 1))(model, x, ct)
    return jax.vmap(model)(x), g_model, g_x


@jax.jit
def _per_example(model, x, ct):
    """vmap(grad): one parameter gradient per example."""
    g_model, g_x = jax.vmap(jax.grad(_example_loss, argnums=(0, 1)), in_axes=(None, 0, 0))(model, x, ct)
    return g_model, g_x


# ---------------------------------------------------------- the interface


def test_is_an_equinox_layer_norm_with_the_same_fields_and_constructor():
    assert issubclass(je.LayerNorm, eqx.nn.LayerNorm)
    assert inspect.signature(je.LayerNorm.__init__) == inspect.signature(eqx.nn.LayerNorm.__init__)
    assert inspect.signature(je.LayerNorm.__init__).parameters["eps"].default == 1e-5
    for kwargs in [dict(), dict(eps=1e-3, use_bias=False), dict(use_weight=False, dtype=BF16)]:
        theirs, ours = eqx.nn.LayerNorm((3, 4), **kwargs), je.LayerNorm((3, 4), **kwargs)
        for field in ("shape", "eps", "use_weight", "use_bias"):
            assert getattr(ours, field) == getattr(theirs, field)
        for field in ("weight", "bias"):
            a, b = getattr(ours, field), getattr(theirs, field)
            assert (a is None) == (b is None)
            if a is not None:
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
    assert je.LayerNorm(5).shape == (5,)
    assert jax_lngb.equinox is je


# ------------------------------------------------- outputs and gradients

CASES = [
    # (layer shape, batch, x dtype, parameter dtype); None: Equinox's default,
    # float32, or float64 under jax_enable_x64 (cast to float32 before use)
    ((32,), 6, F32, None),
    ((32,), 6, BF16, None),  # bf16 activations, f32 parameters
    ((32,), 6, BF16, BF16),
    ((32,), 6, F16, None),
    ((4, 8), 5, F32, None),  # statistics over the whole [4, 8] example
    ((4, 8), 5, BF16, BF16),
]
IDS = ["h32-f32", "h32-bf16-x", "h32-bf16-all", "h32-f16-x", "4x8-f32", "4x8-bf16-all"]


# Under x64 Equinox's default parameter dtype changes: the one-shape cases.
@pytest.mark.parametrize(
    "promotion,shape,batch,x_dtype,param_dtype",
    indirect=["promotion"],
    argvalues=in_modes(CASES, IDS, also=lambda c: c[0] == (32,)),
)
def test_vmap_outputs_and_gradients_match_equinox(shape, batch, x_dtype, param_dtype, promotion):
    # Equinox casts explicitly: every case runs, and takes the kernel, under
    # strict promotion too.
    theirs, ours = _pair(shape, dtype=param_dtype)
    p_dtype = theirs.weight.dtype
    assert np.dtype(p_dtype) == np.dtype(param_dtype or (jnp.float64 if promotion == "x64" else F32))
    x = data((batch, *shape), x_dtype)
    ct = data(x.shape, x_dtype, seed=5, std=1.0)
    n = int(np.prod(shape))
    flat = dict(x=x.reshape(batch, n), ct=ct.reshape(batch, n))
    w, b = theirs.weight.reshape(n), theirs.bias.reshape(n)
    # float64 parameters: their gradients are float32 sums, widened.
    via = F32 if np.dtype(p_dtype) == np.dtype(jnp.float64) else None
    dtypes = dict(out_dtype=x_dtype, param_dtype=p_dtype, x_dtype=x_dtype, compute_dtype=via)
    assert CUSTOM_CALL in _summed.lower(ours, x, ct).as_text()

    summed_ref = layer_norm_reference(flat["x"], w, b, flat["ct"], EPS)  # summed over the batch
    per_example_ref = layer_norm_reference(flat["x"], w, b, flat["ct"], EPS, sum_axes=())
    for model in (ours, theirs):  # the oracle is Equinox's semantics
        y, g, g_x = _summed(model, x, ct)
        assert y.shape == x.shape and g.weight.shape == shape
        check_against_reference(
            y.reshape(batch, n), g.weight.reshape(n), g.bias.reshape(n), g_x.reshape(batch, n), summed_ref, **dtypes
        )
        g, g_x = _per_example(model, x, ct)
        assert g.weight.shape == (batch, *shape)
        check_against_reference(
            y.reshape(batch, n),
            g.weight.reshape(batch, n),
            g.bias.reshape(batch, n),
            g_x.reshape(batch, n),
            per_example_ref,
            **dtypes,
        )


def test_nested_vmap_over_batch_and_sequence():
    # The transformer pattern: a [H] layer mapped over sequence and batch.
    theirs, ours = _pair((16,))
    x = data((3, 5, 16), F32)
    ct = data(x.shape, F32, seed=5, std=1.0)

    def loss(model, x):  # per example: sum over its sequence
        return jnp.sum(jax.vmap(model)(x) * ct[0])

    @jax.jit
    def grads(model):
        summed = jax.grad(lambda m: jnp.sum(jax.vmap(jax.vmap(m))(x) * ct))(model)
        per_example = jax.vmap(jax.grad(loss), in_axes=(None, 0))(model, x)
        return summed, per_example

    ref_summed = layer_norm_reference(x, theirs.weight, theirs.bias, ct, EPS)
    ref_each = layer_norm_reference(x, theirs.weight, theirs.bias, jnp.broadcast_to(ct[0], x.shape), EPS, sum_axes=(1,))
    for model in (ours, theirs):
        summed, each = grads(model)
        assert_close(summed.weight, ref_summed["d_scale"], result_dtype=F32, scale=ref_summed["d_scale_terms"])
        assert_close(summed.bias, ref_summed["d_bias"], result_dtype=F32, scale=ref_summed["d_bias_terms"])
        assert each.weight.shape == (3, 16)
        assert_close(each.weight, ref_each["d_scale"], result_dtype=F32, scale=ref_each["d_scale_terms"])
        assert_close(each.bias, ref_each["d_bias"], result_dtype=F32, scale=ref_each["d_bias_terms"])


def test_vmapped_backward_is_one_kernel_call_with_per_example_results():
    # Under vmap the primitives' batching rules run: one custom call for the
    # whole batch. With the parameters not mapped the batch is more rows of
    # one problem, so dweight/dbias come out of the kernel already summed
    # ([32]); under vmap(grad) they stay one [32] per example.
    _, ours = _pair((32,))
    x = data((6, 32), F32)
    ct = data(x.shape, F32, seed=5, std=1.0)
    for fn, param in ((_summed, "32"), (_per_example, "6x32")):
        text = fn.lower(ours, x, ct).as_text()
        assert text.count(f"@{CUSTOM_CALL}(") == 1, fn.__name__
        assert "stablehlo.while" not in text
        call = next(line for line in text.splitlines() if f"@{CUSTOM_CALL}(" in line)
        want = rf"-> \(tensor<6x32xf32>, tensor<{param}xf32>, tensor<{param}xf32>\)"
        assert re.search(want, call), call


def test_nested_vmap_is_one_problem_over_all_tokens():
    # grad(vmap(vmap(layer))): one forward and one backward kernel call over
    # all [3 * 5] rows with the [16] weight and bias as they are (no copy per
    # token), and dweight/dbias summed by the kernel.
    _, ours = _pair((16,))
    x = data((3, 5, 16), F32)
    ct = data(x.shape, F32, seed=5, std=1.0)
    jaxpr = jax.make_jaxpr(jax.grad(lambda m, x: jnp.sum(jax.vmap(jax.vmap(m))(x) * ct)))(ours, x).jaxpr
    kernels = [e for e in jaxpr.eqns if e.primitive.name.startswith("layer_norm")]
    assert [e.primitive.name for e in kernels] == ["layer_norm_forward", "layer_norm_backward"]
    for e in kernels:
        assert e.params["batch_dims"] == 0 and e.invars[0].aval.shape == (3, 5, 16)
    assert kernels[1].outvars[1].aval.shape == (16,)
    assert not any(e.primitive.name == "broadcast_in_dim" and e.invars[0].aval.shape == (16,) for e in jaxpr.eqns)


@pytest.mark.parametrize("use_weight,use_bias", [(False, True), (True, False), (False, False)])
def test_without_weight_or_bias(use_weight, use_bias):
    theirs, ours = _pair((16,), use_weight=use_weight, use_bias=use_bias)
    x = data((4, 16), F32)
    ct = data(x.shape, F32, seed=5, std=1.0)
    w = theirs.weight if use_weight else None
    b = theirs.bias if use_bias else None
    ref = layer_norm_reference(x, w, b, ct, EPS)
    y, g, g_x = _summed(ours, x, ct)
    assert (g.weight is None) != use_weight and (g.bias is None) != use_bias
    check_against_reference(y, g.weight, g.bias, g_x, ref, out_dtype=F32, param_dtype=F32, x_dtype=F32)


def test_state_is_passed_through_and_key_ignored():
    _, ours = _pair((8,))
    x = data((8,), F32)
    state = object()
    y, s = ours(x, state, key=jax.random.key(0))
    assert s is state
    np.testing.assert_array_equal(y, ours(x))
    y_none, s_none = ours(x, None)  # None is a state like any other
    assert s_none is None


def test_inputs_the_kernel_does_not_serve_run_equinox():
    theirs, ours = _pair((8,))
    with pytest.raises(ValueError, match="must satisfy the invariant"):  # Equinox's own check
        ours(data((2, 8), F32))
    z = (jnp.arange(8) + 1j * jnp.arange(8)[::-1]).astype(jnp.complex64)
    np.testing.assert_array_equal(np.asarray(ours(z)), np.asarray(theirs(z)))


# ------------------------------------------------ training, checkpoints


def _random_norm(model):
    """The model with random LayerNorm weight and bias."""
    return eqx.tree_at(lambda m: (m.norm.weight, m.norm.bias), model, random_like((model.norm.weight, model.norm.bias)))


class _MLP(eqx.Module):
    dense1: eqx.nn.Linear
    norm: eqx.nn.LayerNorm
    dense2: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.dense1 = eqx.nn.Linear(8, 32, key=k1)
        self.norm = eqx.nn.LayerNorm(32)
        self.dense2 = eqx.nn.Linear(32, 4, key=k2)

    def __call__(self, x):
        return self.dense2(jax.nn.gelu(self.norm(self.dense1(x))))


@pytest.mark.parametrize("x_dtype", [F32, BF16], ids=["f32", "bf16-x"])
def test_jitted_training_step_follows_equinox(x_dtype):
    theirs = _random_norm(_MLP(jax.random.key(0)))
    ours = je.convert(theirs)
    assert isinstance(ours.norm, je.LayerNorm) and not isinstance(theirs.norm, je.LayerNorm)
    batches = [(data((16, 8), x_dtype, seed=s, std=1.0), data((16, 4), F32, seed=100 + s, std=1.0)) for s in range(4)]

    def loss_of(model):
        params, static = eqx.partition(model, eqx.is_inexact_array)

        def loss(params, x, y):
            m = eqx.combine(params, static)
            # bf16 activations: the first Linear's output is cast before the norm
            out = jax.vmap(lambda x: m.dense2(jax.nn.gelu(m.norm(m.dense1(x.astype(F32)).astype(x_dtype)))))(x)
            return jnp.mean(jnp.square(out.astype(F32) - y))

        return loss, params

    loss_t, init = loss_of(theirs)
    loss_o, init_o = loss_of(ours)
    p_t, losses_t, _ = train(loss_t, init, batches)
    p_o, losses_o, text = train(loss_o, init_o, batches)
    assert CUSTOM_CALL in text
    assert_same_training(p_o, p_t, init, losses_o, losses_t, x_dtype)


def test_convert_and_checkpoints(tmp_path):
    model = _random_norm(_MLP(jax.random.key(0)))
    nested = {"blocks": [model, eqx.nn.LayerNorm(3, use_bias=False)], "other": jnp.ones(2)}
    converted = je.convert(nested)
    assert isinstance(converted["blocks"][0].norm, je.LayerNorm)
    assert isinstance(converted["blocks"][1], je.LayerNorm) and converted["blocks"][1].bias is None
    assert isinstance(converted["blocks"][0].dense1, eqx.nn.Linear)
    for a, b in zip(jax.tree_util.tree_leaves(converted), jax.tree_util.tree_leaves(nested)):
        assert a is b  # the very same arrays
    assert je.convert(converted)["blocks"][0].norm is converted["blocks"][0].norm  # idempotent

    # An Equinox checkpoint deserialises into a model built with the drop-in.
    path = tmp_path / "model.eqx"
    eqx.tree_serialise_leaves(path, model)
    like = je.convert(_MLP(jax.random.key(7)))
    loaded = eqx.tree_deserialise_leaves(path, like)
    assert isinstance(loaded.norm, je.LayerNorm)
    x = data((8,), F32, std=1.0)
    want = model(x)
    assert_close(loaded(x), want, result_dtype=F32, scale=np.abs(want).max(), what="model output")


def test_missing_equinox_raises_a_clear_import_error(monkeypatch):
    for name in [m for m in sys.modules if m == "equinox" or m.startswith("equinox.")]:
        monkeypatch.setitem(sys.modules, name, None)  # None: "import fails"
    monkeypatch.delitem(sys.modules, "jax_lngb.equinox")
    for name in [m for m in sys.modules if m.startswith("jax_lngb._integrations.")]:
        monkeypatch.delitem(sys.modules, name)  # the modules behind it, imported afresh
    monkeypatch.delattr(jax_lngb, "equinox")
    with pytest.raises(ImportError, match=r"jax_lngb\.equinox needs Equinox.*pip install 'jax_lngb\[equinox\]'"):
        importlib.import_module("jax_lngb.equinox")
    with pytest.raises(ImportError, match=r"jax_lngb\[equinox\]"):
        jax_lngb.equinox  # noqa: B018 - the lazy attribute gives the same error
