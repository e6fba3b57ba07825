"""Benchmark section ``rms_norm``: RMSNorm against XLA autodiff and PyTorch.

Three passes per shape and dtype, each its own case, as in the
``layer_norm`` section (whose error bookkeeping this reuses):

* ``fwd``: ``y = rms_norm(x, gamma)`` over the last axis.
* ``bwd``: the VJP alone, from the residuals its own forward saved: dx and
  dgamma for an upstream gradient dy.
* ``fwd+bwd``: ``jax.vjp`` under ``jit``: y, dx and dgamma.

x and dy have the case's dtype; gamma is float32 (mixed precision).

Implementations, on the same input buffers:

* ``ours``: ``jax_lngb.rms_norm`` (C++ forward; fused backward: dx written,
  res_for_gamma = x * rstd added into LayerNormGradBeta's reduction step
  from registers). Outputs donated back to the next call.
* ``ours_chained`` (bwd, fwd+bwd): ``backward="chained"``: dx and
  res_for_gamma through memory, then ``layer_norm_grad_beta``.
* ``xla``: XLA autodiff of ``jax_lngb.rms_norm_jnp`` (float32 statistics)
  under ``jit``, outputs donated.
* ``ours_jit`` / ``xla_jit`` (fwd+bwd): the same steps under a plain
  ``jax.jit``, nothing donated: every call's [rows, H] outputs are fresh
  allocations, as in a training step that does not donate (page faults
  included; see SPEC section 5).
* ``torch``: ``torch.nn.functional.rms_norm`` when PyTorch is installed:
  the forward under ``no_grad``, the backward as ``torch.autograd.grad`` of
  a retained graph, fwd+bwd both (what a PyTorch training step runs on the
  CPU); outputs are fresh tensors every call (there is no ``out=`` form).
* ``probe``: the streaming-read probe (``common.stream_read``): its GB/s is
  the ceiling for the bytes a pass moves.

Bytes: each [rows, H] input read once and each output written once: fwd 2
(x, y), bwd 3 (x, dy, dx), fwd+bwd 4 (x, dy, y, dx) arrays of the case's
size. Errors are against float64 NumPy RMSNorm and its exact gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .common import BenchContext, CaseResult, Impl, Target, optional_torch, ready, speedup_target, stream_read
from .layer_norm import _ErrorAccumulator, _rows_of, _vector

NAME = "rms_norm"
TITLE = "RMSNorm forward, backward and forward+backward (jax.vjp) vs XLA autodiff and PyTorch"
DEFAULT_SHAPES: list[tuple[int, ...]] = [
    (65536, 768),
    (8192, 1024),
    (4096, 4096),
    (1024, 16384),
    (262144, 64),
    (64, 262144),
]
HEADLINE_SHAPE = (65536, 768)
PASSES = ("fwd", "bwd", "fwd+bwd")
IMPLEMENTATIONS = ("ours", "ours_chained", "ours_jit", "xla", "xla_jit", "torch", "probe")
EPSILON = 1e-6
_OUTPUTS = {"fwd": ("y",), "bwd": ("dx", "dgamma"), "fwd+bwd": ("y", "dx", "dgamma")}
_ARRAYS_MOVED = {"fwd": 2, "bwd": 3, "fwd+bwd": 4}
_REF_ROWS = 4096
TOLERANCE = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 1.6e-2}


def _label(shape: tuple[int, ...], dtype: str, pass_: str) -> str:
    return f"[{', '.join(str(d) for d in shape)}] {dtype} {pass_}"


def _reference_blocks(x2d: np.ndarray, dy2d: np.ndarray, gamma: np.ndarray):
    """Yields (r0, r1, y, dx) in float64 for blocks of rows, then returns
    dgamma: the exact RMSNorm and its gradient."""
    g = gamma.astype(np.float64)
    dgamma = np.zeros(x2d.shape[1])
    for r0 in range(0, x2d.shape[0], _REF_ROWS):
        x = x2d[r0 : r0 + _REF_ROWS].astype(np.float64)
        d = dy2d[r0 : r0 + _REF_ROWS].astype(np.float64)
        rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + EPSILON)
        xhat = x * rstd
        dg = d * g
        dx = rstd * (dg - xhat * (dg * xhat).mean(-1, keepdims=True))
        dgamma += (d * xhat).sum(0)
        yield r0, r0 + x.shape[0], xhat * g, dx
    return dgamma


def _measure_errors(cases: list[CaseResult], x2d, dy2d, gamma, dtype: str) -> None:
    """Fills every implementation's errors (and drops its outputs)."""
    h = x2d.shape[1]
    accs = {}
    for case in cases:
        names = _OUTPUTS[case.extra["pass"]]
        dtypes = {n: (dtype if n in ("y", "dx") else "float32") for n in names}
        for impl, r in case.results.items():
            if r.outputs is not None and impl != case.probe:
                accs[(case.label, impl)] = (_ErrorAccumulator(names, dtypes), names, r.outputs)
    blocks = _reference_blocks(x2d, dy2d, gamma)
    while True:
        try:
            r0, r1, y_ref, dx_ref = next(blocks)
        except StopIteration as stop:
            dgamma = stop.value
            break
        for acc, names, outs in accs.values():
            for n, o in zip(names, outs):
                if n in ("y", "dx"):
                    acc.add(n, _rows_of(o, r0, r1, h), y_ref if n == "y" else dx_ref)
    for acc, names, outs in accs.values():
        for n, o in zip(names, outs):
            if n == "dgamma":
                acc.add(n, _vector(o), dgamma)
    for case in cases:
        for impl, r in case.results.items():
            key = (case.label, impl)
            if key in accs:
                r.errors = accs[key][0].result()
            r.outputs = None


# -------------------------------------------------------- implementations


def _jax_impls(ctx: BenchContext, x, dy, gamma) -> dict[str, dict[str, Impl]]:
    import jax
    import jax.numpy as jnp

    from jax_lngb import _native, rms_norm, rms_norm_jnp

    out: dict[str, dict[str, Impl]] = {p: {} for p in PASSES}
    isa = _native.cpu_isa()
    variants = [
        ("ours", lambda *a: rms_norm(*a, epsilon=EPSILON), f"jax_lngb.rms_norm, fused backward, {isa}"),
        ("ours_chained", lambda *a: rms_norm(*a, epsilon=EPSILON, backward="chained"),
         "backward='chained': rms_norm_grad -> layer_norm_grad_beta"),
        ("xla", lambda *a: rms_norm_jnp(*a, epsilon=EPSILON), "jit, XLA autodiff of rms_norm_jnp"),
    ]
    donate = dict(keep_unused=True)
    for name, fn, note in variants:
        if name != "ours_chained" and ctx.wants(name):
            fwd = jax.jit(lambda x, g, o, fn=fn: fn(x, g), donate_argnums=2, **donate)
            state = {"o": jnp.zeros_like(x)}

            def run_fwd(fwd=fwd, state=state):
                state["o"] = fwd(x, gamma, state["o"])
                return (ready(state["o"]),)

            out["fwd"][name] = Impl(name, run_fwd, note + ", y donated")

        def step(x, g, dy, *donated, fn=fn):
            y, f = jax.vjp(fn, x, g)
            return (y, *f(dy))

        if ctx.wants(name):
            _, pullback = jax.vjp(fn, x, gamma)
            bwd = jax.jit(lambda f, dy, o: f(dy), donate_argnums=2, **donate)
            bstate = {"o": jnp.zeros_like(x)}

            def run_bwd(bwd=bwd, pullback=pullback, state=bstate):
                outs = bwd(pullback, dy, state["o"])
                state["o"] = outs[0]
                return ready(outs)

            out["bwd"][name] = Impl(name, run_bwd, note + ", dx donated")
            fb = jax.jit(step, donate_argnums=(3, 4), **donate)
            fbstate = {"o": (jnp.zeros_like(x), jnp.zeros_like(x))}

            def run_fb(fb=fb, state=fbstate):
                outs = fb(x, gamma, dy, *state["o"])
                state["o"] = (outs[0], outs[1])
                return ready(outs)

            out["fwd+bwd"][name] = Impl(name, run_fb, note + " (jax.vjp), y and dx donated")
        plain = {"ours": "ours_jit", "xla": "xla_jit"}.get(name)
        if plain and ctx.wants(plain):
            fj = jax.jit(step)
            out["fwd+bwd"][plain] = Impl(
                plain, lambda fj=fj: ready(fj(x, gamma, dy)), note + " (jax.vjp), plain jit: fresh outputs"
            )
    return out


def _torch_impls(ctx: BenchContext, torch, x, dy, gamma) -> dict[str, dict[str, Impl]]:
    """{pass: Impl} for torch.nn.functional.rms_norm on the CPU. Its fused
    aten kernel has a CPU forward only (``_fused_rms_norm_backward`` has no
    CPU kernel in torch 2.13), and a float32 weight with 16-bit input takes
    the composite path; autograd runs the composite backward. No ``out=``
    forms: outputs are fresh tensors every call."""
    h = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    tx = torch.from_dlpack(x).reshape(rows, h)
    tdy = torch.from_dlpack(dy).reshape(rows, h)
    tw = torch.from_dlpack(gamma)
    rms = torch.nn.functional.rms_norm
    xa = tx.detach().clone().requires_grad_(True)
    wa = tw.detach().clone().requires_grad_(True)
    y_graph = rms(xa, [h], wa, EPSILON)  # the backward's saved graph

    def fwd():
        with torch.no_grad():
            return (rms(tx, [h], tw, EPSILON),)

    def bwd():
        return torch.autograd.grad(y_graph, (xa, wa), tdy, retain_graph=True)

    def both():
        y = rms(xa, [h], wa, EPSILON)
        return (y.detach(), *torch.autograd.grad(y, (xa, wa), tdy))

    note = f"torch.nn.functional.rms_norm (autograd for the backward), {torch.get_num_threads()} threads"
    return {"fwd": Impl("torch", fwd, note), "bwd": Impl("torch", bwd, note), "fwd+bwd": Impl("torch", both, note)}


# ------------------------------------------------------------------- run


def run(ctx: BenchContext) -> list[CaseResult]:
    import jax
    import jax.numpy as jnp

    torch = optional_torch() if ctx.wants("torch") else None
    rng = np.random.default_rng(ctx.seed)
    cases: list[CaseResult] = []

    for shape, dtype in ctx.cases(NAME, DEFAULT_SHAPES):
        if len(shape) < 1:
            raise ValueError(f"rms_norm shapes need rank >= 1, got {shape}")
        base = _label(shape, dtype, "").strip()
        ctx.status(base, "preparing inputs", force=True)
        jdt = jnp.dtype(dtype)
        h = shape[-1]
        rows = math.prod(shape[:-1])
        x = jax.device_put((rng.standard_normal(shape, dtype=np.float32) * 2 + 0.5).astype(jdt))
        dy = jax.device_put(rng.standard_normal(shape, dtype=np.float32).astype(jdt))
        gamma = jax.device_put((1 + 0.1 * rng.standard_normal(h)).astype(np.float32))
        ready((x, dy, gamma))
        array_bytes = x.nbytes

        impls = _jax_impls(ctx, x, dy, gamma)
        if torch is not None:
            try:
                for p, im in _torch_impls(ctx, torch, x, dy, gamma).items():
                    impls[p]["torch"] = im
            except (RuntimeError, TypeError) as e:
                ctx.status(base, f"torch unavailable: {e}", force=True)
        if ctx.wants("probe"):
            for p in PASSES:
                impls[p]["probe"] = Impl(
                    "probe", lambda: ready(stream_read(x, dy)), "streaming read of x and dy, all cores",
                    bytes_read=2 * array_bytes,
                )

        shape_cases = []
        for p in PASSES:
            order = [n for n in IMPLEMENTATIONS if n in impls[p]]
            if not order:
                continue
            case = ctx.measure(
                _label(shape, dtype, p),
                shape,
                dtype,
                _ARRAYS_MOVED[p] * array_bytes,
                [impls[p][n] for n in order],
                extra={
                    "pass": p,
                    "rows": rows,
                    "cols": h,
                    "arrays_moved": _ARRAYS_MOVED[p],
                    "notes": [
                        f"bytes = {_ARRAYS_MOVED[p]} [rows, H] arrays moved once; errors vs float64 RMSNorm and "
                        f"its exact gradient, worst of {', '.join(_OUTPUTS[p])}; gamma float32"
                    ],
                },
            )
            shape_cases.append(case)
        ctx.status(base, "float64 reference", force=False)
        x2d = np.asarray(x).reshape(rows, h)
        dy2d = np.asarray(dy).reshape(rows, h)
        _measure_errors(shape_cases, x2d, dy2d, np.asarray(gamma), dtype)
        for case in shape_cases:
            cases.append(case)
            if ctx.on_case is not None:
                ctx.on_case(case)
        del impls, x, dy, x2d, dy2d
    return cases


# --------------------------------------------------------------- targets


def targets(cases: list[CaseResult]) -> list[Target]:
    """The goals of the RMSNorm issue, checked on the measured cases."""
    out: list[Target] = []
    for case in cases:
        if tuple(case.shape) != HEADLINE_SHAPE or case.ours not in case.results:
            continue
        p = case.extra.get("pass")
        if p == "fwd+bwd":
            goal = {"float32": 5, "bfloat16": 8}.get(case.dtype)
            if goal is not None:
                out.append(speedup_target(case, "xla", ">=", goal))
            out.append(speedup_target(case, "torch", ">=", 1.5))
        if p == "bwd":
            f = case.fraction_of_probe(case.ours)
            t = None if f is None else 1 / f
            out.append(
                Target(
                    f"{case.label}: ours time / time to stream its bytes at the probe's rate",
                    t, "<= 1.3", None if t is None else t <= 1.3,
                )
            )
    worst: dict[str, tuple[float, str]] = {}
    for case in cases:
        tol = TOLERANCE[case.dtype]
        for name in ("ours", "ours_chained", "ours_jit"):
            r = case.results.get(name)
            if r is None or not r.errors:
                continue
            rel = r.errors["max_rel"] / tol
            if name not in worst or rel > worst[name][0]:
                worst[name] = (rel, case.label)
    for name, (rel, label) in worst.items():
        out.append(
            Target(
                f"every case: {name} max error / (dtype tolerance x max |reference|), worst [{label}]",
                rel, "<= 1", rel <= 1,
            )
        )
    return out
