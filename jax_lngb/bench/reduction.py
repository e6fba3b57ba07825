"""Benchmark section ``reduction``: LayerNormGradBeta (the gamma/beta
gradient sums) against XLA, NumPy, PyTorch and the streaming-read probe.

    pd_gamma[h] = sum over rows of dy * res_for_gamma,  pd_beta[h] = sum over rows of dy

Every leading axis is a row axis. Inputs are standard normal (res_for_gamma
is a normalised activation, dy a gradient) in the case's dtype; outputs are
in the same dtype, summed in float32.

Implementations, all on the same input buffers:

* ``ours``: ``jax.jit(jax_lngb.layer_norm_grad_beta)``, the C++ kernel.
* ``xla``: ``jax.jit`` of the plain expression, float32 accumulation:
  ``sum(f32(res) * f32(dy), rows)``, ``sum(f32(dy), rows)``, narrowed to the
  input dtype.
* ``numpy``: ``np.einsum('rh,rh->h', res, dy, dtype=float32)`` and
  ``dy.sum(0, dtype=float32)``, narrowed to the input dtype. 16-bit inputs
  are widened by NumPy's own buffered casting inside the timed call: a
  float32 copy made beforehand would hide that cost (and read other bytes).
* ``torch``: ``aten.native_layer_norm_backward`` with output mask (False,
  True, True), when PyTorch is installed. It normalises its input itself, so
  it gets input=res_for_gamma, mean=0, rstd=1 (its xhat is then exactly
  res_for_gamma), weight=1, bias=0, all in the case's dtype; the arrays are
  shared with JAX through DLPack, not copied.
* ``probe``: the streaming-read probe (``common.stream_read``) on res and
  dy: the same bytes read once by all cores, doing nothing else. Its GB/s is
  the ceiling.

Bytes: ``bytes_read`` is both inputs read once. ``fraction_of_probe`` is then
the probe's time over the implementation's.

Errors are against the float64 sums. ``max_rel`` is the largest error over
the largest |reference| of the same output; ``max_ulps`` is the largest
error in units of the output dtype's spacing at that largest |reference|.
``vs_rounding`` compares each element's error with what rounding the exact
sum to the output dtype may cost plus a float32 accumulation allowance (see
`rounding_allowance`): at most 1 means the result is as good as the exact
sum rounded once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .common import (
    BenchContext,
    CaseResult,
    Impl,
    Target,
    format_shape,
    optional_torch,
    ready,
    speedup_target,
    stream_read,
    ulp,
)

NAME = "reduction"
TITLE = "LayerNormGradBeta (gamma/beta sums) vs XLA, NumPy, PyTorch and the streaming-read probe"
DEFAULT_SHAPES: list[tuple[int, ...]] = [
    (65536, 768),
    (8192, 1024),
    (4096, 4096),
    (1024, 16384),
    (262144, 64),
    (64, 262144),
]
HEADLINE_SHAPE = (65536, 768)
IMPLEMENTATIONS = ("ours", "xla", "numpy", "torch", "probe")
OUTPUTS = ("pd_gamma", "pd_beta")
_REF_ROWS = 4096
_F32_UNIT_ROUNDOFF = 2.0**-24
# Confidence of the float32 accumulation allowance (see _reference): a bound
# that fails with probability at most 2 exp(-LAMBDA^2 / 2) = 3e-8 per sum.
_LAMBDA = 6.0


def _label(shape: tuple[int, ...], dtype: str) -> str:
    return f"{format_shape(shape)} {dtype}"


# ------------------------------------------------------------- reference


def _reference(res2d: np.ndarray, dy2d: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{output: (float64 sum, float32 accumulation allowance)}, a block of
    rows at a time so the float64 copies stay small.

    The allowance is the probabilistic bound of float32 summation in row
    order (Higham and Mary, 2019, in its partial-sum form): rounding errors
    taken as independent, zero-mean and at most u = 2^-24 in relative size,
    the error of sum_k t_k is below LAMBDA * u * sqrt(sum_k s_k^2) (s_k the
    running sums) with probability at least 1 - 2 exp(-LAMBDA^2 / 2), plus
    LAMBDA * u * sqrt(sum_k t_k^2) for rounding each product. Summing blocks
    of rows separately (ours) or pairwise (XLA) keeps the running sums, and
    so the error, smaller still."""
    h = res2d.shape[1]
    sums = {n: np.zeros(h) for n in OUTPUTS}
    running_sq = {n: np.zeros(h) for n in OUTPUTS}
    product_sq = np.zeros(h)
    for r0 in range(0, res2d.shape[0], _REF_ROWS):
        d = dy2d[r0 : r0 + _REF_ROWS].astype(np.float64)
        t = res2d[r0 : r0 + _REF_ROWS].astype(np.float64) * d
        product_sq += (t * t).sum(0)
        for name, terms in (("pd_gamma", t), ("pd_beta", d)):
            running = np.cumsum(terms, axis=0)
            running += sums[name]
            running_sq[name] += (running * running).sum(0)
            sums[name] = running[-1].copy()
    out = {}
    for name in OUTPUTS:
        acc = _LAMBDA * _F32_UNIT_ROUNDOFF * np.sqrt(running_sq[name])
        if name == "pd_gamma":
            acc += _LAMBDA * _F32_UNIT_ROUNDOFF * np.sqrt(product_sq)
        out[name] = (sums[name], acc)
    return out


def rounding_allowance(ref: np.ndarray, accumulation: np.ndarray, dtype: str) -> np.ndarray:
    """Largest error per element that still counts as "the exact sum rounded
    to `dtype`": half a unit in the last place of the output dtype at the
    exact value, plus what float32 accumulation may add (see `_reference`).
    For 16-bit outputs the second part is a small fraction of an output
    ulp; for float32 outputs it dominates, as it must."""
    return 0.5 * ulp(ref, dtype) + accumulation


def _to_numpy(a: Any) -> np.ndarray:
    if type(a).__module__.startswith("torch"):
        return a.float().numpy().astype(np.float64)
    return np.asarray(a).astype(np.float64)


def _errors(outs: Any, ref: dict[str, tuple[np.ndarray, np.ndarray]], dtype: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "max_abs": 0.0,
        "max_rel": 0.0,
        "max_ulps": 0.0,
        "vs_rounding": 0.0,
        "worst": None,
        "per_output": {},
    }
    for name, out in zip(OUTPUTS, outs):
        exact, accumulation = ref[name]
        got = _to_numpy(out).reshape(-1)
        err = np.abs(got - exact)
        err = np.where(np.isnan(err), np.inf, err)
        mabs = float(err.max()) if err.size else 0.0
        mref = float(np.abs(exact).max()) if exact.size else 0.0
        mrel = mabs / mref if mref > 0 else (0.0 if mabs == 0 else math.inf)
        mulp = mabs / float(ulp(np.array([mref]), dtype)[0])
        vs_round = float((err / rounding_allowance(exact, accumulation, dtype)).max()) if err.size else 0.0
        result["per_output"][name] = {
            "max_abs": mabs,
            "max_rel": mrel,
            "max_ulps": mulp,
            "vs_rounding": vs_round,
            "dtype": dtype,
        }
        if result["worst"] is None or mrel > result["max_rel"]:
            result["worst"] = name
        result["max_abs"] = max(result["max_abs"], mabs)
        result["max_rel"] = max(result["max_rel"], mrel)
        result["max_ulps"] = max(result["max_ulps"], mulp)
        result["vs_rounding"] = max(result["vs_rounding"], vs_round)
    return result


# -------------------------------------------------------- implementations


def _jax_impls(ctx: BenchContext, res, dy) -> list[Impl]:
    import jax
    import jax.numpy as jnp

    from jax_lngb import layer_norm_grad_beta
    from jax_lngb._core import native as _native

    impls = []
    if ctx.wants("ours"):
        ours = jax.jit(layer_norm_grad_beta)
        impls.append(
            Impl(
                "ours", lambda: ready(ours(res, dy)), f"jit(jax_lngb.layer_norm_grad_beta), {_native.cpu_isa()} kernel"
            )
        )
    if ctx.wants("xla"):

        def expr(r, d):
            rows = tuple(range(r.ndim - 1))
            d32 = d.astype(jnp.float32)
            g = jnp.sum(r.astype(jnp.float32) * d32, axis=rows)
            b = jnp.sum(d32, axis=rows)
            return g.astype(r.dtype), b.astype(r.dtype)

        xla = jax.jit(expr)
        impls.append(Impl("xla", lambda: ready(xla(res, dy)), "jit(sum(f32(dy)*f32(res), rows), sum(f32(dy), rows))"))
    return impls


def _numpy_impl(res2d: np.ndarray, dy2d: np.ndarray) -> Impl:
    out_dtype = res2d.dtype
    widen = out_dtype != np.float32

    def run():
        g = np.einsum("rh,rh->h", res2d, dy2d, dtype=np.float32)
        b = dy2d.sum(axis=0, dtype=np.float32)
        return (g.astype(out_dtype), b.astype(out_dtype)) if widen else (g, b)

    note = "einsum/sum, float32"
    if widen:
        note += f"; {out_dtype} widened by NumPy's casting inside the timed call"
    return Impl("numpy", run, note)


def _torch_impl(torch, res, dy) -> Impl:
    h = res.shape[-1]
    rows = math.prod(res.shape[:-1])
    tres = torch.from_dlpack(res).reshape(rows, h)
    tdy = torch.from_dlpack(dy).reshape(rows, h)
    dt = tres.dtype
    # xhat = (input - mean) * rstd = res_for_gamma exactly; statistics in the
    # input dtype, as torch's own forward returns them for these inputs.
    mean = torch.zeros(rows, 1, dtype=dt)
    rstd = torch.ones(rows, 1, dtype=dt)
    weight = torch.ones(h, dtype=dt)
    bias = torch.zeros(h, dtype=dt)
    mask = [False, True, True]

    def run():
        _, dw, db = torch.ops.aten.native_layer_norm_backward(tdy, tres, [h], mean, rstd, weight, bias, mask)
        return dw, db

    note = (
        f"aten.native_layer_norm_backward, mask (F,T,T), input=res, mean=0, rstd=1, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    return Impl("torch", run, note)


# ------------------------------------------------------------------- run


def run(ctx: BenchContext) -> list[CaseResult]:
    import jax
    import jax.numpy as jnp

    torch = optional_torch() if ctx.wants("torch") else None
    rng = np.random.default_rng(ctx.seed)
    cases: list[CaseResult] = []

    for shape, dtype in ctx.cases(NAME, DEFAULT_SHAPES):
        if len(shape) < 1:
            raise ValueError(f"reduction shapes need rank >= 1, got {shape}")
        label = _label(shape, dtype)
        ctx.status(label, "preparing inputs", force=True)
        jdt = jnp.dtype(dtype)
        h = shape[-1]
        rows = math.prod(shape[:-1])
        res = jax.device_put(rng.standard_normal(shape, dtype=np.float32).astype(jdt))
        dy = jax.device_put(rng.standard_normal(shape, dtype=np.float32).astype(jdt))
        ready((res, dy))
        bytes_read = res.nbytes + dy.nbytes
        # Zero-copy NumPy views of the same buffers.
        res2d = np.asarray(res).reshape(rows, h)
        dy2d = np.asarray(dy).reshape(rows, h)

        impls = {i.name: i for i in _jax_impls(ctx, res, dy)}
        if ctx.wants("numpy"):
            impls["numpy"] = _numpy_impl(res2d, dy2d)
        if torch is not None:
            try:
                impls["torch"] = _torch_impl(torch, res, dy)
            except (RuntimeError, TypeError, BufferError) as e:
                ctx.status(label, f"torch unavailable: {e}", force=True)
        if ctx.wants("probe"):
            impls["probe"] = Impl(
                "probe",
                lambda res=res, dy=dy: ready(stream_read(res, dy)),  # bound now: the loop deletes them
                "streaming read of res and dy, all cores",
                bytes_read=bytes_read,
            )

        case = ctx.measure(
            label,
            shape,
            dtype,
            bytes_read,
            [impls[n] for n in IMPLEMENTATIONS if n in impls],
            extra={
                "rows": rows,
                "cols": h,
                "notes": [
                    "bytes = res_for_gamma and dy read once; errors vs float64 sums, worst of pd_gamma, "
                    f"pd_beta; outputs {dtype}, ulps at the largest |sum|"
                ],
            },
        )
        ctx.status(label, "float64 reference", force=False)
        ref = _reference(res2d, dy2d)
        for name, r in case.results.items():
            if r.outputs is not None and name != case.probe:
                r.errors = _errors(r.outputs, ref, dtype)
            r.outputs = None
        cases.append(case)
        if ctx.on_case is not None:
            ctx.on_case(case)
        del impls, res, dy, res2d, dy2d
    return cases


# --------------------------------------------------------------- targets


def targets(cases: list[CaseResult]) -> list[Target]:
    """The goals of the performance issue, checked on the measured cases."""
    out: list[Target] = []

    def at_least(what: str, v: float | None, goal: float) -> Target:
        return Target(what, v, f">= {goal:g}", None if v is None else v >= goal)

    def at_most(what: str, v: float | None, goal: float) -> Target:
        return Target(what, v, f"<= {goal:g}", None if v is None else v <= goal)

    for case in cases:
        if tuple(case.shape) != HEADLINE_SHAPE or case.ours not in case.results:
            continue
        if case.dtype == "float32":
            out.append(at_least(f"{case.label}: ours fraction of the probe", case.fraction_of_probe(case.ours), 0.85))
            out.append(speedup_target(case, "xla", ">=", 1.8))
        else:
            out.append(at_least(f"{case.label}: ours fraction of the probe", case.fraction_of_probe(case.ours), 0.70))
            out.append(speedup_target(case, "xla", ">=", 8))
            out.append(speedup_target(case, "torch", ">=", 1.8))
            e = case.results[case.ours].errors
            out.append(
                at_most(
                    f"{case.label}: ours error / (exact sum rounded to {case.dtype} + f32 allowance)",
                    e.get("vs_rounding") if e else None,
                    1,
                )
            )

    def worst(metric, lowest: bool, only=lambda c: True) -> tuple[float | None, str]:
        """The lowest (or highest) value of metric(case) and that case's label."""
        best_v, where = None, ""
        for case in cases:
            if not only(case):
                continue
            v = metric(case)
            if v is None:
                continue
            if best_v is None or (v < best_v if lowest else v > best_v):
                best_v, where = v, case.label
        return best_v, where

    for peer in ("xla", "numpy"):
        v, where = worst(lambda c, p=peer: c.vs_ours(p), lowest=True)
        if v is not None:
            out.append(at_least(f"every case: {peer} / ours time, worst [{where}]", v, 1))

    def over_probe(c: CaseResult) -> float | None:
        f = c.fraction_of_probe(c.ours)
        return None if not f else 1 / f

    # "From memory" as measured (residency.py). Shown as n/a when no case
    # is, rather than left out of the table.
    v, where = worst(over_probe, lowest=False, only=lambda c: not c.cache_resident)
    where = where or "none: every case stayed in cache"
    out.append(at_most(f"every case from memory: ours time / probe time, worst [{where}]", v, 1.2))

    v, where = worst(
        lambda c: (c.results[c.ours].errors or {}).get("vs_rounding") if c.ours in c.results else None, lowest=False
    )
    if v is not None:
        out.append(at_most(f"every case: ours error / (exact sum rounded + f32 allowance), worst [{where}]", v, 1))
    return out
