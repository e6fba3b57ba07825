"""The FFI handlers re-check what they rely on: a custom call bound with
inconsistent buffers (which the primitives' abstract evaluation never
produces, but a hand-written `jax.ffi.ffi_call` or a stale exported module
can) fails with a JaxRuntimeError that says what is wrong, never an abort,
and the process keeps working afterwards.

CASES holds inconsistent calls (target, operands, results, attributes,
aliases, message pattern); VALID holds consistent calls the primitives never
make but the handler must accept. When a new handler lands, add its rows to
both (a helper like gb() per target keeps them short) and its float64
meaning to MEANINGS, which test_consistent_direct_calls_... checks against.

Covered handlers: LayerNormGradBeta (gb), the LayerNorm forward (fw),
LayerNormGrad (lg) and the fused backward (bw). The tangent primitive has no
handler (it lowers to jax.numpy on every platform).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import enable_x64

from jax_lngb import layer_norm, layer_norm_grad_beta, layer_norm_grad_ref, layer_norm_ref
from jax_lngb._ops.primitives import LAYER_NORM_BACKWARD_TARGET as BACKWARD
from jax_lngb._ops.primitives import LAYER_NORM_FORWARD_TARGET as FORWARD
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_BETA_TARGET as GRAD_BETA
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_TARGET as GRAD

F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32
S = jax.ShapeDtypeStruct


@dataclasses.dataclass(frozen=True)
class Call:
    target: str
    operands: tuple[S, ...]
    results: tuple[S, ...]
    pattern: str = ""  # empty: a consistent call that must succeed
    attrs: tuple[tuple[str, object], ...] = ()
    aliases: tuple[tuple[int, int], ...] = ()  # (operand, result) sharing a buffer


def gb(ins, outs, pattern=""):
    """A grad_beta call: ins/outs are ((shape, dtype), ...)."""
    return Call(GRAD_BETA, tuple(S(s, d) for s, d in ins), tuple(S(s, d) for s, d in outs), pattern)


def ln_call(target):
    """A constructor of LayerNorm handler calls: ins/outs as for gb(); the
    epsilon attribute is float32 1e-5 unless `attrs` replaces it."""

    def make(ins, outs, pattern="", attrs=None, aliases=()):
        attrs = (("epsilon", np.float32(1e-5)),) if attrs is None else tuple(attrs.items())
        return Call(target, tuple(S(s, d) for s, d in ins), tuple(S(s, d) for s, d in outs), pattern, attrs, aliases)

    return make


fw, lg, bw = ln_call(FORWARD), ln_call(GRAD), ln_call(BACKWARD)


A = ((4, 8), F32)
OUT = ((8,), F32)
# LayerNorm operands for x [4, 8]: rows, per-row statistics, a parameter.
ROWS, STAT, PRM = ((4, 8), F32), ((4,), F32), ((8,), F32)
FW_OUT = [ROWS, STAT, STAT]  # y, mean, variance
LG_IN = [ROWS, ROWS, STAT, STAT, PRM]  # dy, x, variance, mean, gamma
BW_OUT = [ROWS, PRM, PRM]  # dx, pd_gamma, pd_beta

CASES: dict[str, Call] = {
    # operands
    "rank0": gb([((), F32), ((), F32)], [((), F32), ((), F32)], r"jax_lngb: res_for_gamma must have rank >= 1"),
    "dy-shape": gb([A, ((4, 9), F32)], [OUT, OUT], r"jax_lngb: dy shape \[4, 9\] != res_for_gamma shape \[4, 8\]"),
    "dy-rank": gb([A, ((32,), F32)], [OUT, OUT], r"dy shape \[32\] != res_for_gamma shape \[4, 8\]"),
    "dy-dtype": gb([A, ((4, 8), BF16)], [OUT, OUT], r"jax_lngb: res_for_gamma and dy dtypes differ"),
    "int-operands": gb([((4, 8), I32), ((4, 8), I32)], [OUT, OUT], r"jax_lngb: unsupported input dtype"),
    # results
    "result-dtypes-differ": gb([A, A], [OUT, ((8,), F16)], r"jax_lngb: pd_gamma and pd_beta buffers differ"),
    "result-shapes-differ": gb([A, A], [OUT, ((9,), F32)], r"pd_gamma and pd_beta buffers differ"),
    "int-results": gb([A, A], [((8,), I32), ((8,), I32)], r"jax_lngb: unsupported output dtype"),
    "result-rank0": gb([A, A], [((), F32), ((), F32)], r"jax_lngb: output rank must be between 1 and the input rank"),
    "result-rank-too-big": gb(
        [((8,), F32), ((8,), F32)], [((1, 8), F32), ((1, 8), F32)], r"output rank must be between 1"
    ),
    "result-not-H": gb([A, A], [((7,), F32), ((7,), F32)], r"jax_lngb: output shape \[7\] does not end in H = 8"),
    "result-batch-not-leading": gb(
        [((3, 4, 8), F32)] * 2,
        [((4, 8), F32)] * 2,
        r"output batch dims \[4, 8\] do not lead the input shape \[3, 4, 8\]",
    ),
    # arity (checked by XLA's FFI binding before the handler runs)
    "one-operand": Call(GRAD_BETA, (S(*A),), (S(*OUT), S(*OUT)), r"Wrong number of arguments: expected 2 but got 1"),
    "three-operands": Call(
        GRAD_BETA, (S(*A),) * 3, (S(*OUT), S(*OUT)), r"Wrong number of arguments: expected 2 but got 3"
    ),
    "one-result": Call(GRAD_BETA, (S(*A),) * 2, (S(*OUT),), r"Wrong number of results: expected 2 but got 1"),
    "three-results": Call(GRAD_BETA, (S(*A),) * 2, (S(*OUT),) * 3, r"Wrong number of results: expected 2 but got 3"),
    # --- LayerNorm forward: x, gamma, beta -> y, mean, variance
    "fw/rank0": fw([((), F32), PRM, PRM], [((), F32), ((), F32), ((), F32)], r"jax_lngb: x must have rank >= 1"),
    "fw/x-int": fw([((4, 8), I32), PRM, PRM], [((4, 8), I32), STAT, STAT], r"jax_lngb: unsupported x dtype"),
    "fw/y-shape": fw([ROWS, PRM, PRM], [((8, 4), F32), STAT, STAT], r"jax_lngb: y buffer must match x \[4, 8\]"),
    "fw/y-dtype": fw([ROWS, PRM, PRM], [((4, 8), BF16), STAT, STAT], r"y buffer must match x"),
    "fw/mean-f16": fw(
        [ROWS, PRM, PRM],
        [ROWS, ((4,), F16), STAT],
        r"jax_lngb: mean/variance buffers must be float32 of shape x.shape\[:-1\]",
    ),
    "fw/variance-keepdims": fw(
        [ROWS, PRM, PRM], [ROWS, STAT, ((4, 1), F32)], r"mean/variance buffers must be float32 of shape"
    ),
    "fw/gamma-f16": fw([ROWS, ((8,), F16), PRM], FW_OUT, r"jax_lngb: gamma must be float32"),
    "fw/beta-bf16": fw([ROWS, PRM, ((8,), BF16)], FW_OUT, r"jax_lngb: beta must be float32"),
    "fw/gamma-H": fw(
        [ROWS, ((9,), F32), PRM],
        FW_OUT,
        r"jax_lngb: gamma shape \[9\] is neither \[H\] nor \[\*G, H\] for rows \[4, 8\]",
    ),
    "fw/gamma-rank0": fw([ROWS, ((), F32), PRM], FW_OUT, r"gamma shape \[\] is neither"),
    "fw/beta-rank-too-big": fw([ROWS, PRM, ((1, 4, 8), F32)], FW_OUT, r"beta shape \[1, 4, 8\] is neither"),
    "fw/gamma-groups-not-leading": fw(
        [ROWS, ((5, 8), F32), PRM], FW_OUT, r"jax_lngb: gamma group dims \[5, 8\] do not lead the rows \[4, 8\]"
    ),
    "fw/gamma-beta-group-axes": fw(
        [((3, 4, 8), F32), ((3, 8), F32), ((3, 4, 8), F32)],
        [((3, 4, 8), F32), ((3, 4), F32), ((3, 4), F32)],
        r"jax_lngb: gamma and beta have different group axes",
    ),
    "fw/eps-nan": fw(
        [ROWS, PRM, PRM], FW_OUT, r"jax_lngb: epsilon must be finite and >= 0; got nan", {"epsilon": np.float32(np.nan)}
    ),
    "fw/eps-negative": fw(
        [ROWS, PRM, PRM], FW_OUT, r"epsilon must be finite and >= 0; got -1", {"epsilon": np.float32(-1)}
    ),
    "fw/eps-inf": fw(
        [ROWS, PRM, PRM], FW_OUT, r"epsilon must be finite and >= 0; got inf", {"epsilon": np.float32(np.inf)}
    ),
    # (attribute decoding is XLA's FFI binding's, before the handler runs)
    "fw/eps-missing": fw([ROWS, PRM, PRM], FW_OUT, r"Wrong number of attributes: expected 1 but got 0", {}),
    "fw/eps-float64": fw(
        [ROWS, PRM, PRM], FW_OUT, r"Failed to decode all FFI handler operands", {"epsilon": np.float64(1e-5)}
    ),
    "fw/eps-misnamed": fw(
        [ROWS, PRM, PRM], FW_OUT, r"Failed to decode all FFI handler operands", {"eps": np.float32(1e-5)}
    ),
    "fw/two-operands": fw([ROWS, PRM], FW_OUT, r"Wrong number of arguments: expected 3 but got 2"),
    "fw/two-results": fw([ROWS, PRM, PRM], [ROWS, STAT], r"Wrong number of results: expected 3 but got 2"),
    "fw/y-aliases-x": fw(
        [ROWS, PRM, PRM], FW_OUT, r"jax_lngb: y buffer shares memory with operand x", aliases=((0, 0),)
    ),
    # (x [8, 8]: the statistics have gamma's shape [8], so they can alias it)
    "fw/mean-aliases-gamma": fw(
        [((8, 8), F32), PRM, PRM],
        [((8, 8), F32), PRM, PRM],
        r"jax_lngb: mean buffer shares memory with operand gamma",
        aliases=((1, 1),),
    ),
    # --- LayerNormGrad: dy, x, variance, mean, gamma -> pd_x, res_for_gamma
    "lg/rank0": lg([((), F32)] * 2 + [((), F32)] * 2 + [PRM], [((), F32)] * 2, r"jax_lngb: x must have rank >= 1"),
    "lg/x-int": lg([((4, 8), I32)] * 2 + [STAT, STAT, PRM], [((4, 8), I32)] * 2, r"jax_lngb: unsupported x dtype"),
    "lg/dy-shape": lg([((4, 9), F32), ROWS, STAT, STAT, PRM], [ROWS, ROWS], r"jax_lngb: dy must match x \[4, 8\]"),
    "lg/dy-dtype": lg([((4, 8), F16), ROWS, STAT, STAT, PRM], [ROWS, ROWS], r"dy must match x"),
    "lg/variance-f16": lg(
        [ROWS, ROWS, ((4,), F16), STAT, PRM],
        [ROWS, ROWS],
        r"jax_lngb: variance/mean must be float32 of shape x.shape\[:-1\]",
    ),
    "lg/mean-shape": lg([ROWS, ROWS, STAT, ((8,), F32), PRM], [ROWS, ROWS], r"variance/mean must be float32 of shape"),
    "lg/pd_x-shape": lg(LG_IN, [((32,), F32), ROWS], r"jax_lngb: pd_x/res_for_gamma buffers must match x \[4, 8\]"),
    "lg/res-dtype": lg(LG_IN, [ROWS, ((4, 8), BF16)], r"pd_x/res_for_gamma buffers must match x"),
    "lg/gamma-bf16": lg([ROWS, ROWS, STAT, STAT, ((8,), BF16)], [ROWS, ROWS], r"jax_lngb: gamma must be float32"),
    "lg/gamma-H": lg(
        [ROWS, ROWS, STAT, STAT, ((7,), F32)], [ROWS, ROWS], r"gamma shape \[7\] is neither \[H\] nor \[\*G, H\]"
    ),
    "lg/gamma-groups-not-leading": lg(
        [ROWS, ROWS, STAT, STAT, ((2, 8), F32)], [ROWS, ROWS], r"gamma group dims \[2, 8\] do not lead"
    ),
    "lg/eps-nan": lg(
        LG_IN, [ROWS, ROWS], r"jax_lngb: epsilon must be finite and >= 0; got nan", {"epsilon": np.float32(np.nan)}
    ),
    "lg/eps-negative": lg(LG_IN, [ROWS, ROWS], r"epsilon must be finite and >= 0", {"epsilon": np.float32(-1e-5)}),
    "lg/eps-missing": lg(LG_IN, [ROWS, ROWS], r"Wrong number of attributes: expected 1 but got 0", {}),
    "lg/four-operands": lg(LG_IN[:4], [ROWS, ROWS], r"Wrong number of arguments: expected 5 but got 4"),
    "lg/pd_x-aliases-x": lg(
        LG_IN, [ROWS, ROWS], r"jax_lngb: pd_x buffer shares memory with operand x", aliases=((1, 0),)
    ),
    "lg/res-aliases-dy": lg(
        LG_IN, [ROWS, ROWS], r"jax_lngb: res_for_gamma buffer shares memory with operand dy", aliases=((0, 1),)
    ),
    "lg/pd_x-aliases-dy": lg(
        LG_IN, [ROWS, ROWS], r"pd_x buffer shares memory with operand dy", aliases=((0, 0), (1, 1))
    ),
    # --- fused backward: dy, x, variance, mean, gamma -> dx, pd_gamma, pd_beta
    "bw/rank0": bw([((), F32)] * 4 + [PRM], [((), F32), PRM, PRM], r"jax_lngb: x must have rank >= 1"),
    "bw/x-bool": bw(
        [((4, 8), bool)] * 2 + [STAT, STAT, PRM], [((4, 8), bool), PRM, PRM], r"jax_lngb: unsupported x dtype"
    ),
    "bw/dy-shape": bw([((4, 7), F32), ROWS, STAT, STAT, PRM], BW_OUT, r"jax_lngb: dy must match x \[4, 8\]"),
    "bw/dy-dtype": bw([((4, 8), BF16), ROWS, STAT, STAT, PRM], BW_OUT, r"dy must match x"),
    "bw/dx-shape": bw(LG_IN, [((4, 9), F32), PRM, PRM], r"jax_lngb: dx buffer must match x \[4, 8\]"),
    "bw/dx-dtype": bw(LG_IN, [((4, 8), F16), PRM, PRM], r"dx buffer must match x"),
    "bw/variance-shape": bw(
        [ROWS, ROWS, ((4, 8), F32), STAT, PRM],
        BW_OUT,
        r"jax_lngb: variance/mean must be float32 of shape x.shape\[:-1\]",
    ),
    "bw/mean-bf16": bw([ROWS, ROWS, STAT, ((4,), BF16), PRM], BW_OUT, r"variance/mean must be float32"),
    "bw/sums-differ-dtype": bw(LG_IN, [ROWS, PRM, ((8,), F16)], r"jax_lngb: pd_gamma and pd_beta buffers differ"),
    "bw/sums-differ-shape": bw(LG_IN, [ROWS, PRM, ((1, 8), F32)], r"pd_gamma and pd_beta buffers differ"),
    "bw/sums-int": bw(LG_IN, [ROWS, ((8,), I32), ((8,), I32)], r"jax_lngb: unsupported pd_gamma dtype"),
    "bw/sums-not-H": bw(
        LG_IN, [ROWS, ((9,), F32), ((9,), F32)], r"jax_lngb: pd_gamma shape \[9\] is not \[\*G, H\] for x \[4, 8\]"
    ),
    "bw/sums-rank0": bw(LG_IN, [ROWS, ((), F32), ((), F32)], r"pd_gamma shape \[\] is not \[\*G, H\]"),
    "bw/sums-rank-too-big": bw(
        LG_IN, [ROWS, ((1, 4, 8), F32), ((1, 4, 8), F32)], r"pd_gamma shape \[1, 4, 8\] is not \[\*G, H\]"
    ),
    "bw/sums-groups-not-leading": bw(
        [((3, 4, 8), F32)] * 2 + [((3, 4), F32)] * 2 + [PRM],
        [((3, 4, 8), F32), ((4, 8), F32), ((4, 8), F32)],
        r"jax_lngb: pd_gamma group dims \[4, 8\] do not lead x \[3, 4, 8\]",
    ),
    "bw/gamma-per-group-sums-shared": bw(
        [((3, 4, 8), F32)] * 2 + [((3, 4), F32)] * 2 + [((3, 8), F32)],
        [((3, 4, 8), F32), PRM, PRM],
        r"jax_lngb: gamma \[3, 8\] must be \[H\] or pd_gamma's shape \[8\]",
    ),
    "bw/gamma-f16": bw([ROWS, ROWS, STAT, STAT, ((8,), F16)], BW_OUT, r"jax_lngb: gamma must be float32"),
    "bw/gamma-H": bw([ROWS, ROWS, STAT, STAT, ((16,), F32)], BW_OUT, r"gamma shape \[16\] is neither"),
    "bw/eps-inf": bw(
        LG_IN, BW_OUT, r"jax_lngb: epsilon must be finite and >= 0; got inf", {"epsilon": np.float32(np.inf)}
    ),
    "bw/eps-negative": bw(LG_IN, BW_OUT, r"epsilon must be finite and >= 0; got -0.5", {"epsilon": np.float32(-0.5)}),
    "bw/eps-int": bw(LG_IN, BW_OUT, r"Failed to decode all FFI handler operands", {"epsilon": np.int32(0)}),
    "bw/two-results": bw(LG_IN, BW_OUT[:2], r"Wrong number of results: expected 3 but got 2"),
    "bw/dx-aliases-dy": bw(LG_IN, BW_OUT, r"jax_lngb: dx buffer shares memory with operand dy", aliases=((0, 0),)),
    "bw/dx-aliases-x": bw(LG_IN, BW_OUT, r"dx buffer shares memory with operand x", aliases=((1, 0),)),
    "bw/pd_gamma-aliases-gamma": bw(
        LG_IN, BW_OUT, r"jax_lngb: pd_gamma buffer shares memory with operand gamma", aliases=((4, 1),)
    ),
}

# Consistent calls the primitive never makes but the handler accepts, each
# with its meaning (checked against NumPy below).
VALID: dict[str, Call] = {
    "plain": gb([A, A], [OUT, OUT]),
    "bf16-to-f16": gb([((4, 8), BF16)] * 2, [((8,), F16)] * 2),
    "zero-rows": gb([((0, 8), F16)] * 2, [((8,), F32)] * 2),
    "one-group": gb([((3, 4, 8), F32)] * 2, [((3, 8), F32)] * 2),
    "every-row-a-group": gb([A, A], [A, A]),
    # LayerNorm: per-group parameters next to shared ones, H = 1, no rows,
    # epsilon 0 (legal), 16-bit rows with float32 sums narrowed to bfloat16.
    "fw/plain": fw([ROWS, PRM, PRM], FW_OUT),
    "fw/group-gamma-shared-beta": fw(
        [((3, 5, 8), F16), ((3, 8), F32), PRM], [((3, 5, 8), F16), ((3, 5), F32), ((3, 5), F32)]
    ),
    "fw/shared-gamma-group-beta": fw(
        [((3, 5, 8), BF16), PRM, ((3, 8), F32)], [((3, 5, 8), BF16), ((3, 5), F32), ((3, 5), F32)]
    ),
    "fw/every-row-a-group": fw([ROWS, ROWS, ROWS], FW_OUT),
    "fw/H-1": fw([((6, 1), F32), ((1,), F32), ((1,), F32)], [((6, 1), F32), ((6,), F32), ((6,), F32)]),
    "fw/no-rows": fw([((0, 8), F32), PRM, PRM], [((0, 8), F32), ((0,), F32), ((0,), F32)]),
    "fw/epsilon-0": fw([ROWS, PRM, PRM], FW_OUT, attrs={"epsilon": np.float32(0)}),
    "lg/plain": lg(LG_IN, [ROWS, ROWS]),
    "lg/group-gamma": lg([((3, 5, 8), F16)] * 2 + [((3, 5), F32)] * 2 + [((3, 8), F32)], [((3, 5, 8), F16)] * 2),
    "lg/rank-1": lg([((8,), BF16)] * 2 + [((), F32)] * 2 + [PRM], [((8,), BF16)] * 2),
    "lg/no-rows": lg([((0, 8), F32)] * 2 + [((0,), F32)] * 2 + [PRM], [((0, 8), F32)] * 2),
    "bw/plain": bw(LG_IN, BW_OUT),
    "bw/bf16-sums": bw([((4, 8), F16)] * 2 + [STAT, STAT, PRM], [((4, 8), F16), ((8,), BF16), ((8,), BF16)]),
    "bw/shared-gamma-group-sums": bw(
        [((3, 5, 8), F32)] * 2 + [((3, 5), F32)] * 2 + [PRM], [((3, 5, 8), F32), ((3, 8), F32), ((3, 8), F32)]
    ),
    "bw/group-gamma-group-sums": bw(
        [((3, 5, 8), F32)] * 2 + [((3, 5), F32)] * 2 + [((3, 8), F32)], [((3, 5, 8), F32), ((3, 8), F32), ((3, 8), F32)]
    ),
    "bw/every-row-a-group": bw([ROWS, ROWS, STAT, STAT, PRM], [ROWS, ROWS, ROWS]),
    "bw/no-rows": bw([((0, 8), F32)] * 2 + [((0,), F32)] * 2 + [PRM], [((0, 8), F32), PRM, PRM]),
}


def operands(call: Call, rng) -> list[jax.Array]:
    out = []
    for sd in call.operands:
        if jnp.issubdtype(sd.dtype, jnp.floating):
            out.append(jnp.asarray(rng.standard_normal(sd.shape).astype(np.float32), sd.dtype))
        else:
            out.append(jnp.asarray(rng.integers(-3, 4, sd.shape), sd.dtype))
    return out


def run(call: Call, args):
    f = jax.ffi.ffi_call(call.target, call.results, input_output_aliases=dict(call.aliases) or None)
    return jax.jit(lambda *a: f(*a, **dict(call.attrs)))(*args)


@pytest.mark.parametrize("call", CASES.values(), ids=CASES.keys())
def test_inconsistent_buffers_give_a_clear_runtime_error(call, rng):
    with pytest.raises(jax.errors.JaxRuntimeError, match=call.pattern):
        jax.block_until_ready(run(call, operands(call, rng)))
    # The handler returned an error (no abort): the process still computes.
    x = jnp.arange(64, dtype=F32).reshape(1, 8, 8)
    np.testing.assert_array_equal(layer_norm_grad_beta(x, x)[1], [224, 232, 240, 248, 256, 264, 272, 280])
    gamma, beta = np.linspace(0.5, 2, 8, dtype=np.float32), np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(layer_norm(x, gamma, beta), layer_norm_ref(x, gamma, beta), rtol=1e-5, atol=1e-5)


def test_float64_operands_are_refused_by_the_handler(rng):
    with enable_x64():
        call = gb([((4, 8), jnp.float64)] * 2, [((8,), jnp.float64)] * 2)
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"jax_lngb: unsupported input dtype"):
            jax.block_until_ready(run(call, operands(call, rng)))
        f64 = jnp.float64
        for call, pattern in [
            (fw([((4, 8), f64), PRM, PRM], [((4, 8), f64), STAT, STAT]), r"jax_lngb: unsupported x dtype"),
            (fw([ROWS, ((8,), f64), PRM], FW_OUT), r"jax_lngb: gamma must be float32"),
            (lg([((4, 8), f64)] * 2 + [STAT, STAT, PRM], [((4, 8), f64)] * 2), r"jax_lngb: unsupported x dtype"),
            (bw([ROWS, ROWS, ((4,), f64), STAT, PRM], BW_OUT), r"jax_lngb: variance/mean must be float32"),
            (bw(LG_IN, [ROWS, ((8,), f64), ((8,), f64)]), r"jax_lngb: unsupported pd_gamma dtype"),
        ]:
            with pytest.raises(jax.errors.JaxRuntimeError, match=pattern):
                jax.block_until_ready(run(call, operands(call, rng)))


def grouped(p: np.ndarray, rank: int) -> np.ndarray:
    """A parameter [*G, H] shaped to broadcast against rows [*G, *rows, H]."""
    return p.reshape(p.shape[:-1] + (1,) * (rank - p.ndim) + p.shape[-1:])


def group_sums(t: np.ndarray, out_shape) -> np.ndarray:
    """Sums of rows [*G, *rows, H] per group: shape out_shape = [*G, H]."""
    g = len(out_shape) - 1
    return t.reshape(*t.shape[:g], -1, t.shape[-1]).sum(-2)


def grad_beta_meaning(call, res, dy):
    out = call.results[0].shape
    return group_sums(res * dy, out), group_sums(dy, out)


def forward_meaning(call, x, gamma, beta):
    eps = float(dict(call.attrs)["epsilon"])
    mean = x.mean(-1)
    var = ((x - mean[..., None]) ** 2).mean(-1)
    y = (x - mean[..., None]) / np.sqrt(var[..., None] + eps) * grouped(gamma, x.ndim) + grouped(beta, x.ndim)
    return y, mean, var


def grad_meaning(call, dy, x, variance, mean, gamma):
    eps = float(dict(call.attrs)["epsilon"])
    return layer_norm_grad_ref(dy, x, variance, mean, grouped(gamma, x.ndim), epsilon=eps)


def backward_meaning(call, dy, x, variance, mean, gamma):
    pd_x, res = grad_meaning(call, dy, x, variance, mean, gamma)
    out = call.results[1].shape
    return pd_x, group_sums(res * dy, out), group_sums(dy, out)


# target -> float64 results from float64 operands
MEANINGS = {GRAD_BETA: grad_beta_meaning, FORWARD: forward_meaning, GRAD: grad_meaning, BACKWARD: backward_meaning}
TOLERANCE = {np.dtype(F32): 1e-4, np.dtype(F16): 4e-3, np.dtype(BF16): 3e-2}


@pytest.mark.parametrize("call", VALID.values(), ids=VALID.keys())
def test_consistent_direct_calls_compute_the_documented_sums(call, rng):
    args = operands(call, rng)
    if call.target in (GRAD, BACKWARD):
        # A variance is >= 0: keep rstd moderate so the tolerance below is
        # about rounding, not about conditioning.
        args[2] = jnp.abs(args[2]) + 0.5
    got = run(call, args)
    want = MEANINGS[call.target](call, *(np.asarray(a, np.float64) for a in args))
    assert len(got) == len(want) == len(call.results)
    for g, w, r in zip(got, want, call.results, strict=True):
        assert g.shape == r.shape and g.dtype == r.dtype
        # The least precise dtype involved rounds the operands and results;
        # the float32 arithmetic is much finer. Sums of n terms scale with n.
        tol = max(TOLERANCE[np.dtype(a.dtype)] for a in (*call.operands, r))
        n = max(1, int(np.prod(call.operands[0].shape)) // max(1, int(np.prod(r.shape))))
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=tol, atol=tol * n)


def test_outputs_aliasing_the_inputs(rng):
    # Results written over the operands' buffers: every input is read before
    # any result is stored.
    res = jnp.asarray(rng.standard_normal((4, 8)).astype(np.float32))
    dy = jnp.asarray(rng.standard_normal((4, 8)).astype(np.float32))
    call = jax.ffi.ffi_call(GRAD_BETA, (S((4, 8), F32), S((4, 8), F32)), input_output_aliases={0: 0, 1: 1})
    g, b = jax.jit(call)(res, dy)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(res) * np.asarray(dy))
    np.testing.assert_array_equal(np.asarray(b), np.asarray(dy))
