"""The LayerNorm forward on rows far from zero (offsets 1e3 to 1e7 times
their spread): over 10,000 rows per offset, ours (kernel and jax.numpy
lowering) is at least as close to the float64 LayerNorm as Flax's and
Equinox's, in the median row and in the worst row; and Flax's own
LayerNorm test, x + 1e6 included, passes against the drop-in."""

from __future__ import annotations

import flax.linen as nn
import jax
import numpy as np
import pytest
from jax import random

import jax_lngb.flax as jf
from jax_lngb.bench.shifted_accuracy import OFFSETS, measure

ROWS = 10_000


@pytest.fixture(scope="module")
def errors():
    return measure(ROWS, 64)


@pytest.mark.parametrize("offset", OFFSETS)
def test_ours_at_least_as_close_to_float64_as_flax_and_equinox(errors, offset):
    by = errors[offset]
    assert {"flax", "flax-two-pass", "equinox"} <= set(by)
    for ours in ("ours", "ours-jnp"):
        med, worst = by[ours]
        for theirs in ("flax", "flax-two-pass", "equinox"):
            assert med <= by[theirs][0], (ours, theirs, "median", med, by[theirs][0])
            assert worst <= by[theirs][1], (ours, theirs, "worst row", worst, by[theirs][1])
    # And about as close as a two-pass LayerNorm with a float32 mean can be
    # (the correctly rounded mean, the rest in float64), up to float32 noise.
    for ours in ("ours", "ours-jnp"):
        for k in (0, 1):
            assert by[ours][k] <= 1.05 * by["floor"][k] + 1e-5, (ours, k, by[ours][k], by["floor"][k])


# Flax's own test_layer_norm (tests/linen/linen_test.py), run on the drop-in.
@pytest.mark.parametrize(
    "reduction_axes,use_fast_variance",
    [(-1, True), (1, True), ((1, 2), True), ((0, 1, 2), True), (-1, False)],
)
def test_flax_s_own_layer_norm_test_passes(reduction_axes, use_fast_variance):
    key1, key2 = random.split(random.key(0))
    e = 1e-5
    x = random.normal(key1, (2, 3, 4))
    if not use_fast_variance:
        x += 1e6
    model = jf.LayerNorm(
        use_bias=False, use_scale=False, epsilon=e, reduction_axes=reduction_axes, use_fast_variance=use_fast_variance
    )
    y, _ = model.init_with_output(key2, x)
    assert x.dtype == y.dtype and x.shape == y.shape
    y_one_liner = (x - x.mean(axis=reduction_axes, keepdims=True)) * jax.lax.rsqrt(
        x.var(axis=reduction_axes, keepdims=True) + e
    )
    np.testing.assert_allclose(y_one_liner, y, atol=1e-3, rtol=1e-3)
    assert isinstance(model, nn.LayerNorm)
