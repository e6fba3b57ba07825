"""Every configuration upstream accepts runs through the drop-ins with
upstream's results: jax_lngb.flax / jax_lngb.nnx / jax_lngb.equinox
LayerNorm against flax.linen / flax.nnx / equinox.nn LayerNorm over a
covering set of constructor options and call arguments.

Configurations the kernel serves must match upstream to dtype tolerance
(outputs, input and parameter gradients, all under jit) and lower to the
kernel; the others must run upstream's own code: bitwise the same results
and no kernel in the lowering. Parameter trees (names, shapes, dtypes,
initial values) are identical either way. Also: nn.scan and nn.remat, mask,
axis_name under vmap / shard_map / pmap, float64 under jax_enable_x64.
"""

from __future__ import annotations

import functools
import json

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import enable_x64, run_python
from flax import nnx
from norm_reference import (
    BF16,
    F16,
    F32,
    exercises_dtypes,
    in_modes,
    promotion_fixture,  # noqa: F401 - the `promotion` fixture
    random_like,
    run_upstream,
)
from norm_reference import close_to_upstream as _close

import jax_lngb.equinox as je
import jax_lngb.flax as jf
import jax_lngb.nnx as jn
from jax_lngb._integrations.flax_layer_norm import DECISION_TABLE

FWD_CALL = "jax_lngb_layer_norm_forward"
SHAPE = (2, 3, 8)


def _x(dtype, shape=SHAPE, seed=0):
    rng = np.random.default_rng(seed)
    return jnp.asarray((rng.standard_normal(shape) + 0.5).astype(np.float32)).astype(dtype)


def _same(got, want, what=""):
    assert np.dtype(got.dtype) == np.dtype(want.dtype), what
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=what)


def _leaves_same(a, b, same_structure=True):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert len(la) == len(lb)
    if same_structure:
        assert ta == tb
    for p, q in zip(la, lb):
        assert p.shape == q.shape and p.dtype == q.dtype
        _same(p, q)


# ------------------------------------------------------------ flax.linen

# (attributes, input dtype, whether the kernel serves it): a covering set of
# the attribute combinations (each option's values meet the others').
LINEN_CASES = [
    (dict(), F32, True),
    (dict(reduction_axes=1), F32, False),  # feature axis -1 outside the reduction axes
    (dict(reduction_axes=(1, 2), feature_axes=(1, 2), use_fast_variance=False, epsilon=1e-3), F32, True),
    (dict(reduction_axes=(0, 1, 2)), BF16, True),
    (dict(reduction_axes=-1, feature_axes=(0, -1)), F32, False),
    (dict(dtype=BF16, param_dtype=F32), BF16, True),
    (dict(force_float32_reductions=False, param_dtype=BF16), BF16, False),  # bfloat16 statistics
    (dict(force_float32_reductions=False, use_fast_variance=False), F32, True),  # float32 anyway
    (dict(force_float32_reductions=False, dtype=F16), F32, False),  # float16 statistics
    (dict(use_scale=False, dtype=F16), F32, True),
    (dict(use_bias=False, param_dtype=BF16), BF16, True),
    (dict(use_scale=False, use_bias=False, reduction_axes=(1, 2)), F32, True),
    (dict(reduction_axes=(0, 2), feature_axes=0, epsilon=0.0), F32, True),
    (dict(reduction_axes=1, feature_axes=1, dtype=BF16, use_fast_variance=False), F32, True),
    (dict(reduction_axes=(0, 1), feature_axes=1, use_bias=False), BF16, True),
    (dict(reduction_axes=(1,), feature_axes=(0, 1, 2), use_scale=False), F32, False),
    (dict(param_dtype=jnp.complex64), F32, False),
]


# Older Flax releases lack some attributes (force_float32_reductions).
_LINEN_FIELDS = set(nn.LayerNorm.__dataclass_fields__)
LINEN_CASES = [c for c in LINEN_CASES if set(c[0]) <= _LINEN_FIELDS]


def _linen_results(module, variables, x, ct, with_grads):
    @jax.jit
    def run(v, x):
        y = module.apply(v, x)
        if not with_grads:
            return y, None, None
        loss = lambda v, x: jnp.sum(module.apply(v, x).astype(F32) * ct.astype(F32))
        g_v, g_x = jax.grad(loss, argnums=(0, 1))(v, x)
        return y, g_v, g_x

    text = run.lower(variables, x).as_text()
    return (*run(variables, x), FWD_CALL in text)


@pytest.mark.parametrize(
    "promotion,attrs,x_dtype,kernel",
    indirect=["promotion"],
    argvalues=in_modes(
        LINEN_CASES, [str(i) for i in range(len(LINEN_CASES))], also=lambda c: exercises_dtypes(c[0], c[1])
    ),
)
def test_linen_configurations_match_flax(attrs, x_dtype, kernel, promotion):
    x = _x(x_dtype)
    theirs, ours = nn.LayerNorm(**attrs), jf.LayerNorm(**attrs)
    init_key = jax.random.key(7)
    refused, v_theirs = run_upstream(promotion, lambda: theirs.init(init_key, x), lambda: ours.init(init_key, x))
    if refused:  # strict promotion: Flax's own error, from ours too
        return
    _leaves_same(ours.init(init_key, x), v_theirs)  # names, shapes, dtypes, values
    variables = random_like(v_theirs)
    real = not jnp.issubdtype(jnp.result_type(*jax.tree_util.tree_leaves(variables), x), jnp.complexfloating)
    out_dtype = jax.eval_shape(theirs.apply, variables, x).dtype
    ct = _x(out_dtype, seed=3) if real else None
    y_t, gv_t, gx_t, _ = _linen_results(theirs, variables, x, ct, real)
    y_o, gv_o, gx_o, used = _linen_results(ours, variables, x, ct, real)
    assert used == kernel, f"kernel used: {used}, expected {kernel}"
    if not kernel:
        for a, b in zip(jax.tree_util.tree_leaves((y_o, gv_o, gx_o)), jax.tree_util.tree_leaves((y_t, gv_t, gx_t))):
            _same(a, b)
        return
    _close(y_o, y_t, input_dtype=x_dtype, what="y")
    _close(gx_o, gx_t, input_dtype=y_t.dtype, what="dx")
    params = variables.get("params", {})
    for name in params:
        n_rows = x.size // params[name].size
        _close(
            gv_o["params"][name],
            gv_t["params"][name],
            scale=n_rows * 4 * float(np.abs(ct).max()),
            input_dtype=y_t.dtype,
            what=f"d {name}",
        )


def test_linen_mask_runs_flax():
    x = _x(F32)
    mask = jnp.asarray(np.random.default_rng(2).random(SHAPE) > 0.3).at[..., :2].set(True)
    variables = random_like(nn.LayerNorm().init(jax.random.key(0), x, mask=mask))
    f = lambda m: jax.jit(lambda v, x: m.apply(v, x, mask=mask))
    _same(f(jf.LayerNorm())(variables, x), f(nn.LayerNorm())(variables, x))
    assert FWD_CALL not in f(jf.LayerNorm()).lower(variables, x).as_text()


def test_linen_axis_name_under_vmap_runs_flax():
    # Statistics averaged over the vmapped axis with lax.pmean, as in Flax.
    x = _x(F32, (4, 3, 8))
    variables = random_like(nn.LayerNorm().init(jax.random.key(0), x[0]))

    def run(m):
        return jax.jit(jax.vmap(lambda x: m.apply(variables, x), axis_name="b"))(x)

    _same(run(jf.LayerNorm(axis_name="b")), run(nn.LayerNorm(axis_name="b")))


class _Block(nn.Module):
    norm: type

    @nn.compact
    def __call__(self, h, _):
        h = h + nn.Dense(8)(self.norm()(h))
        return h, None


class _Scanned(nn.Module):
    norm: type
    remat: bool = False

    @nn.compact
    def __call__(self, x):
        block = nn.remat(_Block) if self.remat else _Block
        scan = nn.scan(block, variable_axes={"params": 0}, split_rngs={"params": True}, length=3)
        h, _ = scan(self.norm)(x, None)
        return self.norm()(h)


@pytest.mark.parametrize("remat", [False, True], ids=["scan", "scan-remat"])
def test_linen_under_scan_and_remat_matches_flax(remat):
    x = _x(F32, (4, 8))
    # Two-pass variance in Flax too: the residual stream drifts from zero,
    # where Flax's default E[x^2] - E[x]^2 loses digits the kernel keeps.
    theirs = _Scanned(functools.partial(nn.LayerNorm, use_fast_variance=False), remat)
    ours = _Scanned(functools.partial(jf.LayerNorm, use_fast_variance=False), remat)
    v = theirs.init(jax.random.key(1), x)
    _leaves_same(ours.init(jax.random.key(1), x), v)
    v = random_like(v)
    ct = _x(F32, (4, 8), seed=4)

    def run(m):
        loss = lambda v, x: jnp.sum(m.apply(v, x) * ct)
        return jax.jit(lambda v, x: (m.apply(v, x), *jax.grad(loss, argnums=(0, 1))(v, x)))

    assert FWD_CALL in run(ours).lower(v, x).as_text()
    for a, b in zip(jax.tree_util.tree_leaves(run(ours)(v, x)), jax.tree_util.tree_leaves(run(theirs)(v, x))):
        _close(a, b, what="scan result")


def test_linen_float64_runs_flax():
    with enable_x64():
        x = _x(jnp.float64)
        m_t, m_o = nn.LayerNorm(param_dtype=jnp.float64), jf.LayerNorm(param_dtype=jnp.float64)
        v = random_like(m_t.init(jax.random.key(0), x))
        _same(jax.jit(m_o.apply)(v, x), jax.jit(m_t.apply)(v, x))
        assert FWD_CALL not in jax.jit(m_o.apply).lower(v, x).as_text()


def test_linen_errors_are_flax_errors():
    x = _x(F32)
    for attrs in (dict(reduction_axes=5), dict(dtype=jnp.int32)):
        with pytest.raises(Exception) as theirs:
            nn.LayerNorm(**attrs).init(jax.random.key(0), x)
        with pytest.raises(type(theirs.value)):
            jf.LayerNorm(**attrs).init(jax.random.key(0), x)


def test_decision_table_ends_with_the_kernel():
    assert DECISION_TABLE[-1][1] == "the kernel"
    assert all(where.startswith("Flax") for _, where in DECISION_TABLE[:-1])


# -------------------------------------------------- axis_name across devices

CHILD = r"""
import json, jax, jax.numpy as jnp, numpy as np, flax.linen as nn
from flax import nnx
import jax_lngb.flax as jf, jax_lngb.nnx as jn
from jax.sharding import PartitionSpec as P
x = jnp.asarray(np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32))
out = {}
variables = nn.LayerNorm().init(jax.random.key(0), x[0])
def linen(m):
    return lambda xs: m.apply(variables, xs)
mesh = jax.make_mesh((2,), ("d",))
for name, cls in (("flax", nn.LayerNorm), ("ours", jf.LayerNorm)):
    m = cls(axis_name="d")
    out["pmap-" + name] = np.asarray(jax.pmap(linen(m), axis_name="d")(x)).tolist()
    sm = jax.shard_map(lambda xs: linen(m)(xs[0])[None], mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    xd = jax.device_put(x, jax.sharding.NamedSharding(mesh, P("d")))
    out["shard_map-" + name] = np.asarray(jax.jit(sm)(xd)).tolist()
for name, cls in (("flax", nnx.LayerNorm), ("ours", jn.LayerNorm)):
    m = cls(8, axis_name="d", rngs=nnx.Rngs(0))
    out["nnx-pmap-" + name] = np.asarray(jax.pmap(lambda xs: m(xs), axis_name="d")(x)).tolist()
print(json.dumps(out))
"""


def test_axis_name_under_pmap_and_shard_map_runs_flax():
    proc = run_python(CHILD, env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for case in ("pmap", "shard_map", "nnx-pmap"):
        ours, theirs = np.asarray(out[f"{case}-ours"]), np.asarray(out[f"{case}-flax"])
        np.testing.assert_array_equal(ours, theirs)
        # The statistics really span both devices: not a per-device LayerNorm.
        assert np.abs(ours.mean(axis=(0, 1))).max() > 0 and abs(ours.mean()) < 1e-5


# -------------------------------------------------------------- flax.nnx

NNX_CASES = [
    (dict(), F32, True),
    (dict(reduction_axes=1, feature_axes=-1), F32, False),
    (dict(reduction_axes=(1, 2), feature_axes=-1, use_fast_variance=False, epsilon=1e-3), BF16, True),
    (dict(dtype=BF16), F32, True),
    (dict(dtype=F16, use_scale=False), BF16, True),
    (dict(param_dtype=BF16, use_bias=False), BF16, True),
    (dict(use_scale=False, use_bias=False, epsilon=0.0), F32, True),
    (dict(reduction_axes=(0, 1, 2)), F32, True),
    (dict(param_dtype=jnp.complex64), F32, False),
]


@pytest.mark.parametrize(
    "promotion,kwargs,x_dtype,kernel",
    indirect=["promotion"],
    argvalues=in_modes(NNX_CASES, [str(i) for i in range(len(NNX_CASES))], also=lambda c: exercises_dtypes(c[0], c[1])),
)
def test_nnx_configurations_match_flax(kwargs, x_dtype, kernel, promotion):
    x = _x(x_dtype)
    theirs = nnx.LayerNorm(8, rngs=nnx.Rngs(0), **kwargs)
    ours = jn.LayerNorm(8, rngs=nnx.Rngs(0), **kwargs)
    _leaves_same(nnx.state(ours), nnx.state(theirs))
    nnx.update(theirs, random_like(nnx.state(theirs)))
    nnx.update(ours, nnx.state(theirs))
    if run_upstream(promotion, lambda: theirs(x), lambda: ours(x))[0]:
        return  # strict promotion: Flax's own error, from ours too
    real = not any(jnp.issubdtype(a.dtype, jnp.complexfloating) for a in jax.tree_util.tree_leaves(nnx.state(ours)))

    def results(m):
        graphdef, state = nnx.split(m)
        y0 = nnx.merge(graphdef, state)(x)
        ct = _x(y0.dtype, seed=3)

        @jax.jit
        def run(state, x):
            y = nnx.merge(graphdef, state)(x)
            if not real:
                return y, None, None
            loss = lambda s, x: jnp.sum(nnx.merge(graphdef, s)(x).astype(F32) * ct.astype(F32))
            return (y, *jax.grad(loss, argnums=(0, 1))(state, x))

        return run(state, x), FWD_CALL in run.lower(state, x).as_text(), ct

    (y_o, gs_o, gx_o), used, ct = results(ours)
    (y_t, gs_t, gx_t), _, _ = results(theirs)
    assert used == kernel
    if not kernel:
        for a, b in zip(jax.tree_util.tree_leaves((y_o, gs_o, gx_o)), jax.tree_util.tree_leaves((y_t, gs_t, gx_t))):
            _same(a, b)
        return
    _close(y_o, y_t, input_dtype=x_dtype, what="y")
    _close(gx_o, gx_t, input_dtype=y_t.dtype, what="dx")
    for a, b in zip(jax.tree_util.tree_leaves(gs_o), jax.tree_util.tree_leaves(gs_t)):
        _close(a, b, scale=(x.size // 8) * 4 * float(np.abs(ct).max()), input_dtype=y_t.dtype, what="d param")


def test_nnx_mask_runs_flax():
    x = _x(F32)
    mask = jnp.asarray(np.random.default_rng(2).random(SHAPE) > 0.3).at[..., :2].set(True)
    theirs = nnx.LayerNorm(8, rngs=nnx.Rngs(0))
    ours = jn.LayerNorm(8, rngs=nnx.Rngs(0))
    _same(ours(x, mask=mask), theirs(x, mask=mask))


# --------------------------------------------------------- equinox.nn

# (constructor arguments, input dtype, kernel): shape, eps, use_weight,
# use_bias, dtype of the parameters, and the input dtype Equinox promotes.
EQX_CASES = [
    (dict(shape=8), F32, True),
    (dict(shape=(3, 8), eps=1e-3), BF16, True),
    (dict(shape=(8,), use_weight=False), F16, True),
    (dict(shape=8, use_bias=False, dtype=BF16), BF16, True),
    (dict(shape=(2, 3, 8), use_weight=False, use_bias=False, eps=0.0), F32, True),
    (dict(shape=8, dtype=F16), F32, True),
    (dict(shape=8), jnp.int32, True),
    (dict(shape=8, dtype=jnp.complex64), F32, False),
    (dict(shape=8), jnp.complex64, False),
]


@pytest.mark.parametrize(
    "promotion,kwargs,x_dtype,kernel",
    indirect=["promotion"],
    argvalues=in_modes(EQX_CASES, [str(i) for i in range(len(EQX_CASES))]),
)
def test_equinox_configurations_match_equinox(kwargs, x_dtype, kernel, promotion):
    theirs = random_like(eqx.nn.LayerNorm(**kwargs))
    ours = je.LayerNorm(**kwargs)
    fresh = eqx.nn.LayerNorm(**kwargs)
    _leaves_same(ours, fresh, same_structure=False)
    assert (ours.shape, ours.eps, ours.use_weight, ours.use_bias) == (
        fresh.shape,
        fresh.eps,
        fresh.use_weight,
        fresh.use_bias,
    )
    ours = je.convert(theirs)
    shape = theirs.shape
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((4, *shape)) * 3 + 0.5).astype(x_dtype)
    real = not (
        jnp.issubdtype(x.dtype, jnp.complexfloating)
        or any(jnp.issubdtype(a.dtype, jnp.complexfloating) for a in jax.tree_util.tree_leaves(theirs))
    )
    diff = real and jnp.issubdtype(x.dtype, jnp.floating)
    ct = _x(x.dtype if diff else F32, (4, *shape), seed=3)
    # Equinox casts explicitly, so only its complex arithmetic meets strict
    # promotion's refusal (a complex x minus its real-valued mean).
    if run_upstream(promotion, lambda: jax.vmap(theirs)(x), lambda: jax.vmap(ours)(x))[0]:
        return

    def results(m):
        @jax.jit
        def run(m, x):
            y = jax.vmap(m)(x)
            if not diff:
                return y, None, None
            loss = lambda m, x: jnp.sum(jax.vmap(m)(x).astype(F32) * ct.astype(F32))
            return (y, *jax.grad(loss, argnums=(0, 1))(m, x))

        return run(m, x), FWD_CALL in run.lower(m, x).as_text()

    (y_o, gm_o, gx_o), used = results(ours)
    (y_t, gm_t, gx_t), _ = results(theirs)
    assert used == kernel
    if not kernel:
        for a, b in zip(jax.tree_util.tree_leaves((y_o, gm_o, gx_o)), jax.tree_util.tree_leaves((y_t, gm_t, gx_t))):
            _same(a, b)
        return
    if not jnp.issubdtype(y_t.dtype, jnp.floating):  # integer outputs: Equinox's cast of the float32 result
        np.testing.assert_allclose(np.asarray(y_o), np.asarray(y_t), atol=1)
        return
    _close(y_o, y_t, input_dtype=x_dtype, what="y")
    if diff:
        _close(gx_o, gx_t, input_dtype=x_dtype, what="dx")
        for a, b in zip(jax.tree_util.tree_leaves(gm_o), jax.tree_util.tree_leaves(gm_t)):
            _close(a, b, scale=4 * 4 * float(np.abs(ct).max()), input_dtype=x_dtype, what="d param")


def test_equinox_state_key_and_errors_as_upstream():
    theirs = random_like(eqx.nn.LayerNorm(8))
    ours = je.convert(theirs)
    x = _x(F32, (8,))
    state = eqx.nn.State(eqx.nn.BatchNorm(8, "b"))
    y_o, s_o = ours(x, state, key=jax.random.key(0))
    y_t, s_t = theirs(x, state, key=jax.random.key(0))
    assert s_o is state and s_t is state
    _close(y_o, y_t, what="y")
    # Inputs Equinox refuses are refused with Equinox's error.
    with pytest.raises(ValueError, match="must satisfy the invariant"):
        ours(_x(F32, (2, 8)))
    with pytest.raises(ValueError, match="must satisfy the invariant"):
        ours(_x(F32, (2, 8)), state)


def test_equinox_float64_runs_equinox():
    with enable_x64():
        theirs = random_like(eqx.nn.LayerNorm(8, dtype=jnp.float64))
        ours = je.convert(theirs)
        x = _x(jnp.float64, (4, 8))
        f = jax.jit(lambda m, x: jax.vmap(m)(x))
        _same(f(ours, x), f(theirs, x))
        assert FWD_CALL not in f.lower(ours, x).as_text()


# ------------------------------------------------------- bias-free LayerNorm


@pytest.mark.parametrize("lib", ["linen", "nnx", "equinox"])
def test_without_bias_the_kernel_reads_no_bias(lib):
    # use_bias=False maps onto layer_norm(x, gamma, None): the no-bias
    # kernels run (no zero bias is materialised, no bias gradient formed),
    # with Flax's / Equinox's results.
    import equinox as eqx
    import flax.linen as nn
    from flax import nnx

    from jax_lngb import equinox as jeqx
    from jax_lngb import flax as jflax
    from jax_lngb import nnx as jnnx
    from jax_lngb._ops.primitives import LAYER_NORM_BACKWARD_NO_BETA_TARGET, LAYER_NORM_FORWARD_NO_BETA_TARGET

    x = jax.random.normal(jax.random.key(7), (6, 16), jnp.float32) * 3 + 1
    if lib == "linen":
        ours_m, theirs_m = jflax.LayerNorm(use_bias=False), nn.LayerNorm(use_bias=False)
        params = theirs_m.init(jax.random.key(0), x)
        ours = lambda x: ours_m.apply(params, x)
        theirs = lambda x: theirs_m.apply(params, x)
    elif lib == "nnx":
        ours_m = jnnx.LayerNorm(16, use_bias=False, rngs=nnx.Rngs(0))
        theirs_m = nnx.LayerNorm(16, use_bias=False, rngs=nnx.Rngs(0))
        ours, theirs = ours_m, theirs_m
    else:
        ours_m, theirs_m = jeqx.LayerNorm(16, use_bias=False), eqx.nn.LayerNorm(16, use_bias=False)
        ours, theirs = jax.vmap(ours_m), jax.vmap(theirs_m)
    np.testing.assert_allclose(np.asarray(ours(x)), np.asarray(theirs(x)), rtol=2e-5, atol=2e-5)
    step = jax.jit(jax.grad(lambda x: (ours(x) ** 2).sum()))
    hlo = step.lower(x).as_text()
    assert LAYER_NORM_FORWARD_NO_BETA_TARGET in hlo and LAYER_NORM_BACKWARD_NO_BETA_TARGET in hlo
    np.testing.assert_allclose(
        np.asarray(step(x)), np.asarray(jax.grad(lambda x: (theirs(x) ** 2).sum())(x)), rtol=1e-4, atol=1e-4
    )
