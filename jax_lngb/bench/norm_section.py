"""What the ``layer_norm`` and ``rms_norm`` sections share: the per-shape case
loop (inputs, implementations, the probe, one ``ctx.measure`` per pass,
errors against float64), the donated / plain-jit JAX implementations of a
norm, the error bookkeeping and the targets both sections check.

A section describes itself with a `NormSection` (its passes, outputs,
arrays moved, parameters, float64 reference and implementation builders)
and calls `run_cases` and the target helpers with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .common import BenchContext, CaseResult, Impl, Target, optional_torch, ready, stream_read, ulp

PASSES = ("fwd", "bwd", "fwd+bwd")
REF_ROWS = 4096
# The outputs with one value per [rows, H] element; the others are [H] vectors.
ROW_OUTPUTS = ("y", "dx")


def label(shape: tuple[int, ...], dtype: str, pass_: str) -> str:
    return f"[{', '.join(str(d) for d in shape)}] {dtype} {pass_}"


# ------------------------------------------------------------- errors


class ErrorAccumulator:
    """max |err| and max |ref| per output, merged over row blocks."""

    def __init__(self, names: tuple[str, ...], dtypes: dict[str, str]):
        self.names = names
        self.dtypes = dtypes
        self.stats = {n: [0.0, 0.0] for n in names}

    def add(self, name: str, got: np.ndarray, ref: np.ndarray) -> None:
        g = np.asarray(got, np.float64).reshape(-1)
        r = np.asarray(ref, np.float64).reshape(-1)
        if not r.size:
            return
        err = np.abs(g - r)
        err = np.where(np.isnan(err), np.inf, err)
        s = self.stats[name]
        s[0] = max(s[0], float(err.max()))
        s[1] = max(s[1], float(np.abs(r).max()))

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_abs": 0.0, "max_rel": 0.0, "max_ulps": 0.0, "worst": None, "per_output": {}}
        for n in self.names:
            mabs, mref = self.stats[n]
            mrel = mabs / mref if mref > 0 else (0.0 if mabs == 0 else math.inf)
            mulp = mabs / float(ulp(np.array([mref]), self.dtypes[n])[0])
            out["per_output"][n] = {"max_abs": mabs, "max_rel": mrel, "max_ulps": mulp, "dtype": self.dtypes[n]}
            if mrel >= out["max_rel"]:
                out["worst"] = n
            out["max_abs"] = max(out["max_abs"], mabs)
            out["max_rel"] = max(out["max_rel"], mrel)
            out["max_ulps"] = max(out["max_ulps"], mulp)
        return out


def rows_of(a: Any, r0: int, r1: int, h: int) -> np.ndarray:
    """Rows r0:r1 of a [rows, H]-shaped output (JAX or PyTorch) as float32."""
    if type(a).__module__.startswith("torch"):
        return a.reshape(-1, h)[r0:r1].float().numpy()
    return np.asarray(a).reshape(-1, h)[r0:r1].astype(np.float32)


def vector(a: Any) -> np.ndarray:
    if type(a).__module__.startswith("torch"):
        return a.float().numpy()
    return np.asarray(a, np.float32)


# (x2d, dy2d, *params) -> yields (r0, r1, y, dx) in float64 per block of
# rows, then returns {vector output name: float64 [H] reference}.
ReferenceBlocks = Callable[..., Iterator[tuple[int, int, np.ndarray, np.ndarray]]]


def measure_errors(
    cases: list[CaseResult],
    outputs: dict[str, tuple[str, ...]],
    reference: ReferenceBlocks,
    x2d: np.ndarray,
    dy2d: np.ndarray,
    params: Sequence[np.ndarray],
    dtype: str,
    skip: Callable[[str], bool] = lambda name: False,
) -> None:
    """Fills every implementation's errors (and drops its outputs): the
    float64 reference is computed once, a block of rows at a time, for all
    cases of a shape. `skip(impl)` leaves an implementation unchecked."""
    h = x2d.shape[1]
    accs = {}
    for case in cases:
        names = outputs[case.extra["pass"]]
        dtypes = {n: (dtype if n in ROW_OUTPUTS else "float32") for n in names}
        for impl, r in case.results.items():
            if r.outputs is not None and impl != case.probe and not skip(impl):
                accs[(case.label, impl)] = (ErrorAccumulator(names, dtypes), names, r.outputs)
    blocks = reference(x2d, dy2d, *params)
    while True:
        try:
            r0, r1, y_ref, dx_ref = next(blocks)
        except StopIteration as stop:
            vectors = stop.value
            break
        for acc, names, outs in accs.values():
            for n, o in zip(names, outs):
                if n in ROW_OUTPUTS:
                    acc.add(n, rows_of(o, r0, r1, h), y_ref if n == "y" else dx_ref)
    for acc, names, outs in accs.values():
        for n, o in zip(names, outs):
            if n in vectors:
                acc.add(n, vector(o), vectors[n])
    for case in cases:
        for impl, r in case.results.items():
            key = (case.label, impl)
            if key in accs:
                r.errors = accs[key][0].result()
            r.outputs = None


# ---------------------------------------------------- JAX implementations


def donated_jax_impls(
    name: str, fn: Callable, note: str, x, dy, params: tuple, *, fwd: bool, suffixes: tuple[str, str, str]
) -> dict[str, Impl]:
    """{pass: Impl} for `fn(x, *params)` writing into buffers donated back to
    the next call: steady state writes into memory that is already mapped.
    `suffixes` end the fwd, bwd and fwd+bwd notes."""
    import jax
    import jax.numpy as jnp

    donate = dict(keep_unused=True)
    out: dict[str, Impl] = {}
    if fwd:
        f = jax.jit(lambda x, ps, o: fn(x, *ps), donate_argnums=2, **donate)
        state = {"o": jnp.zeros_like(x)}

        def run_fwd(state=state):
            state["o"] = f(x, params, state["o"])
            return (ready(state["o"]),)

        out["fwd"] = Impl(name, run_fwd, note + suffixes[0])
    # The backward alone: the pullback (a pytree of the residuals its
    # forward saved) goes into jit as an argument.
    _, pullback = jax.vjp(fn, x, *params)
    bwd = jax.jit(lambda f, dy, o: f(dy), donate_argnums=2, **donate)
    bstate = {"o": jnp.zeros_like(x)}

    def run_bwd(state=bstate):
        outs = bwd(pullback, dy, state["o"])
        state["o"] = outs[0]
        return ready(outs)

    out["bwd"] = Impl(name, run_bwd, note + suffixes[1])

    def step(x, ps, dy, o1, o2):
        y, f = jax.vjp(fn, x, *ps)
        return (y, *f(dy))

    fb = jax.jit(step, donate_argnums=(3, 4), **donate)
    fbstate = {"o": (jnp.zeros_like(x), jnp.zeros_like(x))}

    def run_fb(state=fbstate):
        outs = fb(x, params, dy, *state["o"])
        state["o"] = (outs[0], outs[1])
        return ready(outs)

    out["fwd+bwd"] = Impl(name, run_fb, note + suffixes[2])
    return out


def plain_jax_impls(
    name: str, fn: Callable, note: str, x, dy, params: tuple, *, passes: Sequence[str], suffixes: dict[str, str]
) -> dict[str, Impl]:
    """{pass: Impl} for `fn(x, *params)` under a plain jax.jit: nothing
    donated, so each call's [rows, H] outputs are fresh allocations (a
    training step as users write it). `suffixes[pass]` ends each note."""
    import jax

    out: dict[str, Impl] = {}
    if "fwd" in passes:
        f = jax.jit(lambda x, ps: fn(x, *ps))
        out["fwd"] = Impl(name, lambda: (ready(f(x, params)),), note + suffixes["fwd"])
    if "bwd" in passes:
        _, pullback = jax.vjp(fn, x, *params)
        bwd = jax.jit(lambda f, dy: f(dy))
        out["bwd"] = Impl(name, lambda: ready(bwd(pullback, dy)), note + suffixes["bwd"])
    if "fwd+bwd" in passes:

        def step(x, ps, dy):
            y, f = jax.vjp(fn, x, *ps)
            return (y, *f(dy))

        fb = jax.jit(step)
        out["fwd+bwd"] = Impl(name, lambda: ready(fb(x, params, dy)), note + suffixes["fwd+bwd"])
    return out


# ------------------------------------------------------------------- run


@dataclass(frozen=True)
class NormSection:
    """How one norm section differs from the other.

    `param_offsets`: one float32 [H] parameter per entry, offset + 0.1 * N(0, 1)
    (gamma 1, beta 0), drawn after x and dy. `jax_impls(ctx, x, dy, *params)`
    and `torch_impls(torch, x, dy, *params)` return {pass: {name: Impl}} and
    {name: {pass: Impl}}; `extra(pass)` is a case's section-specific extra
    (its notes included); `skip_errors(impl)` leaves an implementation's
    outputs unchecked."""

    name: str
    default_shapes: Sequence[tuple[int, ...]]
    implementations: tuple[str, ...]
    outputs: dict[str, tuple[str, ...]]
    arrays_moved: dict[str, int]
    param_offsets: tuple[float, ...]
    reference: ReferenceBlocks
    jax_impls: Callable[..., dict[str, dict[str, Impl]]]
    torch_impls: Callable[..., dict[str, dict[str, Impl]]]
    torch_names: tuple[str, ...]
    extra: Callable[[str], dict[str, Any]]
    skip_errors: Callable[[str], bool] = lambda name: False
    passes: tuple[str, ...] = PASSES


def run_cases(ctx: BenchContext, sec: NormSection) -> list[CaseResult]:
    """Every (shape, dtype) of the section: inputs, implementations, one
    `ctx.measure` per pass, then the errors of all its passes against one
    float64 reference."""
    import jax
    import jax.numpy as jnp

    torch = optional_torch() if any(ctx.wants(n) for n in sec.torch_names) else None
    rng = np.random.default_rng(ctx.seed)
    cases: list[CaseResult] = []

    for shape, dtype in ctx.cases(sec.name, sec.default_shapes):
        if len(shape) < 1:
            raise ValueError(f"{sec.name} shapes need rank >= 1, got {shape}")
        base = label(shape, dtype, "").strip()
        ctx.status(base, "preparing inputs", force=True)
        jdt = jnp.dtype(dtype)
        h = shape[-1]
        rows = math.prod(shape[:-1])
        x = jax.device_put((rng.standard_normal(shape, dtype=np.float32) * 2 + 0.5).astype(jdt))
        dy = jax.device_put(rng.standard_normal(shape, dtype=np.float32).astype(jdt))
        params = tuple(
            jax.device_put((off + 0.1 * rng.standard_normal(h)).astype(np.float32)) for off in sec.param_offsets
        )
        ready((x, dy, *params))
        array_bytes = x.nbytes

        impls = sec.jax_impls(ctx, x, dy, *params)
        if torch is not None:
            try:
                for name, per_pass in sec.torch_impls(torch, x, dy, *params).items():
                    if ctx.wants(name):
                        for p, im in per_pass.items():
                            impls[p][name] = im
            except (RuntimeError, TypeError) as e:
                ctx.status(base, f"torch unavailable: {e}", force=True)
        if ctx.wants("probe"):
            for p in sec.passes:
                impls[p]["probe"] = Impl(
                    "probe",
                    lambda x=x, dy=dy: ready(stream_read(x, dy)),  # bound now: the loop deletes them
                    "streaming read of x and dy, all cores",
                    bytes_read=2 * array_bytes,
                )

        shape_cases = []
        for p in sec.passes:
            order = [n for n in sec.implementations if n in impls[p]]
            if not order:
                continue
            case = ctx.measure(
                label(shape, dtype, p),
                shape,
                dtype,
                sec.arrays_moved[p] * array_bytes,
                [impls[p][n] for n in order],
                extra={"pass": p, "rows": rows, "cols": h, "arrays_moved": sec.arrays_moved[p], **sec.extra(p)},
            )
            shape_cases.append(case)
        ctx.status(base, "float64 reference", force=False)
        x2d = np.asarray(x).reshape(rows, h)
        dy2d = np.asarray(dy).reshape(rows, h)
        measure_errors(
            shape_cases,
            sec.outputs,
            sec.reference,
            x2d,
            dy2d,
            [np.asarray(q) for q in params],
            dtype,
            skip=sec.skip_errors,
        )
        for case in shape_cases:
            cases.append(case)
            if ctx.on_case is not None:
                ctx.on_case(case)
        del impls, x, dy, x2d, dy2d, params
    return cases


# --------------------------------------------------------------- targets


def probe_rate_target(case: CaseResult, bound: float = 1.3) -> Target:
    """ours time over the time to stream the case's bytes at the probe's rate."""
    f = case.fraction_of_probe(case.ours)
    t = None if f is None else 1 / f
    return Target(
        f"{case.label}: ours time / time to stream its bytes at the probe's rate",
        t,
        f"<= {bound}",
        None if t is None else t <= bound,
    )


def worst_error_targets(cases: list[CaseResult], names: Sequence[str], tolerance: dict[str, float]) -> list[Target]:
    """Per implementation in `names`: its worst max error over all cases, in
    units of the dtype's tolerance times the reference's largest magnitude."""
    worst: dict[str, tuple[float, str]] = {}
    for case in cases:
        tol = tolerance[case.dtype]
        for name in names:
            r = case.results.get(name)
            if r is None or not r.errors:
                continue
            rel = r.errors["max_rel"] / tol
            if name not in worst or rel > worst[name][0]:
                worst[name] = (rel, case.label)
    return [
        Target(
            f"every case: {name} max error / (dtype tolerance x max |reference|), worst [{label_}]",
            rel,
            "<= 1",
            rel <= 1,
        )
        for name, (rel, label_) in worst.items()
    ]
