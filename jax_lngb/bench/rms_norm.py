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

from . import norm_section
from .common import BenchContext, CaseResult, Impl, Target, speedup_target
from .norm_section import PASSES, NormSection

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
IMPLEMENTATIONS = ("ours", "ours_chained", "ours_jit", "xla", "xla_jit", "torch", "probe")
EPSILON = 1e-6
_OUTPUTS = {"fwd": ("y",), "bwd": ("dx", "dgamma"), "fwd+bwd": ("y", "dx", "dgamma")}
_ARRAYS_MOVED = {"fwd": 2, "bwd": 3, "fwd+bwd": 4}
_REF_ROWS = norm_section.REF_ROWS
TOLERANCE = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 1.6e-2}


def _reference_blocks(x2d: np.ndarray, dy2d: np.ndarray, gamma: np.ndarray):
    """Yields (r0, r1, y, dx) in float64 for blocks of rows, then returns
    {"dgamma"}: the exact RMSNorm and its gradient."""
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
    return {"dgamma": dgamma}


# -------------------------------------------------------- implementations


def _jax_impls(ctx: BenchContext, x, dy, gamma) -> dict[str, dict[str, Impl]]:
    """{pass: {name: Impl}} for ours, ours_chained, xla, ours_jit and xla_jit."""
    from jax_lngb import rms_norm, rms_norm_jnp
    from jax_lngb._core import native as _native

    out: dict[str, dict[str, Impl]] = {p: {} for p in PASSES}
    isa = _native.cpu_isa()
    variants = [
        ("ours", lambda *a: rms_norm(*a, epsilon=EPSILON), f"jax_lngb.rms_norm, fused backward, {isa}"),
        (
            "ours_chained",
            lambda *a: rms_norm(*a, epsilon=EPSILON, backward="chained"),
            "backward='chained': rms_norm_grad -> layer_norm_grad_beta",
        ),
        ("xla", lambda *a: rms_norm_jnp(*a, epsilon=EPSILON), "jit, XLA autodiff of rms_norm_jnp"),
    ]
    for name, fn, note in variants:
        if ctx.wants(name):
            for p, im in norm_section.donated_jax_impls(
                name,
                fn,
                note,
                x,
                dy,
                (gamma,),
                fwd=name != "ours_chained",
                suffixes=(", y donated", ", dx donated", " (jax.vjp), y and dx donated"),
            ).items():
                out[p][name] = im
        plain = {"ours": "ours_jit", "xla": "xla_jit"}.get(name)
        if plain and ctx.wants(plain):
            for p, im in norm_section.plain_jax_impls(
                plain,
                fn,
                note,
                x,
                dy,
                (gamma,),
                passes=("fwd+bwd",),
                suffixes={"fwd+bwd": " (jax.vjp), plain jit: fresh outputs"},
            ).items():
                out[p][plain] = im
    return out


def _torch_impls(torch, x, dy, gamma) -> dict[str, dict[str, Impl]]:
    """{"torch": {pass: Impl}} for torch.nn.functional.rms_norm on the CPU. Its fused
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
    return {
        "torch": {
            "fwd": Impl("torch", fwd, note),
            "bwd": Impl("torch", bwd, note),
            "fwd+bwd": Impl("torch", both, note),
        }
    }


# ------------------------------------------------------------------- run


def _extra(p: str) -> dict[str, Any]:
    return {
        "notes": [
            f"bytes = {_ARRAYS_MOVED[p]} [rows, H] arrays moved once; errors vs float64 RMSNorm and "
            f"its exact gradient, worst of {', '.join(_OUTPUTS[p])}; gamma float32"
        ],
    }


SECTION = NormSection(
    name=NAME,
    default_shapes=DEFAULT_SHAPES,
    implementations=IMPLEMENTATIONS,
    outputs=_OUTPUTS,
    arrays_moved=_ARRAYS_MOVED,
    param_offsets=(1.0,),  # gamma
    reference=_reference_blocks,
    jax_impls=_jax_impls,
    torch_impls=_torch_impls,
    torch_names=("torch",),
    extra=_extra,
)


def run(ctx: BenchContext) -> list[CaseResult]:
    return norm_section.run_cases(ctx, SECTION)


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
            out.append(norm_section.probe_rate_target(case))
    out += norm_section.worst_error_targets(cases, ("ours", "ours_chained", "ours_jit"), TOLERANCE)
    return out
