"""vmap of the primitives. layer_norm_grad_beta: one [H] result per mapped
element, computed by one kernel call (never folded into the rows, never a
Python loop). The row-wise LayerNorm primitives with shared parameters: the
mapped axis becomes more rows of one kernel call, no parameter copies, and
gradients equal to jax.numpy autodiff under grad(vmap) and vmap(grad)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, random_array
from test_grad_beta import check_against_ref

from jax_lngb import layer_norm_grad_beta
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_BETA_TARGET as FFI_TARGET


def per_element(res, dy, res_axis, dy_axis):
    """The reference: a loop over the mapped axis, one oracle call each."""
    size = res.shape[res_axis] if res_axis is not None else dy.shape[dy_axis]
    for i in range(size):
        r = res if res_axis is None else np.take(res, i, axis=res_axis)
        d = dy if dy_axis is None else np.take(dy, i, axis=dy_axis)
        yield i, r, d


CASES = [
    # (res shape, dy shape, in_axes)
    ((5, 64, 24), (5, 64, 24), (0, 0)),
    ((64, 5, 24), (64, 5, 24), (1, 1)),
    ((64, 24, 5), (64, 24, 5), (-1, -1)),  # the mapped axis is the physical last one
    ((5, 64, 24), (64, 5, 24), (0, 1)),
    ((64, 24), (4, 64, 24), (None, 0)),
    ((4, 64, 24), (64, 24), (0, None)),
    ((3, 2, 7, 33), (3, 2, 7, 33), (2, 2)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("res_shape,dy_shape,in_axes", CASES)
def test_vmap_in_axes(res_shape, dy_shape, in_axes, dtype, rng):
    res = random_array(rng, res_shape, dtype)
    dy = random_array(rng, dy_shape, dtype)
    g, b = jax.jit(jax.vmap(layer_norm_grad_beta, in_axes=in_axes))(res, dy)
    size = next(s[a] for s, a in zip((res_shape, dy_shape), in_axes) if a is not None)
    h = g.shape[-1]
    assert g.shape == (size, h) and b.shape == (size, h)
    for i, r, d in per_element(res, dy, *in_axes):
        check_against_ref(r, d, (g[i], b[i]), f"element {i}")


def test_nested_vmap(rng):
    res = random_array(rng, (3, 4, 50, 16), jnp.float32)
    dy = random_array(rng, (4, 3, 50, 16), jnp.float32)
    f = jax.vmap(jax.vmap(layer_norm_grad_beta), in_axes=(1, 0))
    g, b = jax.jit(f)(res, dy)
    assert g.shape == (4, 3, 16)
    for i in range(4):
        for j in range(3):
            check_against_ref(res[j, i], dy[i, j], (g[i, j], b[i, j]), f"({i}, {j})")


def test_vmap_with_out_dtype(rng):
    res = random_array(rng, (6, 100, 8), jnp.bfloat16)
    dy = random_array(rng, (6, 100, 8), jnp.bfloat16)
    g, b = jax.vmap(lambda r, d: layer_norm_grad_beta(r, d, out_dtype=jnp.float32))(res, dy)
    assert g.dtype == jnp.float32 and g.shape == (6, 8)
    for i in range(6):
        check_against_ref(res[i], dy[i], (g[i], b[i]), f"element {i}")


def test_vmap_matches_unbatched_bitwise(rng):
    res = random_array(rng, (7, 3000, 40), jnp.float32)
    dy = random_array(rng, (7, 3000, 40), jnp.float32)
    g, b = jax.vmap(layer_norm_grad_beta)(res, dy)
    for i in range(7):
        gi, bi = layer_norm_grad_beta(res[i], dy[i])
        np.testing.assert_array_equal(np.asarray(g[i]).view(np.uint32), np.asarray(gi).view(np.uint32))
        np.testing.assert_array_equal(np.asarray(b[i]).view(np.uint32), np.asarray(bi).view(np.uint32))


def test_vmap_runs_one_kernel_call():
    x = jnp.ones((8, 3, 32, 16))
    f = jax.jit(jax.vmap(jax.vmap(layer_norm_grad_beta)))
    text = f.lower(x, x).as_text()
    assert text.count(f"custom_call @{FFI_TARGET}") == 1
    assert "stablehlo.while" not in text
    g, _ = f(x, x)
    np.testing.assert_array_equal(g, np.full((8, 3, 16), 32.0))


def test_many_tiny_groups(rng):
    # Thousands of one-row problems (what vmap over examples produces).
    res = random_array(rng, (3000, 1, 24), jnp.float16)
    dy = random_array(rng, (3000, 1, 24), jnp.float16)
    g, b = jax.vmap(layer_norm_grad_beta)(res, dy)
    ref_g = (res.astype(np.float32) * dy.astype(np.float32))[:, 0].astype(np.float16)
    np.testing.assert_array_equal(np.asarray(g), ref_g)
    np.testing.assert_array_equal(np.asarray(b), dy[:, 0])


# ------------------------------------------- the row-wise LayerNorm primitives
#
# vmap of the forward, its tangent and LayerNormGrad with the parameters not
# mapped makes the mapped axis more rows (exact: every output is per row);
# the reductions (the fused backward, LayerNormGradBeta) keep one problem per
# mapped element, so vmap(grad) still gives per-example gradients.

B, T, HH = 3, 5, 24


def _ln_inputs(seed=0):
    r = np.random.default_rng(seed)
    x = jnp.asarray(r.standard_normal((B, T, HH)).astype(np.float32) * 2 + 1)
    g = jnp.asarray((1 + 0.3 * r.standard_normal(HH)).astype(np.float32))
    b = jnp.asarray((0.2 * r.standard_normal(HH)).astype(np.float32))
    ct = jnp.asarray(r.standard_normal((B, T, HH)).astype(np.float32))
    return x, g, b, ct


def _tree_close(got, want, what):
    for a, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        a, w = np.asarray(a, np.float64), np.asarray(w, np.float64)
        assert a.shape == w.shape, what
        np.testing.assert_allclose(a, w, rtol=0, atol=2e-5 * max(1.0, np.abs(w).max()), err_msg=what)


@pytest.mark.parametrize("backward", ["fused", "chained"])
def test_grad_of_nested_vmap_is_one_problem_over_all_rows(backward):
    # Equinox's pattern: a per-token layer, vmapped over sequence and batch,
    # its parameters closed over (not mapped).
    from jax_lngb import layer_norm, layer_norm_jnp

    x, g, b, ct = _ln_inputs()

    def loss(fn):
        return lambda x, g, b: jnp.sum(jax.vmap(jax.vmap(lambda r: fn(r, g, b)))(x) * ct)

    ours = jax.grad(loss(lambda r, g, b: layer_norm(r, g, b, backward=backward)), argnums=(0, 1, 2))
    jaxpr = jax.make_jaxpr(ours)(x, g, b).jaxpr
    kernels = [e for e in jaxpr.eqns if e.primitive.name.startswith("layer_norm")]
    names = [e.primitive.name for e in kernels]
    want = (
        ["layer_norm_forward", "layer_norm_backward"]
        if backward == "fused"
        else ["layer_norm_forward", "layer_norm_grad", "layer_norm_grad_beta"]
    )
    assert names == want, names
    for e in kernels:  # one call over all B * T rows, no group axes
        assert e.params["batch_dims"] == 0
        assert e.invars[0].aval.shape == (B, T, HH)
    # No copy of gamma or beta per row: nothing of shape [H] is broadcast.
    for e in jaxpr.eqns:
        if e.primitive.name == "broadcast_in_dim":
            assert e.invars[0].aval.shape != (HH,), e
    # The parameter gradients come out of the kernel already summed.
    assert kernels[-1].outvars[-1].aval.shape == (HH,)
    got = jax.jit(ours)(x, g, b)
    _tree_close(got, jax.grad(loss(layer_norm_jnp), argnums=(0, 1, 2))(x, g, b), "grad(vmap(vmap))")


@pytest.mark.parametrize("backward", ["fused", "chained"])
def test_vmap_of_grad_keeps_per_example_parameter_gradients(backward):
    from jax_lngb import layer_norm, layer_norm_jnp

    x, g, b, ct = _ln_inputs(1)

    def per_example(fn):
        def loss(x, g, b, ct):  # one example: a [T, H] sequence
            return jnp.sum(jax.vmap(lambda r: fn(r, g, b))(x) * ct)

        return jax.vmap(jax.grad(loss, argnums=(0, 1, 2)), in_axes=(0, None, None, 0))

    got = jax.jit(per_example(lambda *a: layer_norm(*a, backward=backward)))(x, g, b, ct)
    assert got[1].shape == (B, HH) and got[2].shape == (B, HH)
    _tree_close(got, per_example(layer_norm_jnp)(x, g, b, ct), "vmap(grad)")


def test_mapped_parameters_stay_independent_problems():
    # Per-example parameters (mapped): groups, not rows; inside, an unmapped
    # inner vmap folds into the rows of each group.
    from jax_lngb import layer_norm, layer_norm_jnp

    x, _, _, ct = _ln_inputs(2)
    r = np.random.default_rng(3)
    gs = jnp.asarray((1 + 0.3 * r.standard_normal((B, HH))).astype(np.float32))
    bs = jnp.asarray((0.2 * r.standard_normal((B, HH))).astype(np.float32))

    def loss(fn):
        inner = lambda x, g, b: jax.vmap(lambda row: fn(row, g, b))(x)
        return lambda x, g, b: jnp.sum(jax.vmap(inner)(x, g, b) * ct)

    ours = jax.grad(loss(layer_norm), argnums=(0, 1, 2))
    fwd = next(e for e in jax.make_jaxpr(ours)(x, gs, bs).jaxpr.eqns if e.primitive.name == "layer_norm_forward")
    assert fwd.params["batch_dims"] == 1 and fwd.invars[1].aval.shape == (B, HH)
    _tree_close(jax.jit(ours)(x, gs, bs), jax.grad(loss(layer_norm_jnp), argnums=(0, 1, 2))(x, gs, bs), "mapped")


def test_forward_mode_under_vmap_folds_and_matches_jnp():
    # The tangent primitive: vmap of jvp with shared tangents of gamma/beta,
    # and jacfwd (only the tangent mapped: the primal rows are broadcast).
    from jax_lngb import layer_norm, layer_norm_jnp

    x, g, b, ct = _ln_inputs(4)
    tg, tb = ct[0, 0], ct[1, 1]

    def jvp(fn):
        return jax.vmap(lambda x, t: jax.jvp(lambda x, g, b: fn(x, g, b), (x, g, b), (t, tg, tb)))

    _tree_close(jax.jit(jvp(layer_norm))(x, ct), jvp(layer_norm_jnp)(x, ct), "vmap(jvp)")
    xs = x[0, :2, :8]
    jac = jax.jit(jax.jacfwd(layer_norm, argnums=(0, 1)))(xs, g[:8], b[:8])
    _tree_close(jac, jax.jacfwd(layer_norm_jnp, argnums=(0, 1))(xs, g[:8], b[:8]), "jacfwd")


def test_layer_norm_grad_under_vmap_folds_with_shared_gamma():
    from jax_lngb import layer_norm_grad, layer_norm_grad_ref

    x, g, _, dy = _ln_inputs(5)
    mean = jnp.mean(x, -1)
    var = jnp.var(x, -1)
    f = jax.vmap(lambda d, x, v, m: layer_norm_grad(d, x, v, m, g), in_axes=(0, 0, 0, 0))
    eqn = next(e for e in jax.make_jaxpr(f)(dy, x, var, mean).jaxpr.eqns if e.primitive.name == "layer_norm_grad")
    assert eqn.params["batch_dims"] == 0 and eqn.invars[-1].aval.shape == (HH,)
    pd_x, res = jax.jit(f)(dy, x, var, mean)
    ref_x, ref_res = layer_norm_grad_ref(dy, x, var, mean, g)
    np.testing.assert_allclose(pd_x, ref_x, rtol=0, atol=2e-5 * np.abs(ref_x).max())
    np.testing.assert_allclose(res, ref_res, rtol=0, atol=2e-5 * np.abs(ref_res).max())
