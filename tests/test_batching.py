"""vmap of layer_norm_grad_beta: one [H] result per mapped element, computed
by one kernel call (never folded into the rows, never a Python loop)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, random_array
from test_grad_beta import check_against_ref

from jax_lngb import layer_norm_grad_beta
from jax_lngb.grad_beta import FFI_TARGET


def per_element(res, dy, res_axis, dy_axis):
    """The reference: a loop over the mapped axis, one oracle call each."""
    size = (res.shape[res_axis] if res_axis is not None else dy.shape[dy_axis])
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
