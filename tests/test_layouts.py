"""Layouts: whatever view of memory the caller starts from (transposes,
strided slices, moveaxis, broadcasts, reversed axes, Fortran-ordered NumPy
arrays, device buffers in column-major layout), the custom call receives
dense row-major buffers, and the results are those of the dense arrays.

Proved three ways: the lowered module pins every operand of the custom call
to the row-major layout; in the compiled HLO, XLA materialises each view as
a row-major copy feeding the custom call; and the results are bitwise those
of the kernel on np.ascontiguousarray of the same view.

To cover a new primitive, add its (function, FFI target) to PRIMITIVES.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, assert_sums_close, random_array

from jax_lngb import layer_norm_grad_beta, layer_norm_grad_beta_ref
from jax_lngb.grad_beta import FFI_TARGET

PRIMITIVES = {"grad_beta": (layer_norm_grad_beta, FFI_TARGET)}

# name -> (shape of the stored array, the view taken inside jit); views of
# two operands share the storage shape.
VIEWS = {
    "transpose": ((96, 300), lambda a: a.T),
    "row-slice-step": ((601, 48), lambda a: a[::3]),
    "column-slice": ((200, 70), lambda a: a[:, 5:53]),
    "column-step": ((200, 96), lambda a: a[:, ::2]),
    "reversed": ((150, 40), lambda a: a[::-1, ::-1]),
    "moveaxis": ((24, 5, 70), lambda a: jnp.moveaxis(a, 0, -1)),
    "moveaxis-middle": ((5, 24, 7, 9), lambda a: jnp.moveaxis(a, 1, -1)),
    "swapaxes-3d": ((6, 33, 50), lambda a: jnp.swapaxes(a, 1, 2)),
    "broadcast-row": ((1, 64), lambda a: jnp.broadcast_to(a, (500, 64))),
    "broadcast-column": ((300, 1), lambda a: jnp.broadcast_to(a, (300, 17))),
    "reshape-of-transpose": ((16, 12, 10), lambda a: a.transpose(2, 0, 1).reshape(-1, 12)),
    "gathered-rows": ((100, 32), lambda a: a[jnp.array([7, 3, 3, 99, 0])]),
}


def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view({4: np.uint32, 2: np.uint16}[a.dtype.itemsize])


def numpy_view(name, a: np.ndarray) -> np.ndarray:
    """The same view in NumPy (strided, not copied), for the reference."""
    return np.asarray(VIEWS[name][1](jnp.asarray(a)))


def custom_call_lines(text: str, target: str) -> list[str]:
    return [line for line in text.splitlines() if target in line and "custom" in line]


def row_major(rank: int) -> str:
    """HLO's minor-to-major spelling of row-major: {rank-1,...,0}."""
    return "{" + ",".join(str(i) for i in reversed(range(rank))) + "}"


@pytest.mark.parametrize("prim", PRIMITIVES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("view", VIEWS)
def test_views_under_jit_match_dense_inputs(view, dtype, prim, rng):
    fn, _ = PRIMITIVES[prim]
    shape, take = VIEWS[view]
    res = random_array(rng, shape, dtype)
    dy = random_array(rng, shape, dtype, scale=2.0)
    got = jax.jit(lambda r, d: fn(take(r), take(d)))(res, dy)
    r_view, d_view = numpy_view(view, res), numpy_view(view, dy)
    dense = fn(np.ascontiguousarray(r_view), np.ascontiguousarray(d_view))
    for a, b in zip(got, dense):
        np.testing.assert_array_equal(bits(a), bits(b))
    # ... and those are the sums of the view, not of the storage.
    h = r_view.shape[-1]
    r64 = np.asarray(r_view, np.float64).reshape(-1, h)
    d64 = np.asarray(d_view, np.float64).reshape(-1, h)
    ref_g, ref_b = layer_norm_grad_beta_ref(r_view, d_view)
    assert_sums_close(got[0], ref_g, np.abs(r64 * d64).sum(0), r64.shape[0], dtype, f"{view} pd_gamma")
    assert_sums_close(got[1], ref_b, np.abs(d64).sum(0), r64.shape[0], dtype, f"{view} pd_beta")


@pytest.mark.parametrize("prim", PRIMITIVES)
@pytest.mark.parametrize("view", ["transpose", "moveaxis", "column-step", "broadcast-row", "reversed"])
def test_lowering_pins_operands_to_row_major(view, prim):
    fn, target = PRIMITIVES[prim]
    shape, take = VIEWS[view]
    x = jax.ShapeDtypeStruct(shape, jnp.float32)
    lowered = jax.jit(lambda r, d: fn(take(r), take(d))).lower(x, x)
    # StableHLO: operand_layouts are minor-to-major lists; row-major is
    # [rank-1, ..., 0] for every operand.
    (line,) = custom_call_lines(lowered.as_text(), "@" + target)
    layouts = re.search(r"operand_layouts = \[(.*?)\], result_layouts", line).group(1)
    rank = take(jnp.zeros(shape)).ndim
    want = "dense<[" + ", ".join(str(i) for i in reversed(range(rank))) + "]>"
    assert layouts.count(want) == 2, layouts
    # Compiled HLO: the custom call's layout constraints and the layouts of
    # the instructions feeding it are row-major: XLA copied the view.
    hlo = lowered.compile().as_text()
    (call,) = custom_call_lines(hlo, f'custom_call_target="{target}"')
    constraints = re.search(r"operand_layout_constraints=\{(.*?)\}, api_version", call).group(1)
    assert constraints.count(row_major(rank)) == 2, constraints
    operands = re.search(r"custom-call\((.*?)\)", call).group(1).split(", ")
    for name in operands:
        (defn,) = [ln for ln in hlo.splitlines() if re.match(rf"\s*(ROOT )?{re.escape(name)} = ", ln)]
        layout = re.search(r" = \w+\[[\d,]*\](\{[\d,]*\})", defn).group(1)
        assert layout == row_major(rank), defn


def test_fortran_ordered_numpy_inputs(rng):
    res = np.asfortranarray(random_array(rng, (500, 40), jnp.float32))
    dy = np.asfortranarray(random_array(rng, (500, 40), jnp.float32))
    assert not res.flags.c_contiguous
    got = jax.jit(layer_norm_grad_beta)(res, dy)
    want = layer_norm_grad_beta(np.ascontiguousarray(res), np.ascontiguousarray(dy))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Eager calls on strided NumPy views, too.
    view = np.ascontiguousarray(random_array(rng, (40, 1000), jnp.float32))[:, ::2].T
    eager = layer_norm_grad_beta(view, view)
    dense = layer_norm_grad_beta(np.ascontiguousarray(view), np.ascontiguousarray(view))
    for a, b in zip(eager, dense):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_column_major_device_buffers(rng):
    # Device buffers stored column-major: XLA must convert them before the
    # custom call (which only accepts row-major).
    layout = pytest.importorskip("jax.experimental.layout", reason="jax's layout API is needed for this check")
    sharding = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    fmt = layout.Format(layout.Layout(major_to_minor=(1, 0)), sharding)
    res = random_array(rng, (333, 24), jnp.float32)
    dy = random_array(rng, (333, 24), jnp.float32)
    res_d, dy_d = jax.device_put(res, fmt), jax.device_put(dy, fmt)
    assert res_d.format.layout.major_to_minor == (1, 0)
    f = jax.jit(layer_norm_grad_beta, in_shardings=(fmt, fmt))
    hlo = f.lower(res_d, dy_d).compile().as_text()
    assert "f32[333,24]{0,1}" in hlo.split("entry_computation_layout=")[1].split("}")[0] + "}"
    (call,) = custom_call_lines(hlo, f'custom_call_target="{FFI_TARGET}"')
    assert "operand_layout_constraints={f32[333,24]{1,0}, f32[333,24]{1,0}}" in call
    got = f(res_d, dy_d)
    want = layer_norm_grad_beta(res, dy)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
