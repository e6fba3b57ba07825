"""Benchmark section ``layer_norm``: the full LayerNorm against XLA autodiff
and PyTorch.

Three passes per shape and dtype, each reported as its own case:

* ``fwd``: ``y = layer_norm(x, gamma, beta)`` over the last axis.
* ``bwd``: the VJP alone, from the residuals its own forward saved: dx,
  dgamma, dbeta for an upstream gradient dy.
* ``fwd+bwd``: ``jax.vjp`` under ``jit``: y and the three gradients (a
  training step's LayerNorm).

x and dy have the case's dtype; gamma and beta are float32 (16-bit
activations with float32 parameters, as mixed-precision training has them).

Implementations, on the same input buffers. Each of ours, ours_chained,
xla and torch runs twice:

* donated (its own name): it writes its [rows, H] outputs into
  preallocated buffers that earlier calls already touched (donated to
  ``jit`` for JAX, ``.out`` overloads for PyTorch): the kernels' steady
  state, which page faults do not decide.
* plain (``<name>_plain``): a plain ``jax.jit`` that donates nothing (the
  functional PyTorch ops), so every call allocates its outputs afresh, as a
  training step written the ordinary way does. Above glibc's mmap threshold
  each fresh block is a new mapping whose pages fault in on first write;
  `jax_lngb.retain_host_memory` (JAX_LNGB_RETAIN_HOST_MEMORY=1) makes glibc
  keep freed blocks instead. Whether it was on is in the header, the JSON
  (``machine.retain_host_memory``) and each case's ``extra``.

* ``ours``: ``jax_lngb.layer_norm`` (C++ forward; its VJP is the fused
  LayerNormGrad -> LayerNormGradBeta kernel).
* ``ours_chained`` (bwd, fwd+bwd): ``backward="chained"``, CANN's two public
  ops ``layer_norm_grad`` then ``layer_norm_grad_beta``.
* ``xla``: XLA autodiff of the plain jax.numpy LayerNorm
  (``jax_lngb.layer_norm_jnp``, float32 statistics) under ``jit``.
* ``torch``: ``aten.native_layer_norm`` / ``native_layer_norm_backward``
  (output mask True, True, True) on the CPU, when PyTorch is installed.
* ``probe``: the streaming-read probe (``common.stream_read``): its GB/s is
  the ceiling for the bytes a pass moves.
* ``xla_stream`` (fwd, bwd): XLA's elementwise ``-x`` / ``x + dy`` into a
  donated buffer: the pass's exact traffic (read x, write y / read x and
  dy, write dx) with no arithmetic to speak of.

Bytes: a pass's ``bytes_read`` is what an ideal implementation moves, each
[rows, H] input read once and each [rows, H] output written once: fwd 2, bwd
3, fwd+bwd 5 arrays of the case's size. ``fraction_of_probe`` is then "how
close to streaming its bytes at the probe's rate": 1 / fraction is the
time over that streaming time.

Errors are against float64 NumPy LayerNorm and its exact gradient (computed
a block of rows at a time), per output; "ulps" is the largest error in units
of the output dtype's spacing at that output's largest magnitude (gradients
pass through zero, where an element's own spacing says nothing).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .common import BenchContext, CaseResult, Impl, Target, optional_torch, ready, speedup_target, stream_read, ulp

NAME = "layer_norm"
TITLE = "LayerNorm forward, backward and forward+backward (jax.vjp) vs XLA autodiff and PyTorch"
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
IMPLEMENTATIONS = ("ours", "ours_plain", "ours_chained", "ours_chained_plain", "xla", "xla_plain", "torch",
                   "torch_plain", "probe", "xla_stream")
# The implementations that also run as plain jit (fresh outputs): name -> plain name.
PLAIN = {n: f"{n}_plain" for n in ("ours", "ours_chained", "xla", "torch")}
EPSILON = 1e-5
_OUTPUTS = {"fwd": ("y",), "bwd": ("dx", "dgamma", "dbeta"), "fwd+bwd": ("y", "dx", "dgamma", "dbeta")}
_ARRAYS_MOVED = {"fwd": 2, "bwd": 3, "fwd+bwd": 5}
_REF_ROWS = 4096
# Agreement with the float64 reference: max |error| over max |reference|,
# per output. 16-bit outputs are rounded once (2^-8 / 2^-11 relative) after
# float32 arithmetic; float32 outputs carry float32 row sums.
TOLERANCE = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 1.6e-2}


def _label(shape: tuple[int, ...], dtype: str, pass_: str) -> str:
    return f"[{', '.join(str(d) for d in shape)}] {dtype} {pass_}"


# ------------------------------------------------------------- reference


def _reference_blocks(x2d: np.ndarray, dy2d: np.ndarray, gamma: np.ndarray, beta: np.ndarray):
    """Yields (r0, r1, y, dx) in float64 for blocks of rows, and finally
    returns (dgamma, dbeta): the exact LayerNorm and its gradient."""
    g = gamma.astype(np.float64)
    b = beta.astype(np.float64)
    h = x2d.shape[1]
    dgamma = np.zeros(h)
    dbeta = np.zeros(h)
    for r0 in range(0, x2d.shape[0], _REF_ROWS):
        x = x2d[r0 : r0 + _REF_ROWS].astype(np.float64)
        d = dy2d[r0 : r0 + _REF_ROWS].astype(np.float64)
        mean = x.mean(-1, keepdims=True)
        xc = x - mean
        rstd = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + EPSILON)
        xhat = xc * rstd
        dg = d * g
        dx = rstd * (dg - dg.mean(-1, keepdims=True) - xhat * (dg * xhat).mean(-1, keepdims=True))
        dgamma += (d * xhat).sum(0)
        dbeta += d.sum(0)
        yield r0, r0 + x.shape[0], xhat * g + b, dx
    return dgamma, dbeta


class _ErrorAccumulator:
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


def _rows_of(a: Any, r0: int, r1: int, h: int) -> np.ndarray:
    """Rows r0:r1 of a [rows, H]-shaped output (JAX or PyTorch) as float32."""
    if type(a).__module__.startswith("torch"):
        return a.reshape(-1, h)[r0:r1].float().numpy()
    return np.asarray(a).reshape(-1, h)[r0:r1].astype(np.float32)


def _vector(a: Any) -> np.ndarray:
    if type(a).__module__.startswith("torch"):
        return a.float().numpy()
    return np.asarray(a, np.float32)


def _measure_errors(cases: list[CaseResult], x2d, dy2d, gamma, beta, dtype: str) -> None:
    """Fills every implementation's errors (and drops its outputs)."""
    h = x2d.shape[1]
    accs = {}
    for case in cases:
        pass_ = case.extra["pass"]
        names = _OUTPUTS[pass_]
        dtypes = {n: (dtype if n in ("y", "dx") else "float32") for n in names}
        for impl, r in case.results.items():
            if r.outputs is not None and impl != case.probe and not impl.startswith("xla_stream"):
                accs[(case.label, impl)] = (_ErrorAccumulator(names, dtypes), names, r.outputs)
    blocks = _reference_blocks(x2d, dy2d, gamma, beta)
    while True:
        try:
            r0, r1, y_ref, dx_ref = next(blocks)
        except StopIteration as stop:
            dgamma, dbeta = stop.value
            break
        for acc, names, outs in accs.values():
            for n, o in zip(names, outs):
                if n == "y":
                    acc.add(n, _rows_of(o, r0, r1, h), y_ref)
                elif n == "dx":
                    acc.add(n, _rows_of(o, r0, r1, h), dx_ref)
    for acc, names, outs in accs.values():
        for n, o in zip(names, outs):
            if n == "dgamma":
                acc.add(n, _vector(o), dgamma)
            elif n == "dbeta":
                acc.add(n, _vector(o), dbeta)
    for case in cases:
        for impl, r in case.results.items():
            key = (case.label, impl)
            if key in accs:
                r.errors = accs[key][0].result()
            r.outputs = None


# -------------------------------------------------------- implementations


def _jax_impls(ctx: BenchContext, x, dy, gamma, beta) -> dict[str, dict[str, Impl]]:
    """{pass: {name: Impl}} for ours, ours_chained, xla and xla_stream."""
    import jax
    import jax.numpy as jnp

    from jax_lngb import _native, layer_norm, layer_norm_jnp

    out: dict[str, dict[str, Impl]] = {p: {} for p in PASSES}
    isa = _native.cpu_isa()
    variants = [
        ("ours", lambda *a: layer_norm(*a, epsilon=EPSILON), f"jax_lngb.layer_norm, fused backward, {isa}"),
        ("ours_chained", lambda *a: layer_norm(*a, epsilon=EPSILON, backward="chained"),
         "backward='chained': layer_norm_grad -> layer_norm_grad_beta"),
        ("xla", lambda *a: layer_norm_jnp(*a, epsilon=EPSILON), "jit, XLA autodiff of layer_norm_jnp"),
    ]
    # Each output buffer is donated back to the next call: steady state
    # writes into memory that is already mapped.
    donate = dict(keep_unused=True)
    for name, fn, note in variants:
        if ctx.wants(PLAIN[name]):
            for p, im in _plain_jax_impls(PLAIN[name], fn, note, x, dy, gamma, beta, fwd=name != "ours_chained").items():
                out[p][PLAIN[name]] = im
        if not ctx.wants(name):
            continue
        if name != "ours_chained":
            fwd = jax.jit(lambda x, g, b, o, fn=fn: fn(x, g, b), donate_argnums=3, **donate)
            state = {"o": jnp.zeros_like(x)}

            def run_fwd(fwd=fwd, state=state):
                state["o"] = fwd(x, gamma, beta, state["o"])
                return (ready(state["o"]),)

            out["fwd"][name] = Impl(name, run_fwd, note)
        # The backward alone: the pullback (a pytree of the residuals its
        # forward saved) goes into jit as an argument.
        _, pullback = jax.vjp(fn, x, gamma, beta)
        bwd = jax.jit(lambda f, dy, o: f(dy), donate_argnums=2, **donate)
        bstate = {"o": jnp.zeros_like(x)}

        def run_bwd(bwd=bwd, pullback=pullback, state=bstate):
            outs = bwd(pullback, dy, state["o"])
            state["o"] = outs[0]
            return ready(outs)

        out["bwd"][name] = Impl(name, run_bwd, note)

        def step(x, g, b, dy, o1, o2, fn=fn):
            y, f = jax.vjp(fn, x, g, b)
            return (y, *f(dy))

        fb = jax.jit(step, donate_argnums=(4, 5), **donate)
        fbstate = {"o": (jnp.zeros_like(x), jnp.zeros_like(x))}

        def run_fb(fb=fb, state=fbstate):
            outs = fb(x, gamma, beta, dy, *state["o"])
            state["o"] = (outs[0], outs[1])
            return ready(outs)

        out["fwd+bwd"][name] = Impl(name, run_fb, note + " (jax.vjp)")
    if ctx.wants("xla_stream"):
        neg = jax.jit(lambda a, o: -a, donate_argnums=1, **donate)
        add = jax.jit(lambda a, b, o: a + b, donate_argnums=2, **donate)
        s1 = {"o": jnp.zeros_like(x)}
        s2 = {"o": jnp.zeros_like(x)}

        def run_neg(state=s1):
            state["o"] = neg(x, state["o"])
            return ready(state["o"])

        def run_add(state=s2):
            state["o"] = add(x, dy, state["o"])
            return ready(state["o"])

        out["fwd"]["xla_stream"] = Impl("xla_stream", run_neg, "jit(-x) into a donated buffer: read x, write y")
        out["bwd"]["xla_stream"] = Impl("xla_stream", run_add, "jit(x + dy) into a donated buffer: read 2, write 1")
    return out


def _plain_jax_impls(name: str, fn, note: str, x, dy, gamma, beta, fwd: bool) -> dict[str, Impl]:
    """{pass: Impl} for `fn` under a plain jax.jit: nothing donated, so each
    call's [rows, H] outputs are fresh allocations (a training step as
    users write it)."""
    import jax

    out: dict[str, Impl] = {}
    note = f"{note}; plain jit, fresh outputs"
    if fwd:
        f = jax.jit(lambda x, g, b: fn(x, g, b))
        out["fwd"] = Impl(name, lambda: (ready(f(x, gamma, beta)),), note)
    _, pullback = jax.vjp(fn, x, gamma, beta)
    bwd = jax.jit(lambda f, dy: f(dy))
    out["bwd"] = Impl(name, lambda: ready(bwd(pullback, dy)), note)

    def step(x, g, b, dy):
        y, f = jax.vjp(fn, x, g, b)
        return (y, *f(dy))

    fb = jax.jit(step)
    out["fwd+bwd"] = Impl(name, lambda: ready(fb(x, gamma, beta, dy)), note + " (jax.vjp)")
    return out


def _torch_impls(torch, x, dy, gamma, beta) -> dict[str, dict[str, Impl]]:
    """{"torch": {pass: Impl}, "torch_plain": {pass: Impl}}: PyTorch's CPU
    LayerNorm writing into preallocated tensors, and its functional ops."""
    h = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    tx = torch.from_dlpack(x).reshape(rows, h)
    tdy = torch.from_dlpack(dy).reshape(rows, h)
    tw = torch.from_dlpack(gamma)
    tb = torch.from_dlpack(beta)
    stat = torch.float32
    y = torch.zeros_like(tx)
    mean = torch.zeros(rows, 1, dtype=stat)
    rstd = torch.zeros(rows, 1, dtype=stat)
    dx = torch.zeros_like(tx)
    dw = torch.zeros(h, dtype=tw.dtype)
    db = torch.zeros(h, dtype=tb.dtype)
    mask = [True, True, True]

    def fwd():
        torch.ops.aten.native_layer_norm.out(tx, [h], tw, tb, EPSILON, out0=y, out1=mean, out2=rstd)
        return (y,)

    def bwd_only():
        torch.ops.aten.native_layer_norm_backward.out(tdy, tx, [h], mean, rstd, tw, tb, mask, out0=dx, out1=dw, out2=db)
        return dx, dw, db

    def both():
        fwd()
        bwd_only()
        return y, dx, dw, db

    # Plain: the functional ops, whose outputs are fresh tensors every call.
    _, pmean, prstd = torch.ops.aten.native_layer_norm(tx, [h], tw, tb, EPSILON)

    def fwd_plain():
        return (torch.ops.aten.native_layer_norm(tx, [h], tw, tb, EPSILON)[0],)

    def bwd_plain():
        return tuple(torch.ops.aten.native_layer_norm_backward(tdy, tx, [h], pmean, prstd, tw, tb, mask))

    def both_plain():
        y, m, r = torch.ops.aten.native_layer_norm(tx, [h], tw, tb, EPSILON)
        return (y, *torch.ops.aten.native_layer_norm_backward(tdy, tx, [h], m, r, tw, tb, mask))

    fwd()  # the backward's residuals
    note = f"aten.native_layer_norm(_backward).out, mask (T,T,T), {torch.get_num_threads()} threads"
    pnote = f"aten.native_layer_norm(_backward), fresh outputs, {torch.get_num_threads()} threads"
    return {
        "torch": {"fwd": Impl("torch", fwd, note), "bwd": Impl("torch", bwd_only, note),
                  "fwd+bwd": Impl("torch", both, note)},
        "torch_plain": {"fwd": Impl("torch_plain", fwd_plain, pnote), "bwd": Impl("torch_plain", bwd_plain, pnote),
                        "fwd+bwd": Impl("torch_plain", both_plain, pnote)},
    }


# ------------------------------------------------------------------- run


def run(ctx: BenchContext) -> list[CaseResult]:
    import jax
    import jax.numpy as jnp

    from jax_lngb import host_memory

    torch = optional_torch() if ctx.wants("torch") or ctx.wants("torch_plain") else None
    retained = host_memory.is_enabled()
    rng = np.random.default_rng(ctx.seed)
    cases: list[CaseResult] = []

    for shape, dtype in ctx.cases(NAME, DEFAULT_SHAPES):
        if len(shape) < 1:
            raise ValueError(f"layer_norm shapes need rank >= 1, got {shape}")
        base = _label(shape, dtype, "").strip()
        ctx.status(base, "preparing inputs", force=True)
        jdt = jnp.dtype(dtype)
        h = shape[-1]
        rows = math.prod(shape[:-1])
        x = jax.device_put((rng.standard_normal(shape, dtype=np.float32) * 2 + 0.5).astype(jdt))
        dy = jax.device_put(rng.standard_normal(shape, dtype=np.float32).astype(jdt))
        gamma = jax.device_put((1 + 0.1 * rng.standard_normal(h)).astype(np.float32))
        beta = jax.device_put((0.1 * rng.standard_normal(h)).astype(np.float32))
        ready((x, dy, gamma, beta))
        array_bytes = x.nbytes

        impls = _jax_impls(ctx, x, dy, gamma, beta)
        if torch is not None:
            try:
                for name, per_pass in _torch_impls(torch, x, dy, gamma, beta).items():
                    if ctx.wants(name):
                        for p, im in per_pass.items():
                            impls[p][name] = im
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
                    "retain_host_memory": retained,
                    "notes": [
                        f"bytes = {_ARRAYS_MOVED[p]} [rows, H] arrays moved once; "
                        "errors vs float64 LayerNorm and its exact gradient, worst of "
                        f"{', '.join(_OUTPUTS[p])}; ulps at each output's largest magnitude; "
                        "gamma/beta float32",
                        "*_plain: plain jit, nothing donated, fresh outputs every call; retain_host_memory "
                        + ("on" if retained else "off"),
                    ],
                },
            )
            shape_cases.append(case)
        ctx.status(base, "float64 reference", force=False)
        x2d = np.asarray(x).reshape(rows, h)
        dy2d = np.asarray(dy).reshape(rows, h)
        _measure_errors(shape_cases, x2d, dy2d, np.asarray(gamma), np.asarray(beta), dtype)
        for case in shape_cases:
            cases.append(case)
            if ctx.on_case is not None:
                ctx.on_case(case)
        del impls, x, dy, x2d, dy2d
    return cases


# --------------------------------------------------------------- targets


# Plain jit (fresh outputs) at the headline shape, goals that hold with
# jax_lngb.retain_host_memory on: ours within PLAIN_OVER_DONATED of its
# donated steady state, and XLA autodiff (plain, under the same opt-in) at
# least PLAIN_XLA_SPEEDUP[dtype] times slower.
PLAIN_OVER_DONATED = 1.25
PLAIN_XLA_SPEEDUP = {"float32": 8.0, "bfloat16": 12.0}


def _plain_targets(case: CaseResult) -> list[Target]:
    """The plain-jit goals on a headline fwd+bwd case: checked when the run
    had retain_host_memory on, reported only (passed None) otherwise."""
    if PLAIN["ours"] not in case.results:
        return []
    on = bool(case.extra.get("retain_host_memory"))
    why = "retain_host_memory off: reported, not checked"
    return [
        speedup_target(case, PLAIN["ours"], "<=", PLAIN_OVER_DONATED, ours="ours", checked=on, why_unchecked=why),
        speedup_target(case, PLAIN["xla"], ">=", PLAIN_XLA_SPEEDUP[case.dtype], ours=PLAIN["ours"], checked=on,
                       why_unchecked=why),
        speedup_target(case, PLAIN["torch"], ">", 1, ours=PLAIN["ours"], checked=False,
                       why_unchecked="reported, not checked"),
    ]


def targets(cases: list[CaseResult]) -> list[Target]:
    """The goals of the fused-LayerNorm issue, checked on the measured cases."""
    out: list[Target] = []

    for case in cases:
        if tuple(case.shape) != HEADLINE_SHAPE or case.ours not in case.results:
            continue
        p = case.extra.get("pass")
        if p == "fwd+bwd" and case.dtype in ("float32", "bfloat16"):
            out.append(speedup_target(case, "xla", ">=", 3))
            out.append(speedup_target(case, "torch", ">", 1))
            out += _plain_targets(case)
        if p == "bwd":
            f = case.fraction_of_probe(case.ours)
            t = None if f is None else 1 / f
            out.append(
                Target(
                    f"{case.label}: ours time / time to stream its bytes at the probe's rate",
                    t, "<= 1.3", None if t is None else t <= 1.3,
                )
            )
    # Accuracy of ours (and the chained backward) on every case.
    worst: dict[str, tuple[float, str]] = {}
    for case in cases:
        tol = TOLERANCE[case.dtype]
        for name in ("ours", "ours_chained", PLAIN["ours"], PLAIN["ours_chained"]):
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
    # Never slower than XLA autodiff, on any case and pass.
    slowest = math.inf
    where = ""
    for case in cases:
        v = case.vs_ours("xla")
        if v is not None and v < slowest:
            slowest, where = v, case.label
    if not math.isinf(slowest):
        out.append(Target(f"every case: xla / ours time, worst [{where}]", slowest, ">= 1", slowest >= 1))
    return out
