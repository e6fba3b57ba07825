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

from . import norm_section
from .common import BenchContext, CaseResult, Impl, Target, ready, speedup_target
from .norm_section import PASSES, NormSection

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
IMPLEMENTATIONS = (
    "ours",
    "ours_plain",
    "ours_chained",
    "ours_chained_plain",
    "xla",
    "xla_plain",
    "torch",
    "torch_plain",
    "probe",
    "xla_stream",
)
# The implementations that also run as plain jit (fresh outputs): name -> plain name.
PLAIN = {n: f"{n}_plain" for n in ("ours", "ours_chained", "xla", "torch")}
EPSILON = 1e-5
_OUTPUTS = {"fwd": ("y",), "bwd": ("dx", "dgamma", "dbeta"), "fwd+bwd": ("y", "dx", "dgamma", "dbeta")}
_ARRAYS_MOVED = {"fwd": 2, "bwd": 3, "fwd+bwd": 5}
_REF_ROWS = norm_section.REF_ROWS
# Agreement with the float64 reference: max |error| over max |reference|,
# per output. 16-bit outputs are rounded once (2^-8 / 2^-11 relative) after
# float32 arithmetic; float32 outputs carry float32 row sums.
TOLERANCE = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 1.6e-2}


# ------------------------------------------------------------- reference


def _reference_blocks(x2d: np.ndarray, dy2d: np.ndarray, gamma: np.ndarray, beta: np.ndarray):
    """Yields (r0, r1, y, dx) in float64 for blocks of rows, and finally
    returns {"dgamma", "dbeta"}: the exact LayerNorm and its gradient."""
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
    return {"dgamma": dgamma, "dbeta": dbeta}


# -------------------------------------------------------- implementations


def _jax_impls(ctx: BenchContext, x, dy, gamma, beta) -> dict[str, dict[str, Impl]]:
    """{pass: {name: Impl}} for ours, ours_chained, xla and xla_stream."""
    import jax
    import jax.numpy as jnp

    from jax_lngb import layer_norm, layer_norm_jnp
    from jax_lngb._core import native as _native

    out: dict[str, dict[str, Impl]] = {p: {} for p in PASSES}
    isa = _native.cpu_isa()
    variants = [
        ("ours", lambda *a: layer_norm(*a, epsilon=EPSILON), f"jax_lngb.layer_norm, fused backward, {isa}"),
        (
            "ours_chained",
            lambda *a: layer_norm(*a, epsilon=EPSILON, backward="chained"),
            "backward='chained': layer_norm_grad -> layer_norm_grad_beta",
        ),
        ("xla", lambda *a: layer_norm_jnp(*a, epsilon=EPSILON), "jit, XLA autodiff of layer_norm_jnp"),
    ]
    for name, fn, note in variants:
        if ctx.wants(PLAIN[name]):
            for p, im in _plain_jax_impls(
                PLAIN[name], fn, note, x, dy, gamma, beta, fwd=name != "ours_chained"
            ).items():
                out[p][PLAIN[name]] = im
        if not ctx.wants(name):
            continue
        for p, im in norm_section.donated_jax_impls(
            name, fn, note, x, dy, (gamma, beta), fwd=name != "ours_chained", suffixes=("", "", " (jax.vjp)")
        ).items():
            out[p][name] = im
    donate = dict(keep_unused=True)
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
    tail = "; plain jit, fresh outputs"
    return norm_section.plain_jax_impls(
        name,
        fn,
        note,
        x,
        dy,
        (gamma, beta),
        passes=PASSES if fwd else ("bwd", "fwd+bwd"),
        suffixes={"fwd": tail, "bwd": tail, "fwd+bwd": tail + " (jax.vjp)"},
    )


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
        "torch": {
            "fwd": Impl("torch", fwd, note),
            "bwd": Impl("torch", bwd_only, note),
            "fwd+bwd": Impl("torch", both, note),
        },
        "torch_plain": {
            "fwd": Impl("torch_plain", fwd_plain, pnote),
            "bwd": Impl("torch_plain", bwd_plain, pnote),
            "fwd+bwd": Impl("torch_plain", both_plain, pnote),
        },
    }


# ------------------------------------------------------------------- run


def _extra(p: str) -> dict[str, Any]:
    from jax_lngb import host_memory

    retained = host_memory.is_enabled()
    return {
        "retain_host_memory": retained,
        "notes": [
            f"bytes = {_ARRAYS_MOVED[p]} [rows, H] arrays moved once; "
            "errors vs float64 LayerNorm and its exact gradient, worst of "
            f"{', '.join(_OUTPUTS[p])}; ulps at each output's largest magnitude; "
            "gamma/beta float32",
            "*_plain: plain jit, nothing donated, fresh outputs every call; retain_host_memory "
            + ("on" if retained else "off"),
        ],
    }


SECTION = NormSection(
    name=NAME,
    default_shapes=DEFAULT_SHAPES,
    implementations=IMPLEMENTATIONS,
    outputs=_OUTPUTS,
    arrays_moved=_ARRAYS_MOVED,
    param_offsets=(1.0, 0.0),  # gamma, beta
    reference=_reference_blocks,
    jax_impls=_jax_impls,
    torch_impls=_torch_impls,
    torch_names=("torch", "torch_plain"),
    extra=_extra,
    # xla_stream computes -x / x + dy, not the norm: timed only.
    skip_errors=lambda name: name.startswith("xla_stream"),
)


def run(ctx: BenchContext) -> list[CaseResult]:
    return norm_section.run_cases(ctx, SECTION)


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
        speedup_target(
            case, PLAIN["xla"], ">=", PLAIN_XLA_SPEEDUP[case.dtype], ours=PLAIN["ours"], checked=on, why_unchecked=why
        ),
        speedup_target(
            case, PLAIN["torch"], ">", 1, ours=PLAIN["ours"], checked=False, why_unchecked="reported, not checked"
        ),
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
            out.append(norm_section.probe_rate_target(case))
    # Accuracy of ours (and the chained backward) on every case.
    out += norm_section.worst_error_targets(
        cases, ("ours", "ours_chained", PLAIN["ours"], PLAIN["ours_chained"]), TOLERANCE
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
