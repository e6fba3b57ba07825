"""Layouts: whatever view of memory the caller starts from (transposes,
strided slices, moveaxis, broadcasts, reversed axes, Fortran-ordered NumPy
arrays, device buffers in column-major layout), the custom call receives
dense row-major buffers, and the results are those of the dense arrays.

Proved three ways: the lowered module pins every operand of the custom call
to the row-major layout; in the compiled HLO, XLA materialises each view as
a row-major copy feeding the custom call; and the results are bitwise those
of the kernel on np.ascontiguousarray of the same view.

Covered: LayerNormGradBeta, the LayerNorm forward, LayerNormGrad, and the
fused and chained backward (through jax.vjp of layer_norm). To cover a new
primitive, add a Prim (function of its row operands, FFI target, a float64
check) to PRIMITIVES.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, assert_sums_close, random_array

from jax_lngb import (
    layer_norm,
    layer_norm_backward_ref,
    layer_norm_forward_p,
    layer_norm_grad,
    layer_norm_grad_beta,
    layer_norm_grad_beta_ref,
    layer_norm_grad_ref,
)
from jax_lngb._ops.primitives import LAYER_NORM_BACKWARD_TARGET as BACKWARD_TARGET
from jax_lngb._ops.primitives import LAYER_NORM_FORWARD_TARGET as FORWARD_TARGET
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_BETA_TARGET as FFI_TARGET
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_TARGET as GRAD_TARGET

# ---------------------------------------------- the functions under test
#
# Each takes `rows` row operands [..., H] (the views); LayerNorm parameters
# are derived from H, and LayerNormGrad gets the statistics of the forward
# kernel (a jax.numpy reduction could associate differently on a view than
# on a dense array, which would change bits for a reason that is not ours).


def params(h: int):
    # NumPy constants: jnp.cos inside jit may round differently from eager.
    gamma = (1.0 + 0.25 * np.cos(np.arange(h))).astype(np.float32)
    beta = (0.5 * np.sin(np.arange(h))).astype(np.float32)
    return gamma, beta


def forward(x):
    gamma, beta = params(x.shape[-1])
    return layer_norm_forward_p.bind(x, gamma, beta, epsilon=1e-5, batch_dims=0, backward="fused")


def grad(dy, x):
    gamma, beta = params(x.shape[-1])
    _, mean, variance = forward(x)
    return layer_norm_grad(dy, x, variance, mean, gamma)


def vjp(backward: str):
    def f(x, dy):
        gamma, beta = params(x.shape[-1])
        y, pullback = jax.vjp(lambda *a: layer_norm(*a, backward=backward), x, gamma, beta)
        return (y, *pullback(dy))

    return f


# float64 meaning of each function on NumPy operands, given the results
# (whose statistics it may reuse); a view read wrongly (the storage instead
# of the view) is off by O(1), far beyond these tolerances.
def grad_beta_check(ops, got, dtype, view):
    r_view, d_view = ops
    h = r_view.shape[-1]
    r64 = np.asarray(r_view, np.float64).reshape(-1, h)
    d64 = np.asarray(d_view, np.float64).reshape(-1, h)
    ref_g, ref_b = layer_norm_grad_beta_ref(r_view, d_view)
    assert_sums_close(got[0], ref_g, np.abs(r64 * d64).sum(0), r64.shape[0], dtype, f"{view} pd_gamma")
    assert_sums_close(got[1], ref_b, np.abs(d64).sum(0), r64.shape[0], dtype, f"{view} pd_beta")


# Relative tolerance of a LayerNorm result in each dtype (a few roundings of
# the output dtype, plus float32 sums over rows of up to a few hundred terms).
LN_RTOL = {np.dtype(jnp.float32): 2e-4, np.dtype(jnp.float16): 4e-3, np.dtype(jnp.bfloat16): 3e-2}


def close(got, want, dtype, what, scale=None):
    want = np.asarray(want, np.float64)
    tol = LN_RTOL[np.dtype(dtype)]
    scale = np.abs(want).max(initial=1.0) if scale is None else scale
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol * scale, err_msg=what)


def forward_check(ops, got, dtype, view):
    (x,) = ops
    gamma, beta = params(x.shape[-1])
    x64 = np.asarray(x, np.float64)
    mean, var = x64.mean(-1), x64.var(-1)
    y = (x64 - mean[..., None]) / np.sqrt(var[..., None] + 1e-5) * gamma + beta
    close(got[0], y, dtype, f"{view} y")
    close(got[1], mean, np.float32, f"{view} mean", scale=np.abs(x64).max(initial=1.0))
    close(got[2], var, np.float32, f"{view} variance")


def grad_check(ops, got, dtype, view):
    dy, x = ops
    gamma, beta = params(x.shape[-1])
    _, mean, var = jax.jit(forward)(np.ascontiguousarray(x))
    pd_x, res = layer_norm_grad_ref(dy, x, var, mean, gamma)
    close(got[0], pd_x, dtype, f"{view} pd_x")
    close(got[1], res, dtype, f"{view} res_for_gamma")


def vjp_check(ops, got, dtype, view):
    x, dy = ops
    gamma, beta = params(x.shape[-1])
    forward_check((x,), (got[0], *jax.jit(forward)(np.ascontiguousarray(x))[1:]), dtype, view)
    _, mean, var = jax.jit(forward)(np.ascontiguousarray(x))
    dx, dgamma, dbeta = layer_norm_backward_ref(dy, x, var, mean, gamma)
    close(got[1], dx, dtype, f"{view} dx")
    # Sums over rows, relative to the largest magnitude summed (|res| <= 4
    # here). The chained backward rounds res_for_gamma to x's dtype first.
    rows = max(1, x.size // x.shape[-1])
    dy_max = np.abs(np.asarray(dy, np.float64)).max(initial=1.0)
    close(got[2], dgamma, dtype, f"{view} pd_gamma", scale=rows * dy_max * 4)
    close(got[3], dbeta, np.float32, f"{view} pd_beta", scale=rows * dy_max)


@dataclasses.dataclass(frozen=True)
class Prim:
    fn: Callable
    target: str  # the FFI target whose custom call the layout checks inspect
    rows: int  # how many row operands (views) fn takes
    check: Callable  # (numpy views, results, dtype, view name) -> None


PRIMITIVES = {
    "grad_beta": Prim(layer_norm_grad_beta, FFI_TARGET, 2, grad_beta_check),
    "forward": Prim(forward, FORWARD_TARGET, 1, forward_check),
    "grad": Prim(grad, GRAD_TARGET, 2, grad_check),
    "backward": Prim(vjp("fused"), BACKWARD_TARGET, 2, vjp_check),
    "chained": Prim(vjp("chained"), GRAD_TARGET, 2, vjp_check),
}

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
    p = PRIMITIVES[prim]
    shape, take = VIEWS[view]
    stored = [random_array(rng, shape, dtype, scale=2.0 if i else 1.0) for i in range(p.rows)]
    got = jax.jit(lambda *a: p.fn(*map(take, a)))(*stored)
    views = [numpy_view(view, a) for a in stored]
    dense = p.fn(*map(np.ascontiguousarray, views))
    for a, b in zip(got, dense, strict=True):
        np.testing.assert_array_equal(bits(a), bits(b))
    # ... and those are the results of the view, not of the storage.
    p.check(views, got, dtype, view)


def row_major_list(text: str) -> bool:
    """Whether a minor-to-major list ("1, 0", "0", "") is row-major."""
    dims = [int(d) for d in text.replace(" ", "").split(",") if d]
    return dims == list(reversed(range(len(dims))))


@pytest.mark.parametrize("prim", PRIMITIVES)
@pytest.mark.parametrize("view", ["transpose", "moveaxis", "column-step", "broadcast-row", "reversed"])
def test_lowering_pins_operands_to_row_major(view, prim):
    p = PRIMITIVES[prim]
    shape, take = VIEWS[view]
    x = jax.ShapeDtypeStruct(shape, jnp.float32)
    lowered = jax.jit(lambda *a: p.fn(*map(take, a))).lower(*[x] * p.rows)
    # StableHLO: operand_layouts are minor-to-major lists; row-major is
    # [rank-1, ..., 0] for every operand (the views and [H] parameters).
    (line,) = custom_call_lines(lowered.as_text(), f"@{p.target}(")
    layouts = re.findall(
        r"dense<\[?([\d, ]*)\]?>", re.search(r"operand_layouts = \[(.*?)\], result_layouts", line).group(1)
    )
    n_operands = len(re.search(r"custom_call @\w+\((.*?)\)", line).group(1).split(", "))
    assert len(layouts) == n_operands and all(map(row_major_list, layouts)), layouts
    rank = take(jnp.zeros(shape)).ndim
    # Compiled HLO: the custom call's layout constraints and the layouts of
    # the instructions feeding it are row-major: XLA copied the view.
    hlo = lowered.compile().as_text()
    (call,) = custom_call_lines(hlo, f'custom_call_target="{p.target}"')
    constraints = re.search(r"operand_layout_constraints=\{(.*?)\}, api_version", call).group(1)
    shapes = re.findall(r"\w+\[[\d,]*\]\{([\d,]*)\}", constraints)
    assert len(shapes) == n_operands and all(map(row_major_list, shapes)), constraints
    assert row_major(rank) in constraints, constraints  # the views themselves
    operands = re.search(r"custom-call\((.*?)\)", call).group(1).split(", ")
    for name in operands:
        (defn,) = [ln for ln in hlo.splitlines() if re.match(rf"\s*(ROOT )?{re.escape(name)} = ", ln)]
        layout = re.search(r" = \w+\[[\d,]*\]\{([\d,]*)\}", defn).group(1)
        assert row_major_list(layout), defn


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


@pytest.mark.parametrize("prim", ["forward", "grad", "backward"])
def test_column_major_device_buffers_layer_norm(prim, rng):
    # The same for the LayerNorm kernels: column-major x and dy on the
    # device reach the custom call as row-major copies, with the results of
    # the row-major arrays.
    layout = pytest.importorskip("jax.experimental.layout", reason="jax's layout API is needed for this check")
    p = PRIMITIVES[prim]
    sharding = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    fmt = layout.Format(layout.Layout(major_to_minor=(1, 0)), sharding)
    host = [random_array(rng, (333, 24), jnp.float32) for _ in range(p.rows)]
    dev = [jax.device_put(a, fmt) for a in host]
    assert all(d.format.layout.major_to_minor == (1, 0) for d in dev)
    f = jax.jit(p.fn, in_shardings=(fmt,) * p.rows)
    hlo = f.lower(*dev).compile().as_text()
    (call,) = custom_call_lines(hlo, f'custom_call_target="{p.target}"')
    assert "f32[333,24]{0,1}" not in call and "f32[333,24]{1,0}" in call, call
    for a, b in zip(f(*dev), jax.jit(p.fn)(*host), strict=True):
        np.testing.assert_array_equal(bits(a), bits(b))
