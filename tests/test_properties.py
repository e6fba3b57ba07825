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

The LayerNorm properties (forward, LayerNormGrad, the fused and chained
backward) compare with float64 NumPy references under error bounds derived
operation by operation from the kernels' float32 arithmetic (grad_bounds):
each rounding contributes u = 2^-24 of the magnitude it acts on, every sum
over H terms gamma_H times the sum of the magnitudes of its terms, then the
output rounding. With NaN/Inf in x, dy, gamma or beta, the non-finite
entries must be exactly the reference's (a row's NaN never reaches another
row's y or dx), NaN columns of pd_gamma/pd_beta exactly the reference's.
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
    OVERFLOW_THRESHOLD,
    U32,
    UNIT_ROUNDOFF,
    assert_float32_sums,
    grad_beta_terms,
)
from hypothesis import given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from jax_lngb import (  # noqa: E402
    layer_norm,
    layer_norm_forward_p,
    layer_norm_grad,
    layer_norm_grad_beta,
    layer_norm_grad_ref,
    layer_norm_ref,
)

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

# Where a special value may go in a LayerNorm example (x and dy are the
# common case; a special in gamma or beta reaches every row).
NORM_TARGETS = ("x", "x", "dy", "dy", "gamma", "beta")
NON_FINITE = ("nan", "inf", "-inf")


@dataclasses.dataclass(frozen=True)
class NormCase:
    shape: tuple[int, ...]
    dtype: np.dtype
    param_dtype: np.dtype
    offset: float  # rows centred far from zero stress the float32 mean
    scale: float
    epsilon: float
    seed: int
    dy_scale: float = 1.0
    specials: tuple[tuple[float, str, str], ...] = ()  # (position in [0, 1), value, array)

    def arrays(self):
        rng = np.random.default_rng(self.seed)
        x = (self.offset + self.scale * rng.standard_normal(self.shape)).astype(np.float32).astype(self.dtype)
        h = self.shape[-1]
        gamma = (1 + 0.5 * rng.standard_normal(h)).astype(np.float32).astype(self.param_dtype)
        beta = (0.5 * rng.standard_normal(h)).astype(np.float32).astype(self.param_dtype)
        return x, gamma, beta

    def with_dy(self):
        """(x, gamma, beta, dy) with the specials put in place."""
        x, gamma, beta = self.arrays()
        rng = np.random.default_rng(self.seed ^ 0x5EED)
        dy = (self.dy_scale * rng.standard_normal(self.shape)).astype(np.float32).astype(self.dtype)
        arrays = {"x": x.reshape(-1), "dy": dy.reshape(-1), "gamma": gamma, "beta": beta}
        for pos, name, where in self.specials:
            a = arrays[where]
            if a.size:
                a[int(pos * a.size)] = special_value(name, a.dtype)
        return x, gamma, beta, dy


@st.composite
def norm_cases(draw, min_rows: int = 0, specials: bool = False) -> NormCase:
    """Rank 1-4 (any leading axis may be 0 unless min_rows asks for rows),
    H from 1 to 768 with odd sizes; mostly small, sometimes big enough for
    several row blocks."""
    rank = draw(st.integers(1 if min_rows == 0 else 2, 4))
    h = draw(st.sampled_from([1, 2, 3, 5, 8, 17, 33, 64, 127, 257, 768]))
    remaining = max(1, (300_000 if draw(st.integers(0, 5)) == 0 else 20_000) // h)
    lead = []
    for i in range(rank - 1):
        lo = min_rows if i == 0 else (1 if min_rows else 0)
        d = draw(st.integers(lo, max(lo, min(remaining, 64))))
        lead.append(d)
        remaining = max(remaining // max(d, 1), 1)
    spec = ()
    if specials:
        spec = tuple(
            draw(
                st.lists(
                    st.tuples(
                        st.floats(0, 1, exclude_max=True), st.sampled_from(NON_FINITE), st.sampled_from(NORM_TARGETS)
                    ),
                    max_size=4,
                )
            )
        )
    return NormCase(
        shape=(*lead, h),
        dtype=draw(st.sampled_from(DTYPES)),
        param_dtype=draw(st.sampled_from(DTYPES)),
        offset=draw(st.sampled_from([0.0, 3.0, 100.0])),
        # 2^-20: 16-bit inputs are subnormal, the variance far below epsilon.
        scale=draw(st.sampled_from([2.0**-20, 2.0**-6, 1.0, 30.0])),
        epsilon=draw(st.sampled_from([1e-5, 1e-3, 0.5])),
        seed=draw(st.integers(0, 2**32 - 1)),
        dy_scale=draw(st.sampled_from([2.0**-20, 2.0**-10, 1.0, 2.0**10])),
        specials=spec,
    )


def gamma_n(n: float):
    """Higham's gamma_n = n u / (1 - n u) for float32 (u = 2^-24)."""
    return n * U32 / (1 - n * U32)


def finite_or_zero(a):
    return np.where(np.isfinite(a), a, 0.0)


# A float32 result below the smallest normal may be flushed to zero (XLA's
# CPU runtime runs with FTZ/DAZ): an absolute slack of that size.
FTZ_SLACK = 2.0**-125


def narrowed(err, ref, dtype):
    """A float32 error bound plus the rounding of the result to `dtype`."""
    ref = finite_or_zero(np.abs(ref))
    return err + UNIT_ROUNDOFF[np.dtype(dtype)] * (ref + err) + HALF_MIN_SUBNORMAL[np.dtype(dtype)] + FTZ_SLACK


def stats_bounds(x, mean_ref, var_ref):
    """Bounds on the forward's float32 mean and variance of each row.

    mean = fl(sum(x) / H): gamma_{H+1} times mean|x|. The variance is
    sum((x - m)^2) / H with the float32 mean m; that equals the exact variance
    plus (mean - m)^2, and each term carries 3 roundings, the sum gamma_H."""
    h = x.shape[-1]
    dm = gamma_n(h + 1) * np.abs(x).mean(-1)
    dv = dm**2 + gamma_n(h + 4) * (var_ref + dm**2)
    return dm + FTZ_SLACK, dv + FTZ_SLACK


def grad_bounds(dy, x, variance, mean, gamma, eps):
    """float64 bounds on the float32 errors of LayerNormGrad as the kernel
    computes it (see the module docstring of jax_lngb._ops.layer_norm.grad) from the given
    float64 operands; returns (pd_x bound, res_for_gamma bound), before the
    rounding to the output dtype. Non-finite entries are left to the
    non-finite checks (their bound is meaningless).

    Per row, with rstd = 1/sqrt(var + eps) (relative error 6u, the float32
    epsilon included), x2 = x - mean and x1 = dy * gamma (one rounding each):
      s0 = sum x1 x2, s1 = sum x1, s2 = sum x2: gamma_{H+3} M0,
        gamma_{H+2} M1, gamma_{H+2} M2 with Mi the sums of magnitudes;
      pd_var = -0.5 rstd^3 s0 (21u more); pd_mean = -rstd s1 + (pd_var/H)(-2 s2);
      pd_x = (pd_var 2/H) x2 + pd_mean/H + x1 rstd; res = x2 rstd.
    Every quantity's error is propagated to first order with its magnitude
    bound (never its signed value), so the bound holds whatever cancels."""
    h = x.shape[-1]
    with np.errstate(all="ignore"):
        rs = finite_or_zero(1.0 / np.sqrt(variance[..., None] + eps))
        ax1 = finite_or_zero(np.abs(dy * gamma))
        ax2 = finite_or_zero(np.abs(x - mean[..., None]))
    m0 = (ax1 * ax2).sum(-1, keepdims=True)
    m1 = ax1.sum(-1, keepdims=True)
    m2 = ax2.sum(-1, keepdims=True)
    d0, d1, d2 = gamma_n(h + 3) * m0, gamma_n(h + 2) * m1, gamma_n(h + 2) * m2
    rs3 = rs**3
    pv = 0.5 * rs3 * m0  # |pd_var| <= pv
    dpv = 0.5 * rs3 * (d0 + gamma_n(21) * (m0 + d0))
    a, da = rs * m1, rs * d1 + gamma_n(8) * rs * (m1 + d1)
    b = (2 / h) * pv * m2
    db = (2 / h) * (dpv * (m2 + d2) + pv * d2) + gamma_n(4) * (2 / h) * (pv + dpv) * (m2 + d2)
    pm, dpm = a + b, da + db + gamma_n(1) * (a + b + da + db)  # |pd_mean| <= pm
    av, dav = (2 / h) * pv, (2 / h) * (dpv + gamma_n(3) * (pv + dpv))
    bv, dbv = pm / h, (dpm + gamma_n(3) * (pm + dpm)) / h
    t1, dt1 = av * ax2, (dav + gamma_n(3) * (av + dav)) * ax2
    t3, dt3 = ax1 * rs, gamma_n(9) * ax1 * rs
    d_pd_x = dt1 + dbv + dt3 + gamma_n(2) * (t1 + bv + t3 + dt1 + dbv + dt3)
    d_res = gamma_n(10) * ax2 * rs
    return d_pd_x, d_res


def assert_close_and_same_non_finite(got, ref, bound, what: str, nan_exact: bool = True, out_dtype=None) -> None:
    """Finite exactly where `ref` is finite, and there within `bound`; NaN
    exactly where `ref` is NaN when nan_exact (an Inf input may make a sum
    inf - inf in one precision and a signed infinity in the other). With
    out_dtype, a finite value whose rounding to that dtype may overflow
    (float16: |value| near 65520) may come out as the infinity of its sign."""
    g = np.asarray(got, np.float64)
    fin_g, fin_r = np.isfinite(g), np.isfinite(ref)
    if out_dtype is not None:
        with np.errstate(invalid="ignore"):
            may_overflow = fin_r & (np.abs(ref) + bound >= OVERFLOW_THRESHOLD[np.dtype(out_dtype)])
            overflowed = may_overflow & np.isinf(g) & (np.sign(g) == np.sign(ref))
        fin_g = fin_g | overflowed
        g = np.where(overflowed, ref, g)
    bad = np.argwhere(fin_g != fin_r)
    assert bad.size == 0, (
        f"{what}: finite where the reference is not (or vice versa) at {tuple(bad[0])}: got {g[tuple(bad[0])]}, reference {ref[tuple(bad[0])]}"
    )
    if nan_exact:
        bad = np.argwhere(np.isnan(g) != np.isnan(ref))
        assert bad.size == 0, (
            f"{what}: NaN pattern differs at {tuple(bad[0])}: got {g[tuple(bad[0])]}, reference {ref[tuple(bad[0])]}"
        )
    with np.errstate(invalid="ignore"):
        err = np.where(fin_r, np.abs(g - ref), 0.0)
    over = err > bound
    assert not over.any(), (
        f"{what}: {over.sum()} of {over.size} values beyond the bound; worst at {tuple(np.argwhere(over)[0])}: "
        f"err {err[over].max():.3g} vs bound {bound[over][np.argmax(err[over])]:.3g}"
    )


def assert_column_sums(got, terms, term_err, out_dtype, what: str, flush_to_zero: bool) -> None:
    """Checks pd_gamma-like sums over rows of float64 `terms` [n, H] whose
    float32 counterparts carry up to `term_err` each: NaN exactly where the
    float64 sum is NaN, the same infinity where it is infinite, elsewhere
    within gamma_{n+1} of the summed magnitudes plus the term errors and the
    rounding to out_dtype (values stay far below float32's overflow here)."""
    n = terms.shape[0]
    g = np.asarray(got, np.float64)
    with np.errstate(invalid="ignore"):
        ref = terms.sum(0)
    mag = finite_or_zero(np.abs(terms)).sum(0)
    terr = finite_or_zero(term_err).sum(0)
    err = gamma_n(n + 1) * (mag + terr) + terr + n * (2.0**-125 if flush_to_zero else 2.0**-149)
    bound = narrowed(err, ref, out_dtype)
    assert_close_and_same_non_finite(g, ref, bound, what, out_dtype=out_dtype)


@functools.cache
def jitted_layer_norm(epsilon: float):
    """(forward, gradient of a weighted sum) for one epsilon, jitted once."""

    def loss(x, gamma, beta, w):
        return jnp.sum(layer_norm(x, gamma, beta, epsilon=epsilon).astype(jnp.float32) * w)

    return jax.jit(functools.partial(layer_norm, epsilon=epsilon)), jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


@functools.cache
def jitted_forward_stats(epsilon: float):
    """y and the float32 mean and variance the backward reuses."""
    return jax.jit(lambda x, g, b: layer_norm_forward_p.bind(x, g, b, epsilon=epsilon, batch_dims=0, backward="fused"))


@functools.cache
def jitted_vjp(epsilon: float, backward: str):
    def f(x, gamma, beta, dy):
        y, pullback = jax.vjp(lambda *a: layer_norm(*a, epsilon=epsilon, backward=backward), x, gamma, beta)
        return (y, *pullback(dy))

    return jax.jit(f)


@functools.cache
def jitted_layer_norm_grad(epsilon: float):
    return jax.jit(functools.partial(layer_norm_grad, epsilon=epsilon))


def f64(a) -> np.ndarray:
    return np.asarray(a, np.float64)


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
    # The statistics the backward reuses, and y again: the same kernel.
    y2, mean, var = jitted_forward_stats(case.epsilon)(x, gamma, beta)
    assert mean.dtype == var.dtype == np.float32 and mean.shape == var.shape == x.shape[:-1]
    np.testing.assert_array_equal(np.asarray(y2), np.asarray(y))
    mean_ref, var_ref = x64.mean(-1), x64.var(-1)
    dm, dv = stats_bounds(x64, mean_ref, var_ref)
    assert np.all(np.abs(f64(mean) - mean_ref) <= dm), "mean"
    assert np.all(np.abs(f64(var) - var_ref) <= dv), "variance"


@settings(max_examples=SOME)
@given(case=norm_cases(specials=True), data=st.data())
def test_layer_norm_grad_against_float64(case, data):
    """The public LayerNormGrad on given statistics, which may be 16-bit and
    need not be x's own (the op is defined for any mean and variance)."""
    x, gamma, _, dy = case.with_dy()
    stats_dtype = data.draw(st.sampled_from(DTYPES), label="statistics dtype")
    shift = data.draw(st.sampled_from([0.0, 0.25, -3.0]), label="mean shift (in standard deviations)")
    with np.errstate(all="ignore"):
        x64 = f64(x)
        mean = (x64.mean(-1) + shift * x64.std(-1)).astype(np.float32).astype(stats_dtype)
        var = x64.var(-1).astype(np.float32).astype(stats_dtype)
    pd_x, res = jitted_layer_norm_grad(case.epsilon)(dy, x, var, mean, gamma)
    assert pd_x.shape == res.shape == x.shape and pd_x.dtype == res.dtype == case.dtype
    with np.errstate(all="ignore"):  # NaN and Inf rows are expected
        ref_pd_x, ref_res = layer_norm_grad_ref(dy, x, var, mean, gamma, epsilon=case.epsilon)
    d_pd_x, d_res = grad_bounds(f64(dy), x64, f64(var), f64(mean), f64(gamma), case.epsilon)
    has_inf = any(name != "nan" for _, name, _ in case.specials)
    note(f"specials {case.specials}")
    for name, got, ref, err in (("pd_x", pd_x, ref_pd_x, d_pd_x), ("res_for_gamma", res, ref_res, d_res)):
        assert_close_and_same_non_finite(got, ref, narrowed(err, ref, case.dtype), name, not has_inf, case.dtype)


@settings(max_examples=SOME)
@given(case=norm_cases(specials=True), backward=st.sampled_from(["fused", "chained"]))
def test_layer_norm_backward_against_float64(case, backward):
    """dx, pd_gamma and pd_beta of the VJP (the fused kernel, or CANN's chain
    of LayerNormGrad and LayerNormGradBeta) against float64 from the same
    float32 statistics; non-finite values go exactly where the float64
    reference puts them: a NaN in a row of x spoils that row of y and dx
    (and, through res_for_gamma, every pd_gamma column), never another row."""
    x, gamma, beta, dy = case.with_dy()
    y_stats, mean, var = jitted_forward_stats(case.epsilon)(x, gamma, beta)
    y, dx, dgamma, dbeta = jitted_vjp(case.epsilon, backward)(x, gamma, beta, dy)
    assert dx.shape == x.shape and dx.dtype == case.dtype
    assert dgamma.shape == dbeta.shape == gamma.shape and dgamma.dtype == dbeta.dtype == case.param_dtype
    np.testing.assert_array_equal(np.asarray(y), np.asarray(y_stats))
    h = x.shape[-1]
    x64, dy64, g64, b64, m64, v64 = map(f64, (x, dy, gamma, beta, mean, var))
    has_inf = any(name != "nan" for _, name, _ in case.specials)
    note(f"specials {case.specials}")
    with np.errstate(all="ignore"):
        rs = 1.0 / np.sqrt(v64[..., None] + case.epsilon)
        xhat = (x64 - m64[..., None]) * rs
        y_ref = xhat * g64 + b64
    # y from the kernel's own statistics: only its non-finite pattern here
    # (test_layer_norm_forward_against_float64 bounds the finite values).
    with np.errstate(invalid="ignore"):
        assert np.array_equal(np.isfinite(f64(y)), np.isfinite(y_ref)), "y: non-finite entries differ"
        if not has_inf:
            assert np.array_equal(np.isnan(f64(y)), np.isnan(y_ref)), "y: NaN entries differ"

    with np.errstate(all="ignore"):  # NaN and Inf rows are expected
        ref_dx, ref_res = layer_norm_grad_ref(dy, x, var, mean, gamma, epsilon=case.epsilon)
    d_dx, d_res = grad_bounds(dy64, x64, v64, m64, g64, case.epsilon)
    assert_close_and_same_non_finite(dx, ref_dx, narrowed(d_dx, ref_dx, case.dtype), "dx", not has_inf, case.dtype)

    # pd_gamma sums res_for_gamma * dy over rows: float32 res_for_gamma in
    # the fused kernel, rounded to x's dtype in the chained one.
    ftz = kernel_flushes_subnormals()
    res_err = d_res if backward == "fused" else narrowed(d_res, ref_res, case.dtype)
    with np.errstate(invalid="ignore"):
        terms = (ref_res * dy64).reshape(-1, h)
        term_err = (res_err * np.abs(dy64)).reshape(-1, h)
    assert_column_sums(dgamma, terms, term_err, case.param_dtype, "pd_gamma", ftz)
    assert_float32_sums(dbeta, grad_beta_terms(dy, dy, flush_to_zero=ftz)[1], case.param_dtype, "pd_beta", ftz)


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
