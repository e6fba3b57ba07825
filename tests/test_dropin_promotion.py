"""The drop-ins and the functions they call under strict dtype promotion
(`jax.numpy_dtype_promotion("strict")`, as Equinox's own test suite runs)
and under jax_enable_x64.

Under strict promotion every drop-in (linen, nnx and Equinox; LayerNorm and
RMSNorm) gives what upstream gives over a grid of input, parameter and
output dtypes: upstream's error (type and message) where upstream refuses
the mix, else the same dtypes and values, with the kernel serving exactly
the calls it serves under standard promotion. `layer_norm` and `rms_norm`
take any kernel dtype for gamma/beta whatever the promotion mode, with the
same bits. Under jax_enable_x64 the Equinox drop-ins serve float32 inputs
with Equinox's default float64 parameters (cast to float32, as Equinox
casts them). The configuration tests of test_dropin_configs, test_rms_dropins
and test_equinox run under all three modes through the `promotion` fixture.
"""

from __future__ import annotations

import itertools

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import enable_x64
from flax import nnx
from norm_reference import BF16, F32, close_to_upstream, data, random_like

import jax_lngb
import jax_lngb.equinox as je
import jax_lngb.flax as jf
import jax_lngb.nnx as jn

FORWARD_TARGETS = ("jax_lngb_layer_norm_forward", "jax_lngb_rms_norm_forward")
FEATURES = 8


def _strict():
    return jax.numpy_dtype_promotion("strict")


# ------------------------------------------------------------ builders
# Each returns (f, params): f(params, x) is the layer's output for the
# batch x, params the layer's (random) parameters, built in the current
# promotion mode (Flax builds them by running the layer once).


def _linen(cls, x, param_dtype, dtype):
    module = cls(param_dtype=param_dtype, dtype=dtype)
    return (lambda v, x: module.apply(v, x)), random_like(module.init(jax.random.key(0), x))


def _nnx(cls, x, param_dtype, dtype):
    graphdef, state = nnx.split(cls(FEATURES, param_dtype=param_dtype, dtype=dtype, rngs=nnx.Rngs(0)))
    return (lambda s, x: nnx.merge(graphdef, s)(x)), random_like(state)


def _equinox(cls, x, param_dtype, dtype):
    del dtype  # Equinox's output has x's dtype
    return (lambda m, x: jax.vmap(m)(x)), random_like(cls(FEATURES, dtype=param_dtype))


def _same(params):
    return params


# name: (builder, upstream class, drop-in class, upstream's params as the drop-in's)
LAYERS = {
    "linen-LayerNorm": (_linen, nn.LayerNorm, jf.LayerNorm, _same),
    "linen-RMSNorm": (_linen, nn.RMSNorm, jf.RMSNorm, _same),
    "nnx-LayerNorm": (_nnx, nnx.LayerNorm, jn.LayerNorm, _same),
    "nnx-RMSNorm": (_nnx, nnx.RMSNorm, jn.RMSNorm, _same),
    "eqx-LayerNorm": (_equinox, eqx.nn.LayerNorm, je.LayerNorm, je.from_equinox),
    "eqx-RMSNorm": (_equinox, eqx.nn.RMSNorm, je.RMSNorm, je.from_equinox),
}
# (x dtype, parameter dtype, module dtype); Equinox has no output dtype.
FLAX_DTYPES = list(itertools.product((F32, BF16), (F32, BF16), (None, F32, BF16)))
EQX_DTYPES = list(itertools.product((F32, BF16), (F32, BF16), (None,)))
GRID = [(name, *d) for name in LAYERS for d in (EQX_DTYPES if name.startswith("eqx") else FLAX_DTYPES)]


def _name(d):
    return "none" if d is None else np.dtype(d).name


def _results(f, params, x):
    """Output, parameter gradients and (float x) input gradient under jit,
    and whether the lowering calls a forward kernel."""
    ct = data(x.shape, F32, seed=5, std=1.0)
    floating = jnp.issubdtype(x.dtype, jnp.floating)

    def run(p, x):
        loss = lambda p, x: jnp.sum(f(p, x).astype(F32) * ct)
        return f(p, x), jax.grad(loss, argnums=(0, 1) if floating else 0)(p, x)

    lowered = jax.jit(run).lower(params, x)
    kernel = any(t in lowered.as_text() for t in FORWARD_TARGETS)
    return lowered.compile()(params, x), kernel, float(np.abs(ct).max())


@pytest.mark.parametrize(
    "layer,x_dtype,param_dtype,dtype", GRID, ids=[f"{g[0]}-x{_name(g[1])}-p{_name(g[2])}-d{_name(g[3])}" for g in GRID]
)
def test_strict_promotion_gives_upstream_s_results_or_error(layer, x_dtype, param_dtype, dtype):
    build, theirs_cls, ours_cls, adopt = LAYERS[layer]
    x = (data((4, FEATURES), F32, std=1.0) * 3).astype(x_dtype)
    with _strict():
        try:
            f_t, params = build(theirs_cls, x, param_dtype, dtype)
            (y_t, g_t), _, ct_max = _results(f_t, params, x)
        except jax.dtypes.TypePromotionError as e:
            # Upstream refuses the mix: ours refuses it with the same error.
            with pytest.raises(type(e)) as err:
                f_o, params = build(ours_cls, x, param_dtype, dtype)
                _results(f_o, params, x)
            assert str(err.value) == str(e)
            return
        f_o, _ = build(ours_cls, x, param_dtype, dtype)
        (y_o, g_o), kernel, _ = _results(f_o, adopt(params), x)
    # The kernel serves under strict promotion what it serves under standard.
    f_o, params_std = build(ours_cls, x, param_dtype, dtype)
    served = any(t in jax.jit(f_o).lower(params_std, x).as_text() for t in FORWARD_TARGETS)
    assert kernel == served
    if jnp.issubdtype(y_t.dtype, jnp.integer):
        # Equinox's cast of the float32 result back to integer x's dtype
        # truncates: float32 rounding may move a value across an integer.
        assert y_o.dtype == y_t.dtype
        np.testing.assert_allclose(np.asarray(y_o), np.asarray(y_t), atol=1)
    else:
        close_to_upstream(y_o, y_t, input_dtype=x_dtype, what="y")
    # The same leaves in the same order (Equinox's trees differ in the class).
    leaves_o, leaves_t = jax.tree_util.tree_leaves(g_o), jax.tree_util.tree_leaves(g_t)
    assert [a.shape for a in leaves_o] == [b.shape for b in leaves_t]
    for a, b in zip(leaves_o, leaves_t):
        # A parameter gradient sums one term (|ct * xhat| < 4 |ct|) per row.
        rows = x.size // b.size
        close_to_upstream(
            a,
            b,
            scale=rows * 4 * ct_max if a.shape != x.shape else None,
            input_dtype=y_t.dtype if jnp.issubdtype(y_t.dtype, jnp.floating) else None,
            what="gradient",
        )


@pytest.mark.parametrize("cls", [je.LayerNorm, je.RMSNorm], ids=["LayerNorm", "RMSNorm"])
def test_equinox_bfloat16_layer_under_strict_promotion_takes_the_kernel(cls):
    # The example of Equinox's own test suite: a bfloat16 layer on bfloat16
    # activations, which Equinox computes in float32 by explicit casts.
    upstream = eqx.nn.LayerNorm if cls is je.LayerNorm else eqx.nn.RMSNorm
    theirs = random_like(upstream(128, dtype=BF16))
    ours = je.from_equinox(theirs)
    x = data((128,), BF16, std=1.0)
    with _strict():
        y_t, y_o = theirs(x), ours(x)
        jaxpr = str(jax.make_jaxpr(ours)(x))
    assert "layer_norm_forward" in jaxpr or "rms_norm_forward" in jaxpr
    close_to_upstream(y_o, y_t, input_dtype=BF16, what="y")


@pytest.mark.parametrize("cls", [je.LayerNorm, je.RMSNorm], ids=["LayerNorm", "RMSNorm"])
def test_equinox_float64_parameters_under_x64_take_the_kernel(cls):
    # Under jax_enable_x64 Equinox's default parameter dtype is float64; on
    # a float32 input it casts them to float32 before use, as the kernel
    # path does. The parameter gradients come back float64.
    upstream = eqx.nn.LayerNorm if cls is je.LayerNorm else eqx.nn.RMSNorm
    x = data((4, FEATURES), F32, std=1.0)
    ct = data(x.shape, F32, seed=5, std=1.0)
    with enable_x64():
        theirs = random_like(upstream(FEATURES))
        assert theirs.weight.dtype == jnp.float64
        ours = je.from_equinox(theirs)
        run = jax.jit(lambda m, x: (jax.vmap(m)(x), jax.grad(lambda m: jnp.sum(jax.vmap(m)(x) * ct))(m)))
        assert any(t in run.lower(ours, x).as_text() for t in FORWARD_TARGETS)
        (y_o, g_o), (y_t, g_t) = run(ours, x), run(theirs, x)
    close_to_upstream(y_o, y_t, what="y")
    for a, b in zip(jax.tree_util.tree_leaves(g_o), jax.tree_util.tree_leaves(g_t)):
        assert a.dtype == b.dtype == jnp.float64
        close_to_upstream(a, b, scale=4 * 4 * float(np.abs(ct).max()), what="d param")


def test_nnx_dtype_float32_casts_16_bit_inputs_and_takes_the_kernel_under_strict():
    # nnx promotes x and the parameters to `dtype` first, by explicit casts:
    # bfloat16 x and parameters with dtype=float32 run under strict promotion.
    x = data((4, FEATURES), BF16, std=1.0)
    for theirs_cls, ours_cls in ((nnx.LayerNorm, jn.LayerNorm), (nnx.RMSNorm, jn.RMSNorm)):
        theirs = theirs_cls(FEATURES, param_dtype=BF16, dtype=F32, rngs=nnx.Rngs(0))
        ours = ours_cls(FEATURES, param_dtype=BF16, dtype=F32, rngs=nnx.Rngs(0))
        nnx.update(theirs, random_like(nnx.state(theirs)))
        nnx.update(ours, nnx.state(theirs))
        with _strict():
            y_t, y_o = theirs(x), ours(x)
            jaxpr = str(jax.make_jaxpr(ours)(x))
        assert "layer_norm_forward" in jaxpr or "rms_norm_forward" in jaxpr
        close_to_upstream(y_o, y_t, what=theirs_cls.__name__)


def test_an_epsilon_strict_promotion_does_not_add_gives_upstream_s_error():
    # A NumPy float64 epsilon under jax_enable_x64: strict promotion refuses
    # float32 statistics + float64 epsilon in upstream's code, and so ours.
    eps = np.float64(1e-5)
    x = data((4, FEATURES), F32, std=1.0)
    with enable_x64(), _strict():
        calls = [
            (nn.LayerNorm(epsilon=eps), jf.LayerNorm(epsilon=eps)),
            (nn.RMSNorm(epsilon=eps), jf.RMSNorm(epsilon=eps)),
        ]
        for theirs, ours in calls:
            with pytest.raises(jax.dtypes.TypePromotionError) as err_t:
                theirs.init(jax.random.key(0), x)
            with pytest.raises(jax.dtypes.TypePromotionError) as err_o:
                ours.init(jax.random.key(0), x)
            assert str(err_o.value) == str(err_t.value)
        for theirs_cls, ours_cls in ((nnx.LayerNorm, jn.LayerNorm), (nnx.RMSNorm, jn.RMSNorm)):
            theirs = theirs_cls(FEATURES, epsilon=eps, param_dtype=F32, rngs=nnx.Rngs(0))
            ours = ours_cls(FEATURES, epsilon=eps, param_dtype=F32, rngs=nnx.Rngs(0))
            with pytest.raises(jax.dtypes.TypePromotionError) as err_t:
                theirs(x)
            with pytest.raises(jax.dtypes.TypePromotionError) as err_o:
                ours(x)
            assert str(err_o.value) == str(err_t.value)
        for theirs_cls, ours_cls in ((eqx.nn.LayerNorm, je.LayerNorm), (eqx.nn.RMSNorm, je.RMSNorm)):
            theirs = theirs_cls(FEATURES, eps=eps, dtype=F32)
            ours = je.from_equinox(theirs)
            assert isinstance(ours, ours_cls)
            with pytest.raises(jax.dtypes.TypePromotionError) as err_t:
                theirs(x[0])
            with pytest.raises(jax.dtypes.TypePromotionError) as err_o:
                ours(x[0])
            assert str(err_o.value) == str(err_t.value)


# ------------------------------------------- layer_norm and rms_norm themselves

MIXED = [(BF16, F32), (F32, BF16)]


def _norm_results(norm, x, gamma, beta, backward):
    ct = data(x.shape, F32, seed=5, std=1.0)
    if norm == "layer_norm":
        f = lambda x, g, b: jax_lngb.layer_norm(x, g, b, backward=backward)
        args = (x, gamma, beta)
    else:
        f = lambda x, g: jax_lngb.rms_norm(x, g, backward=backward)
        args = (x, gamma)
    loss = lambda *a: jnp.sum(f(*a).astype(F32) * ct)
    argnums = tuple(range(len(args)))
    run = jax.jit(lambda *a: (f(*a), jax.grad(loss, argnums)(*a), jax.jvp(f, a, a)[1]))
    return jax.tree_util.tree_leaves(run(*args))


@pytest.mark.parametrize("backward", ["fused", "chained"])
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("x_dtype,gamma_dtype", MIXED, ids=[f"x{_name(a)}-g{_name(b)}" for a, b in MIXED])
def test_mixed_dtypes_give_the_same_bits_under_strict_promotion_and_x64(x_dtype, gamma_dtype, norm, backward):
    # gamma/beta may be any kernel dtype, whatever x's: nothing inside relies
    # on implicit promotion, so strict promotion changes nothing, and neither
    # does jax_enable_x64 (no Python float widens a float32 computation).
    x = data((3, 5, 16), x_dtype, std=1.0)
    gamma = (1 + data((16,), F32, seed=1, std=0.5)).astype(gamma_dtype)
    beta = data((16,), F32, seed=2, std=0.5)
    want = _norm_results(norm, x, gamma, beta, backward)
    # y in x's dtype, the gradients in their arguments' dtypes.
    assert np.dtype(want[0].dtype) == np.dtype(x_dtype)
    assert np.dtype(want[1].dtype) == np.dtype(x_dtype) and np.dtype(want[2].dtype) == np.dtype(gamma_dtype)
    for context in (_strict, enable_x64):
        with context():
            got = _norm_results(norm, x, gamma, beta, backward)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert np.dtype(a.dtype) == np.dtype(b.dtype)
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=context.__name__)
