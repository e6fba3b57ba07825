"""jax_lngb.flax.LayerNorm against flax.linen.LayerNorm on the same
parameters: attributes, parameter trees, outputs, gradients, dtype rules, a
jitted training step, the axes it maps or refuses, and the import error when
Flax is missing."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import serialization
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
import jax_lngb.flax as jf

# ----------------------------------------------------------------- helpers


@functools.partial(jax.jit, static_argnums=0)  # one compile beats many eager op compiles
def _loss_and_grads(module, variables, x, ct):
    def loss(v, x):
        return jnp.sum(module.apply(v, x).astype(F32) * ct)

    y = module.apply(variables, x)
    g_v, g_x = jax.grad(loss, argnums=(0, 1))(variables, x)
    return y, g_v["params"], g_x


# ---------------------------------------------------------- the interface


def test_is_a_flax_layer_norm_with_the_same_attributes_and_defaults():
    assert issubclass(jf.LayerNorm, nn.LayerNorm)
    ours = {f.name: f.default for f in dataclasses.fields(jf.LayerNorm)}
    theirs = {f.name: f.default for f in dataclasses.fields(nn.LayerNorm)}
    assert ours == theirs
    assert ours["epsilon"] == 1e-6 and ours["dtype"] is None and ours["param_dtype"] == F32
    assert jax_lngb.flax is jf  # the lazy attribute of the package


class _MLP(nn.Module):
    """Dense -> LayerNorm -> gelu -> Dense, with the LayerNorm class a field."""

    norm: type
    dtype: object = None
    norm_kwargs: tuple = ()

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(32, dtype=self.dtype)(x)
        h = self.norm(dtype=self.dtype, **dict(self.norm_kwargs))(h)
        return nn.Dense(4, dtype=self.dtype)(nn.gelu(h))


def test_init_gives_the_same_parameter_tree_names_and_values():
    # Random initializers: equal values need the same names, shapes, order.
    kwargs = (("scale_init", nn.initializers.normal(1.0)), ("bias_init", nn.initializers.normal(1.0)))
    x = data((4, 8), F32)
    theirs = _MLP(nn.LayerNorm, norm_kwargs=kwargs).init(jax.random.key(3), x)
    ours = _MLP(jf.LayerNorm, norm_kwargs=kwargs).init(jax.random.key(3), x)
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    assert set(ours["params"]["LayerNorm_0"]) == {"scale", "bias"}
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_array_equal(a, b)


def test_checkpoint_of_a_flax_model_loads_and_gives_the_same_outputs():
    x = data((4, 8), F32)
    theirs = _MLP(nn.LayerNorm, norm_kwargs=(("use_fast_variance", False),))
    variables = random_like(theirs.init(jax.random.key(0), x))
    blob = serialization.to_bytes(variables)
    ours = _MLP(jf.LayerNorm)
    restored = serialization.from_bytes(ours.init(jax.random.key(9), x), blob)
    want = theirs.apply(variables, x)
    got = ours.apply(restored, x)
    assert_close(got, want, result_dtype=F32, scale=np.abs(want).max(), what="model output")


# ------------------------------------------------- outputs and gradients

# (input dtype, param_dtype, dtype): Flax's promotion gives the output dtype.
DTYPE_CASES = [
    (F32, F32, None),  # -> f32
    (BF16, F32, None),  # -> f32: bf16 activations with f32 parameters promote
    (BF16, BF16, None),  # -> bf16
    (F32, F32, BF16),  # -> bf16 (statistics still f32)
    (BF16, F32, BF16),  # -> bf16, the usual mixed-precision setting
]
DTYPE_IDS = ["f32", "bf16-x", "bf16-all", "f32-x-bf16-out", "bf16-x-bf16-out"]


@pytest.mark.parametrize("x_dtype,param_dtype,dtype", DTYPE_CASES, ids=DTYPE_IDS)
def test_outputs_and_gradients_match_flax(x_dtype, param_dtype, dtype):
    x = data((2, 6, 32), x_dtype)
    theirs = nn.LayerNorm(param_dtype=param_dtype, dtype=dtype, use_fast_variance=False)
    ours = jf.LayerNorm(param_dtype=param_dtype, dtype=dtype)
    variables = random_like(theirs.init(jax.random.key(0), x))
    out_dtype = theirs.apply(variables, x).dtype
    ct = data(x.shape, out_dtype, seed=5, std=1.0)
    p = variables["params"]
    ref = layer_norm_reference(x, p["scale"], p["bias"], ct, 1e-6)
    dtypes = dict(out_dtype=out_dtype, param_dtype=param_dtype, x_dtype=x_dtype)

    y, gp, gx = _loss_and_grads(ours, variables, x, ct)
    check_against_reference(y, gp["scale"], gp["bias"], gx, ref, **dtypes)
    # Flax itself meets the same bounds (so the oracle is Flax's semantics:
    # epsilon, dtype promotion), up to its extra rounding of a 16-bit dx.
    y, gp, gx = _loss_and_grads(theirs, variables, x, ct)
    check_against_reference(
        y, gp["scale"], gp["bias"], gx, ref, **dtypes, double_rounded_dx=np.dtype(x_dtype) != np.dtype(F32)
    )


def test_default_fast_variance_flax_agrees_on_well_conditioneddata():
    # Flax's default (E[x^2] - E[x]^2) and our two-pass variance agree to
    # float32 rounding when |mean| is not large against the spread.
    x = data((4, 64), F32, std=1.0)
    variables = random_like(nn.LayerNorm().init(jax.random.key(0), x))
    want = nn.LayerNorm().apply(variables, x)
    got = jf.LayerNorm().apply(variables, x)
    assert_close(got, want, result_dtype=F32, scale=np.abs(want).max(), what="output")


@pytest.mark.parametrize("use_scale,use_bias", [(False, True), (True, False), (False, False)])
def test_without_scale_or_bias(use_scale, use_bias):
    x = data((3, 16), F32)
    kw = dict(use_scale=use_scale, use_bias=use_bias)
    theirs = nn.LayerNorm(use_fast_variance=False, **kw)
    ours = jf.LayerNorm(**kw)
    variables = random_like(theirs.init(jax.random.key(0), x))
    assert jax.tree_util.tree_structure(ours.init(jax.random.key(0), x)) == jax.tree_util.tree_structure(variables)
    p = variables.get("params", {})
    ct = data(x.shape, F32, seed=5, std=1.0)
    ref = layer_norm_reference(x, p.get("scale"), p.get("bias"), ct, 1e-6)
    y = ours.apply(variables, x)
    g_x = jax.grad(lambda x: jnp.sum(ours.apply(variables, x) * ct))(x)
    g_p = jax.grad(lambda v: jnp.sum(ours.apply(v, x) * ct))(variables).get("params", {}) if p else {}
    assert set(g_p) == set(p)
    check_against_reference(y, g_p.get("scale"), g_p.get("bias"), g_x, ref, out_dtype=F32, param_dtype=F32, x_dtype=F32)


# Other axes: moved last and flattened; parameters broadcast over the block.
AXES_CASES = [
    dict(reduction_axes=(1, 2)),  # feature -1, statistics over two axes
    dict(reduction_axes=(-2, -1), feature_axes=(-2, -1)),  # a [6, 8] scale
    dict(reduction_axes=(0, 2), feature_axes=0),  # non-trailing axes
    dict(reduction_axes=1, feature_axes=1),  # a middle axis alone
]


@pytest.mark.parametrize("axes", AXES_CASES, ids=["red12", "red-2-1-feat-2-1", "red02-feat0", "red1"])
def test_other_reduction_and_feature_axes_match_flax(axes):
    x = data((3, 6, 8), F32)
    theirs = nn.LayerNorm(use_fast_variance=False, **axes)
    ours = jf.LayerNorm(**axes)
    variables = random_like(theirs.init(jax.random.key(0), x))
    assert jax.tree_util.tree_map(jnp.shape, ours.init(jax.random.key(0), x)) == jax.tree_util.tree_map(
        jnp.shape, variables
    )
    ct = data(x.shape, F32, seed=5, std=1.0)
    y_t, gp_t, gx_t = _loss_and_grads(theirs, variables, x, ct)
    y_o, gp_o, gx_o = _loss_and_grads(ours, variables, x, ct)
    assert_close(y_o, y_t, result_dtype=F32, scale=np.abs(y_t).max(), what="output")
    assert_close(gx_o, gx_t, result_dtype=F32, scale=np.abs(gx_t).max(), what="d x")
    n_terms = x.size // variables["params"]["scale"].size
    for name in ("scale", "bias"):
        assert_close(gp_o[name], gp_t[name], result_dtype=F32, scale=n_terms * 4 * np.abs(ct).max(), what=name)


# -------------------------------------------------------------- training


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_jitted_training_step_follows_flax(dtype):
    batches = [(data((16, 8), F32, seed=s, std=1.0), data((16, 4), F32, seed=100 + s, std=1.0)) for s in range(4)]
    theirs = _MLP(nn.LayerNorm, dtype=dtype, norm_kwargs=(("use_fast_variance", False),))
    ours = _MLP(jf.LayerNorm, dtype=dtype)
    init = theirs.init(jax.random.key(0), batches[0][0])

    def loss_of(model):
        return lambda p, x, y: jnp.mean(jnp.square(model.apply(p, x).astype(F32) - y))

    p_t, loss_t, _ = train(loss_of(theirs), init, batches)
    p_o, loss_o, text = train(loss_of(ours), init, batches)
    assert CUSTOM_CALL in text  # the step runs the kernel
    # Per step the gradients differ by rounding only (float32 noise; for
    # bf16 one rounding of an activation), so the trajectories stay together.
    assert_same_training(p_o, p_t, init, loss_o, loss_t, dtype)


# ------------------------------------- what the kernel leaves to Flax


def _apply(module, x, **kw):
    return module.init_with_output(jax.random.key(0), x, **kw)


def test_options_the_kernel_does_not_serve_run_flax():
    # The configurations that used to be refused: each now gives Flax's own
    # parameters and result, bit for bit (see test_dropin_configs for all).
    x = data((2, 3, 4), F32, std=1.0)
    cases = [
        (dict(reduction_axes=1), x, {}),  # feature axis -1 outside the reduction axes
        (dict(reduction_axes=-1, feature_axes=(0, -1)), x, {}),
        *(
            [(dict(force_float32_reductions=False, param_dtype=BF16), x.astype(BF16), {})]
            if "force_float32_reductions" in {f.name for f in dataclasses.fields(nn.LayerNorm)}
            else []
        ),
        (dict(), x, dict(mask=jnp.asarray(np.arange(24).reshape(2, 3, 4) % 3 > 0))),
        (dict(param_dtype=jnp.complex64), x, {}),
    ]
    for attrs, xi, kw in cases:
        y_t, v_t = _apply(nn.LayerNorm(**attrs), xi, **kw)
        y_o, v_o = _apply(jf.LayerNorm(**attrs), xi, **kw)
        assert jax.tree_util.tree_structure(v_o) == jax.tree_util.tree_structure(v_t), attrs
        for a, b in zip(jax.tree_util.tree_leaves((y_o, v_o)), jax.tree_util.tree_leaves((y_t, v_t))):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=str(attrs))


def test_invalid_axes_give_flax_s_error():
    x = data((3, 6, 8), F32)
    with pytest.raises(Exception) as theirs:
        _apply(nn.LayerNorm(reduction_axes=3), x)
    with pytest.raises(type(theirs.value)):
        _apply(jf.LayerNorm(reduction_axes=3), x)


def test_missing_flax_raises_a_clear_import_error(monkeypatch):
    for name in [m for m in sys.modules if m == "flax" or m.startswith("flax.")]:
        monkeypatch.setitem(sys.modules, name, None)  # None: "import fails"
    monkeypatch.delitem(sys.modules, "jax_lngb.flax")
    for name in [m for m in sys.modules if m.startswith("jax_lngb._integrations.")]:
        monkeypatch.delitem(sys.modules, name)  # the modules behind it, imported afresh
    monkeypatch.delattr(jax_lngb, "flax")
    with pytest.raises(ImportError, match=r"jax_lngb\.flax needs Flax.*pip install 'jax_lngb\[flax\]'"):
        importlib.import_module("jax_lngb.flax")
    with pytest.raises(ImportError, match=r"jax_lngb\[flax\]"):
        jax_lngb.flax  # noqa: B018 - the lazy attribute gives the same error
