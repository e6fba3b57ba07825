"""Benchmark section ``add_norm``: the residual add fused with LayerNorm or
RMSNorm (``h = x + residual; y = norm(h)``, the pre-norm transformer
block's step) against the same two steps unfused, XLA autodiff and PyTorch.

Per shape and dtype, for each norm (``layer``: with beta, ``rms``) three
passes, each its own case:

* ``fwd``: (y, h) from x and residual.
* ``bwd``: the VJP alone, from the residuals its own forward saved, for
  cotangents dy (of y) and dh (of h): dx (= d_residual, returned once),
  dgamma (and dbeta).
* ``fwd+bwd``: ``jax.vjp`` under ``jit``: y, h, dx, dgamma (, dbeta).

x, residual, dy and dh have the case's dtype; gamma and beta float32.

Implementations, on the same input buffers:

* ``ours``: ``jax_lngb.add_layer_norm`` / ``add_rms_norm`` (one forward
  kernel: x and residual read once, h and y written; one backward kernel:
  dy, dh and h read, dx written), outputs donated back to the next call.
* ``unfused``: ``x + residual`` then ``jax_lngb.layer_norm`` /
  ``rms_norm`` (XLA's add, then our kernels), outputs donated.
* ``xla``: XLA autodiff of ``x + residual`` then ``layer_norm_jnp`` /
  ``rms_norm_jnp``, outputs donated.
* ``ours_jit`` / ``unfused_jit`` / ``xla_jit`` (fwd+bwd): the same under a
  plain ``jax.jit``, nothing donated (fresh outputs every call).
* ``torch``: the add then ``torch.nn.functional.layer_norm`` / ``rms_norm``
  when PyTorch is installed (forward under ``no_grad``, backward as
  ``torch.autograd.grad`` of a retained graph).
* ``probe``: the streaming-read probe over x and residual: its GB/s is the
  ceiling for the bytes a pass must move.

Bytes: the [rows, H] arrays a fused pass must move: fwd 4 (x, residual
read; h, y written), bwd 4 (dy, dh, h read; dx written), fwd+bwd 8. The
unfused steps move 5 + 6 = 11 (the add writes h and the norm reads it
back; the backward's dx and dh are added by a third pass). Errors are
against float64 NumPy of the norm of the h each implementation returned.
"""

from __future__ import annotations

import math

import numpy as np

from . import norm_section
from .common import BenchContext, CaseResult, Impl, Target, optional_torch, ready, speedup_target, stream_read

NAME = "add_norm"
TITLE = "Residual add + LayerNorm / RMSNorm, fused vs unfused, XLA autodiff and PyTorch"
DEFAULT_SHAPES: list[tuple[int, ...]] = [(65536, 768), (8192, 4096)]
HEADLINE_SHAPE = (65536, 768)
NORMS = ("layer", "rms")
PASSES = norm_section.PASSES
IMPLEMENTATIONS = ("ours", "unfused", "ours_jit", "unfused_jit", "xla", "xla_jit", "torch", "probe")
EPSILON = 1e-5
ARRAYS_MOVED = {"fwd": 4, "bwd": 4, "fwd+bwd": 8}
TOLERANCE = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 1.6e-2}
FUSED_GOAL = 1.25
PROBE_GOAL = 0.9


def _outputs(norm: str, p: str) -> tuple[str, ...]:
    params = ("dgamma", "dbeta") if norm == "layer" else ("dgamma",)
    return {"fwd": ("y", "h"), "bwd": ("dx", *params), "fwd+bwd": ("y", "h", "dx", *params)}[p]


def label(shape, dtype: str, norm: str, p: str) -> str:
    return f"[{', '.join(str(d) for d in shape)}] {dtype} {norm} {p}"


# -------------------------------------------------------- implementations


def _fns(norm: str):
    """{name: (fn(x, r, *params) -> (y, h), note)}."""
    import jax_lngb as jl

    if norm == "layer":
        return {
            "ours": (lambda x, r, g, b: jl.add_layer_norm(x, r, g, b, epsilon=EPSILON), "jax_lngb.add_layer_norm"),
            "unfused": (
                lambda x, r, g, b: (jl.layer_norm(x + r, g, b, epsilon=EPSILON), x + r),
                "x + residual, then jax_lngb.layer_norm",
            ),
            "xla": (
                lambda x, r, g, b: (jl.layer_norm_jnp(x + r, g, b, epsilon=EPSILON), x + r),
                "jit, XLA autodiff of x + residual and layer_norm_jnp",
            ),
        }
    return {
        "ours": (lambda x, r, g: jl.add_rms_norm(x, r, g, epsilon=EPSILON), "jax_lngb.add_rms_norm"),
        "unfused": (
            lambda x, r, g: (jl.rms_norm(x + r, g, epsilon=EPSILON), x + r),
            "x + residual, then jax_lngb.rms_norm",
        ),
        "xla": (
            lambda x, r, g: (jl.rms_norm_jnp(x + r, g, epsilon=EPSILON), x + r),
            "jit, XLA autodiff of x + residual and rms_norm_jnp",
        ),
    }


def _jax_impls(ctx: BenchContext, norm: str, x, r, dy, dh, params) -> dict[str, dict[str, Impl]]:
    import jax
    import jax.numpy as jnp

    out: dict[str, dict[str, Impl]] = {p: {} for p in PASSES}
    keep = dict(keep_unused=True)

    def grads(f, cts):
        # dx and d_residual are the same values: returned once.
        g = f(cts)
        return (g[0], *g[2:])

    for name, (fn, note) in _fns(norm).items():
        if ctx.wants(name):
            fwd = jax.jit(lambda x, r, ps, o: fn(x, r, *ps), donate_argnums=3, **keep)
            st = {"o": (jnp.zeros_like(x), jnp.zeros_like(r))}

            def run_fwd(st=st, fwd=fwd):
                st["o"] = fwd(x, r, params, st["o"])
                return ready(st["o"])

            _, pullback = jax.vjp(fn, x, r, *params)
            bwd = jax.jit(lambda f, dy, dh, o: grads(f, (dy, dh)), donate_argnums=3, **keep)
            bst = {"o": jnp.zeros_like(r)}

            def run_bwd(st=bst, bwd=bwd, pullback=pullback):
                outs = bwd(pullback, dy, dh, st["o"])
                st["o"] = outs[0]
                return ready(outs)

            def step(x, r, ps, dy, dh, o, fn=fn):
                yh, f = jax.vjp(fn, x, r, *ps)
                return (*yh, *grads(f, (dy, dh)))

            fb = jax.jit(step, donate_argnums=5, **keep)
            fst = {"o": (jnp.zeros_like(x), jnp.zeros_like(r), jnp.zeros_like(r))}

            def run_fb(st=fst, fb=fb):
                outs = fb(x, r, params, dy, dh, st["o"])
                st["o"] = outs[:3]
                return ready(outs)

            out["fwd"][name] = Impl(name, run_fwd, note + ", y and h donated")
            out["bwd"][name] = Impl(name, run_bwd, note + ", dx donated")
            out["fwd+bwd"][name] = Impl(name, run_fb, note + " (jax.vjp), y, h and dx donated")
        plain = name + "_jit"
        if ctx.wants(plain):

            def step_plain(x, r, ps, dy, dh, fn=fn):
                yh, f = jax.vjp(fn, x, r, *ps)
                return (*yh, *grads(f, (dy, dh)))

            fp = jax.jit(step_plain)
            out["fwd+bwd"][plain] = Impl(
                plain, lambda fp=fp: ready(fp(x, r, params, dy, dh)), note + " (jax.vjp), plain jit: fresh outputs"
            )
    return out


def _torch_impls(torch, norm: str, x, r, dy, dh, params) -> dict[str, Impl]:
    h_ = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    t = lambda a: torch.from_dlpack(a).reshape(rows, h_)
    tx, tr, tdy, tdh = t(x), t(r), t(dy), t(dh)
    tp = [torch.from_dlpack(q) for q in params]
    if norm == "layer":
        normf = lambda h, ps: torch.nn.functional.layer_norm(h, [h_], ps[0], ps[1], EPSILON)
    else:
        normf = lambda h, ps: torch.nn.functional.rms_norm(h, [h_], ps[0], EPSILON)
    xa, ra = tx.detach().clone().requires_grad_(True), tr.detach().clone().requires_grad_(True)
    pa = [q.detach().clone().requires_grad_(True) for q in tp]

    def graph(xa, ra, pa):
        h = xa + ra
        return normf(h, pa), h

    y_g, h_g = graph(xa, ra, pa)

    def fwd():
        with torch.no_grad():
            return graph(tx, tr, tp)

    def bwd():
        g = torch.autograd.grad((y_g, h_g), (xa, *pa), (tdy, tdh), retain_graph=True)
        return g

    def both():
        y, h = graph(xa, ra, pa)
        return (y.detach(), h.detach(), *torch.autograd.grad((y, h), (xa, *pa), (tdy, tdh)))

    note = f"x + residual, then torch.nn.functional.{norm}_norm (autograd), {torch.get_num_threads()} threads"
    return {"fwd": Impl("torch", fwd, note), "bwd": Impl("torch", bwd, note), "fwd+bwd": Impl("torch", both, note)}


# --------------------------------------------------------------- errors


def _errors(cases: list[CaseResult], norm: str, x2d, r2d, dy2d, dh2d, params, dtype: str) -> None:
    """Each implementation's worst error per output against float64 of the
    norm of the h it returned (fwd+bwd, fwd) or of x + residual rounded as
    ours rounds it (bwd)."""
    import jax.numpy as jnp

    h_ = x2d.shape[1]
    g = params[0].astype(np.float64)
    h_round = (x2d.astype(np.float32) + r2d.astype(np.float32)).astype(jnp.dtype(dtype)).astype(np.float64)
    for case in cases:
        p = case.extra["pass"]
        names = _outputs(norm, p)
        for impl, res in case.results.items():
            if res.outputs is None or impl == case.probe:
                continue
            outs = dict(zip(names, res.outputs))
            acc = norm_section.ErrorAccumulator(
                names, {n: (dtype if n in ("y", "h", "dx") else "float32") for n in names}
            )
            hv = norm_section.rows_of(outs["h"], 0, x2d.shape[0], h_).astype(np.float64) if "h" in outs else h_round
            if "h" in outs:
                acc.add("h", hv, h_round)
            mean = hv.mean(-1, keepdims=True) if norm == "layer" else 0.0
            rstd = 1.0 / np.sqrt(((hv - mean) ** 2).mean(-1, keepdims=True) + EPSILON)
            xhat = (hv - mean) * rstd
            if "y" in outs:
                y = xhat * g + (params[1].astype(np.float64) if norm == "layer" else 0.0)
                acc.add("y", norm_section.rows_of(outs["y"], 0, x2d.shape[0], h_), y)
            if "dx" in outs:
                d = dy2d.astype(np.float64)
                dg = d * g
                dx = dg - xhat * (dg * xhat).mean(-1, keepdims=True)
                if norm == "layer":
                    dx = dx - dg.mean(-1, keepdims=True)
                dx = rstd * dx + dh2d.astype(np.float64)
                acc.add("dx", norm_section.rows_of(outs["dx"], 0, x2d.shape[0], h_), dx)
                acc.add("dgamma", norm_section.vector(outs["dgamma"]), (d * xhat).sum(0))
                if "dbeta" in outs:
                    acc.add("dbeta", norm_section.vector(outs["dbeta"]), d.sum(0))
            res.errors = acc.result()
    for case in cases:
        for res in case.results.values():
            res.outputs = None


# ------------------------------------------------------------------- run


def run(ctx: BenchContext) -> list[CaseResult]:
    import jax

    torch = optional_torch() if ctx.wants("torch") else None
    rng = np.random.default_rng(ctx.seed)
    cases: list[CaseResult] = []
    for shape, dtype in ctx.cases(NAME, DEFAULT_SHAPES):
        import jax.numpy as jnp

        base = f"[{', '.join(str(d) for d in shape)}] {dtype}"
        ctx.status(base, "preparing inputs", force=True)
        jdt = jnp.dtype(dtype)
        h_ = shape[-1]
        rows = math.prod(shape[:-1])

        def draw(scale, off=0.0):
            return jax.device_put((rng.standard_normal(shape, dtype=np.float32) * scale + off).astype(jdt))

        x, r, dy, dh = draw(1.0), draw(2.0, 0.5), draw(1.0), draw(1.0)
        gamma = jax.device_put((1.0 + 0.1 * rng.standard_normal(h_)).astype(np.float32))
        beta = jax.device_put((0.1 * rng.standard_normal(h_)).astype(np.float32))
        ready((x, r, dy, dh, gamma, beta))
        array_bytes = x.nbytes
        x2d, r2d, dy2d, dh2d = (np.asarray(a).reshape(rows, h_) for a in (x, r, dy, dh))
        for norm in NORMS:
            params = (gamma, beta) if norm == "layer" else (gamma,)
            impls = _jax_impls(ctx, norm, x, r, dy, dh, params)
            if torch is not None:
                try:
                    for p, im in _torch_impls(torch, norm, x, r, dy, dh, params).items():
                        impls[p]["torch"] = im
                except (RuntimeError, TypeError, AttributeError) as e:
                    ctx.status(base, f"torch unavailable: {e}", force=True)
            if ctx.wants("probe"):
                for p in PASSES:
                    impls[p]["probe"] = Impl(
                        "probe",
                        lambda: ready(stream_read(x, r)),
                        "streaming read of x and residual, all cores",
                        bytes_read=2 * array_bytes,
                    )
            norm_cases = []
            for p in PASSES:
                order = [n for n in IMPLEMENTATIONS if n in impls[p]]
                if not order:
                    continue
                norm_cases.append(
                    ctx.measure(
                        label(shape, dtype, norm, p),
                        shape,
                        dtype,
                        ARRAYS_MOVED[p] * array_bytes,
                        [impls[p][n] for n in order],
                        extra={
                            "pass": p,
                            "norm": norm,
                            "rows": rows,
                            "cols": h_,
                            "arrays_moved": ARRAYS_MOVED[p],
                            "notes": [
                                f"bytes = {ARRAYS_MOVED[p]} [rows, H] arrays a fused pass moves; errors vs "
                                f"float64 of the norm of the h returned, worst of "
                                f"{', '.join(_outputs(norm, p))}"
                            ],
                        },
                    )
                )
            ctx.status(base, "float64 reference", force=False)
            _errors(norm_cases, norm, x2d, r2d, dy2d, dh2d, [np.asarray(q) for q in params], dtype)
            for case in norm_cases:
                cases.append(case)
                if ctx.on_case is not None:
                    ctx.on_case(case)
            del impls
    return cases


# --------------------------------------------------------------- targets


def targets(cases: list[CaseResult]) -> list[Target]:
    """The issue's goals at the headline shape: fused fwd+bwd at least
    FUSED_GOAL times faster than unfused; every fused pass at least
    PROBE_GOAL of the probe's rate for the bytes it must move."""
    out: list[Target] = []
    for case in cases:
        if tuple(case.shape) != HEADLINE_SHAPE or case.ours not in case.results:
            continue
        p = case.extra.get("pass")
        if p == "fwd+bwd":
            out.append(speedup_target(case, "unfused", ">=", FUSED_GOAL))
            if "unfused_jit" in case.results and "ours_jit" in case.results:
                out.append(speedup_target(case, "unfused_jit", ">=", FUSED_GOAL, ours="ours_jit"))
        else:
            f = case.fraction_of_probe(case.ours)
            out.append(
                Target(
                    f"{case.label}: ours rate / probe rate for the bytes it must move",
                    f,
                    f">= {PROBE_GOAL:g}",
                    None if f is None else f >= PROBE_GOAL,
                )
            )
    out += norm_section.worst_error_targets(cases, ("ours", "unfused", "ours_jit", "unfused_jit"), TOLERANCE)
    return out
