"""Property tests: random shapes, dtypes and value ranges against float64
NumPy references, NaN and Inf included.

Shapes cover rank 1-4, zero rows, H = 1, odd H and sizes that split into
several row blocks; values come in kinds (normal at several scales, the whole
finite range of the dtype, subnormals, values near the overflow threshold,
small integers, exact cancellation) with NaN, +-Inf, +-0, the largest value
and the smallest subnormal sprinkled at drawn positions. The bulk of each
array comes from a seeded NumPy generator so examples stay cheap and
hypothesis shrinks the parameters that matter (shape, kinds, specials).

The gamma/beta checks (conftest.assert_float32_sums) model what float32
accumulation may legitimately do (overflow of products and partial sums the
float64 reference does not see) and require exact IEEE behaviour everywhere
else. Profiles: conftest.py (`CI=true` selects the derandomized `ci` one).

For a new primitive that returns gamma/beta sums, add a property that feeds
`grad_beta_cases()` through it and checks with assert_float32_sums.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the `test` extra")
from conftest import (  # noqa: E402
    HALF_MIN_SUBNORMAL,
    U32,
    UNIT_ROUNDOFF,
    assert_float32_sums,
    grad_beta_terms,
)
from hypothesis import given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from jax_lngb import layer_norm, layer_norm_grad_beta, layer_norm_ref  # noqa: E402

# LayerNorm examples compile a forward and a backward per new shape: they
# get a fraction of the profile's example budget.
FEW = max(8, settings.default.max_examples // 4)
SOME = max(10, settings.default.max_examples // 2)

F32, F16, BF16 = np.dtype(jnp.float32), np.dtype(jnp.float16), np.dtype(jnp.bfloat16)
DTYPES = [F32, F16, BF16]

# (unsigned storage type, exponent bits, mantissa bits)
FORMATS = {F32: (np.uint32, 8, 23), F16: (np.uint16, 5, 10), BF16: (np.uint16, 8, 7)}
KINDS = ("normal", "wide", "tiny", "huge", "ints", "signed-zeros")
SPECIALS = ("nan", "inf", "-inf", "0", "-0", "max", "-max", "min-subnormal", "-min-subnormal")


def special_value(name: str, dtype: np.dtype):
    fi = jnp.finfo(dtype)
    v = {
        "nan": np.nan,
        "inf": np.inf,
        "-inf": -np.inf,
        "0": 0.0,
        "-0": -0.0,
        "max": float(fi.max),
        "-max": -float(fi.max),
        "min-subnormal": float(fi.smallest_subnormal),
        "-min-subnormal": -float(fi.smallest_subnormal),
    }[name]
    return np.asarray(v, np.float32).astype(dtype)


def field_values(rng, n: int, dtype: np.dtype, exp_lo: int, exp_hi: int) -> np.ndarray:
    """Finite values with uniformly random sign and mantissa and an exponent
    field uniform in [exp_lo, exp_hi] (0 = subnormal): built from bits, so no
    float64 detour and every binade is equally likely."""
    ut, e, m = FORMATS[dtype]
    exp = rng.integers(exp_lo, exp_hi + 1, n, dtype=np.uint64)
    man = rng.integers(0, 1 << m, n, dtype=np.uint64)
    sign = rng.integers(0, 2, n, dtype=np.uint64)
    return ((sign << (e + m)) | (exp << m) | man).astype(ut).view(dtype)


def values(rng, n: int, dtype: np.dtype, kind: str, scale: float) -> np.ndarray:
    emax = (1 << FORMATS[dtype][1]) - 2  # largest finite exponent field
    if kind == "normal":
        return (rng.standard_normal(n) * scale).astype(np.float32).astype(dtype)
    if kind == "wide":
        return field_values(rng, n, dtype, 0, emax)
    if kind == "tiny":
        return field_values(rng, n, dtype, 0, 2)
    if kind == "huge":
        return field_values(rng, n, dtype, emax - 3, emax)
    if kind == "ints":
        return rng.integers(-4, 5, n).astype(np.float32).astype(dtype)
    if kind == "signed-zeros":
        return np.where(rng.integers(0, 2, n) == 1, -0.0, 0.0).astype(np.float32).astype(dtype)
    raise ValueError(kind)


@dataclasses.dataclass(frozen=True)
class GradBetaCase:
    shape: tuple[int, ...]
    dtype: np.dtype
    out_dtype: np.dtype | None
    res_kind: str
    dy_kind: str
    scale: float
    mirror: bool  # second half of the rows = minus the first half (exact cancellation)
    specials: tuple[tuple[float, str, bool], ...]  # (position in [0, 1), value, in dy?)
    seed: int

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        n = math.prod(self.shape)
        res = values(rng, n, self.dtype, self.res_kind, self.scale)
        dy = values(rng, n, self.dtype, self.dy_kind, self.scale)
        h = self.shape[-1]
        rows = n // h if h else 0
        if self.mirror and rows >= 2:
            half = rows // 2
            d2 = dy.reshape(rows, h)
            d2[half : 2 * half] = -d2[:half]
        for pos, name, in_dy in self.specials:
            if n:
                (dy if in_dy else res)[int(pos * n)] = special_value(name, self.dtype)
        return res.reshape(self.shape), dy.reshape(self.shape)


@st.composite
def shapes(draw, min_rank: int = 1, max_rank: int = 4) -> tuple[int, ...]:
    rank = draw(st.integers(min_rank, max_rank))
    h = draw(
        st.one_of(
            st.sampled_from([1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 255, 257, 1000, 4097]),
            st.integers(1, 300),
        )
    )
    # Mostly small; sometimes big enough (f32: > 2 MiB) for several row blocks.
    budget = (700_000 if draw(st.integers(0, 5)) == 0 else 20_000) // h
    lead = []
    remaining = max(budget, 1)
    for _ in range(rank - 1):
        d = draw(st.integers(0, remaining))
        lead.append(d)
        remaining = max(remaining // max(d, 1), 1)
    return (*lead, h)


@st.composite
def grad_beta_cases(draw, min_rank: int = 1) -> GradBetaCase:
    dtype = draw(st.sampled_from(DTYPES))
    return GradBetaCase(
        shape=draw(shapes(min_rank=min_rank)),
        dtype=dtype,
        out_dtype=draw(st.sampled_from([None, *DTYPES])),
        res_kind=draw(st.sampled_from(KINDS)),
        dy_kind=draw(st.sampled_from(KINDS)),
        scale=draw(st.sampled_from([2.0**-12, 1.0, 2.0**12])),
        mirror=draw(st.booleans()),
        specials=tuple(
            draw(
                st.lists(
                    st.tuples(st.floats(0, 1, exclude_max=True), st.sampled_from(SPECIALS), st.booleans()),
                    max_size=6,
                )
            )
        ),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


@functools.cache
def jitted_grad_beta(out_dtype):
    return jax.jit(functools.partial(layer_norm_grad_beta, out_dtype=out_dtype))


@functools.cache
def kernel_flushes_subnormals() -> bool:
    """Whether the kernel runs with FTZ/DAZ. XLA's CPU runtime sets both for
    everything it executes, custom calls included, so a float32 subnormal
    input counts as zero, exactly as in XLA's own reductions; the checks
    use the model of whichever environment the kernel really runs in."""
    tiny = np.full((1, 1), 2.0**-130, np.float32)
    _, beta = layer_norm_grad_beta(np.ones((1, 1), np.float32), tiny)
    return float(beta[0]) == 0.0


def test_subnormals_follow_xla_cpu_convention():
    # The kernel and XLA's own reduction agree on subnormal inputs.
    tiny = np.full((64, 8), 2.0**-130, np.float32)
    _, beta = layer_norm_grad_beta(np.ones_like(tiny), tiny)
    xla = jax.jit(lambda a: jnp.sum(a * 1.0, axis=0))(tiny)
    np.testing.assert_array_equal(np.asarray(beta), np.asarray(xla))
    assert kernel_flushes_subnormals() == (float(xla[0]) == 0.0)


@given(case=grad_beta_cases())
def test_grad_beta_against_float64(case):
    res, dy = case.arrays()
    out = case.out_dtype or case.dtype
    g, b = jitted_grad_beta(case.out_dtype)(res, dy)
    assert g.shape == b.shape == case.shape[-1:]
    assert g.dtype == b.dtype == out
    ftz = kernel_flushes_subnormals()
    tg, tb = grad_beta_terms(res, dy, flush_to_zero=ftz)
    note(f"rows {tg.shape[-2]}, flush to zero {ftz}")
    assert_float32_sums(g, tg, out, "pd_gamma", flush_to_zero=ftz)
    assert_float32_sums(b, tb, out, "pd_beta", flush_to_zero=ftz)


@given(case=grad_beta_cases(min_rank=2), data=st.data())
def test_vmapped_grad_beta_against_float64_per_element(case, data):
    axis = data.draw(st.integers(-len(case.shape), len(case.shape) - 1), label="in_axis")
    res, dy = case.arrays()
    f = jax.jit(jax.vmap(functools.partial(layer_norm_grad_beta, out_dtype=case.out_dtype), in_axes=axis))
    g, b = f(res, dy)
    res0, dy0 = np.moveaxis(res, axis, 0), np.moveaxis(dy, axis, 0)
    assert g.shape == (res0.shape[0], res0.shape[-1])
    ftz = kernel_flushes_subnormals()
    tg, tb = grad_beta_terms(res0, dy0, groups=1, flush_to_zero=ftz)
    out = case.out_dtype or case.dtype
    assert_float32_sums(g, tg, out, "vmapped pd_gamma", flush_to_zero=ftz)
    assert_float32_sums(b, tb, out, "vmapped pd_beta", flush_to_zero=ftz)


# ------------------------------------------------------------ layer_norm


@dataclasses.dataclass(frozen=True)
class NormCase:
    shape: tuple[int, ...]
    dtype: np.dtype
    param_dtype: np.dtype
    offset: float  # rows centred far from zero stress the float32 mean
    scale: float
    epsilon: float
    seed: int

    def arrays(self):
        rng = np.random.default_rng(self.seed)
        x = (self.offset + self.scale * rng.standard_normal(self.shape)).astype(np.float32).astype(self.dtype)
        h = self.shape[-1]
        gamma = (1 + 0.5 * rng.standard_normal(h)).astype(np.float32).astype(self.param_dtype)
        beta = (0.5 * rng.standard_normal(h)).astype(np.float32).astype(self.param_dtype)
        return x, gamma, beta


@st.composite
def norm_cases(draw, min_rows: int = 0) -> NormCase:
    rank = draw(st.integers(1 if min_rows == 0 else 2, 3))
    h = draw(st.sampled_from([1, 2, 3, 8, 17, 64, 127, 768]))
    lead = [draw(st.integers(min_rows if i == 0 else 1, 12)) for i in range(rank - 1)]
    return NormCase(
        shape=(*lead, h),
        dtype=draw(st.sampled_from(DTYPES)),
        param_dtype=draw(st.sampled_from(DTYPES)),
        offset=draw(st.sampled_from([0.0, 3.0, 100.0])),
        scale=draw(st.sampled_from([2.0**-6, 1.0, 30.0])),
        epsilon=draw(st.sampled_from([1e-5, 1e-3, 0.5])),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


@functools.cache
def jitted_layer_norm(epsilon: float):
    """(forward, gradient of a weighted sum) for one epsilon, jitted once."""

    def loss(x, gamma, beta, w):
        return jnp.sum(layer_norm(x, gamma, beta, epsilon=epsilon).astype(jnp.float32) * w)

    return jax.jit(functools.partial(layer_norm, epsilon=epsilon)), jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


@settings(max_examples=SOME)
@given(case=norm_cases())
def test_layer_norm_forward_against_float64(case):
    x, gamma, beta = case.arrays()
    y = jitted_layer_norm(case.epsilon)[0](x, gamma, beta)
    assert y.shape == x.shape and y.dtype == case.dtype
    ref = layer_norm_ref(x, gamma, beta, epsilon=case.epsilon)
    # float32 statistics: the mean carries ~H u max|x| of error, which the
    # normalisation divides by sqrt(var + eps); the normalised value is at
    # most sqrt(H); then the output rounding.
    h = x.shape[-1]
    x64 = np.asarray(x, np.float64)
    s = np.sqrt(x64.var(-1, keepdims=True) + case.epsilon)
    g64, b64 = np.abs(np.asarray(gamma, np.float64)), np.abs(np.asarray(beta, np.float64))
    norm_err = 2 * (h + 2) * U32 * np.abs(x64).max(-1, keepdims=True) / s + 4 * (h + 4) * math.sqrt(h) * U32
    bound = g64 * norm_err + 4 * U32 * (g64 * math.sqrt(h) + b64)
    bound = bound + UNIT_ROUNDOFF[case.dtype] * (np.abs(ref) + bound) + HALF_MIN_SUBNORMAL[case.dtype]
    err = np.abs(np.asarray(y, np.float64) - ref)
    assert np.all(err <= bound), f"worst error {err.max()} (bound there {bound.flat[np.argmax(err)]})"


@settings(max_examples=FEW)
@given(case=norm_cases(min_rows=2), data=st.data())
def test_layer_norm_non_finite_inputs_stay_in_their_row(case, data):
    """NaN or Inf in a row of x poisons that row's output and dx (and every
    pd_gamma entry, through res_for_gamma), and nothing else: other rows and
    pd_beta (which never sees x) are bitwise unchanged."""
    x, gamma, beta = case.arrays()
    h = x.shape[-1]
    x2 = x.reshape(-1, h).copy()
    rows = x2.shape[0]
    bad = sorted(set(data.draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=3), label="bad rows")))
    for r in bad:
        col = data.draw(st.integers(0, h - 1), label="column")
        x2[r, col] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]), label="value")
    x_bad = x2.reshape(x.shape)
    w = np.random.default_rng(case.seed).standard_normal(x.shape).astype(np.float32)
    fwd, grad = jitted_layer_norm(case.epsilon)
    y_ok, y_bad = (np.asarray(fwd(a, gamma, beta), np.float32).reshape(-1, h) for a in (x, x_bad))
    (dx_ok, dg_ok, db_ok), (dx_bad, dg_bad, db_bad) = (grad(a, gamma, beta, w) for a in (x, x_bad))
    dx_ok = np.asarray(dx_ok, np.float32).reshape(-1, h)
    dx_bad = np.asarray(dx_bad, np.float32).reshape(-1, h)
    clean = np.setdiff1d(np.arange(rows), bad)
    assert np.isnan(y_bad[bad]).all() and np.isnan(dx_bad[bad]).all()
    np.testing.assert_array_equal(y_bad[clean].view(np.uint32), y_ok[clean].view(np.uint32))
    np.testing.assert_array_equal(dx_bad[clean].view(np.uint32), dx_ok[clean].view(np.uint32))
    assert np.isnan(np.asarray(dg_bad, np.float32)).all()
    assert not np.isnan(np.asarray(dg_ok, np.float32)).any()
    np.testing.assert_array_equal(np.asarray(db_bad, np.float32), np.asarray(db_ok, np.float32))
