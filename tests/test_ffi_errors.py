"""The FFI handlers re-check what they rely on: a custom call bound with
inconsistent buffers (which the primitives' abstract evaluation never
produces, but a hand-written `jax.ffi.ffi_call` or a stale exported module
can) fails with a JaxRuntimeError that says what is wrong, never an abort,
and the process keeps working afterwards.

CASES holds inconsistent calls (target, operands, results, message pattern);
VALID holds consistent calls the primitives never make but the handler must
accept. When a new handler lands, add its rows to both (a helper like gb()
per target keeps them short); test_consistent_direct_calls_... then needs
that target's NumPy meaning.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import enable_x64
from jax_lngb import layer_norm_grad_beta
from jax_lngb.grad_beta import FFI_TARGET as GRAD_BETA

F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32
S = jax.ShapeDtypeStruct


@dataclasses.dataclass(frozen=True)
class Call:
    target: str
    operands: tuple[S, ...]
    results: tuple[S, ...]
    pattern: str = ""  # empty: a consistent call that must succeed


def gb(ins, outs, pattern=""):
    """A grad_beta call: ins/outs are ((shape, dtype), ...)."""
    return Call(GRAD_BETA, tuple(S(s, d) for s, d in ins), tuple(S(s, d) for s, d in outs), pattern)


A = ((4, 8), F32)
OUT = ((8,), F32)

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
    "result-rank-too-big": gb([((8,), F32), ((8,), F32)], [((1, 8), F32), ((1, 8), F32)], r"output rank must be between 1"),
    "result-not-H": gb([A, A], [((7,), F32), ((7,), F32)], r"jax_lngb: output shape \[7\] does not end in H = 8"),
    "result-batch-not-leading": gb(
        [((3, 4, 8), F32)] * 2, [((4, 8), F32)] * 2, r"output batch dims \[4, 8\] do not lead the input shape \[3, 4, 8\]"
    ),
    # arity (checked by XLA's FFI binding before the handler runs)
    "one-operand": Call(GRAD_BETA, (S(*A),), (S(*OUT), S(*OUT)), r"Wrong number of arguments: expected 2 but got 1"),
    "three-operands": Call(GRAD_BETA, (S(*A),) * 3, (S(*OUT), S(*OUT)), r"Wrong number of arguments: expected 2 but got 3"),
    "one-result": Call(GRAD_BETA, (S(*A),) * 2, (S(*OUT),), r"Wrong number of results: expected 2 but got 1"),
    "three-results": Call(GRAD_BETA, (S(*A),) * 2, (S(*OUT),) * 3, r"Wrong number of results: expected 2 but got 3"),
}

# Consistent calls the primitive never makes but the handler accepts, each
# with its meaning (checked against NumPy below).
VALID: dict[str, Call] = {
    "plain": gb([A, A], [OUT, OUT]),
    "bf16-to-f16": gb([((4, 8), BF16)] * 2, [((8,), F16)] * 2),
    "zero-rows": gb([((0, 8), F16)] * 2, [((8,), F32)] * 2),
    "one-group": gb([((3, 4, 8), F32)] * 2, [((3, 8), F32)] * 2),
    "every-row-a-group": gb([A, A], [A, A]),
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
    return jax.jit(lambda *a: jax.ffi.ffi_call(call.target, call.results)(*a))(*args)


@pytest.mark.parametrize("call", CASES.values(), ids=CASES.keys())
def test_inconsistent_buffers_give_a_clear_runtime_error(call, rng):
    with pytest.raises(jax.errors.JaxRuntimeError, match=call.pattern):
        jax.block_until_ready(run(call, operands(call, rng)))
    # The handler returned an error (no abort): the process still computes.
    x = jnp.arange(64, dtype=F32).reshape(1, 8, 8)
    np.testing.assert_array_equal(layer_norm_grad_beta(x, x)[1], [224, 232, 240, 248, 256, 264, 272, 280])


def test_float64_operands_are_refused_by_the_handler(rng):
    with enable_x64():
        call = gb([((4, 8), jnp.float64)] * 2, [((8,), jnp.float64)] * 2)
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"jax_lngb: unsupported input dtype"):
            jax.block_until_ready(run(call, operands(call, rng)))


@pytest.mark.parametrize("call", VALID.values(), ids=VALID.keys())
def test_consistent_direct_calls_compute_the_documented_sums(call, rng):
    args = operands(call, rng)
    g, b = run(call, args)
    res, dy = (np.asarray(a, np.float64) for a in args)
    groups = call.results[0].shape[:-1]
    h = res.shape[-1]
    r = res.reshape(*groups, -1, h)
    d = dy.reshape(*groups, -1, h)
    np.testing.assert_allclose(np.asarray(g, np.float64), (r * d).sum(-2), rtol=2e-2, atol=1e-2)
    np.testing.assert_allclose(np.asarray(b, np.float64), d.sum(-2), rtol=2e-2, atol=1e-2)
    assert g.dtype == call.results[0].dtype


def test_outputs_aliasing_the_inputs(rng):
    # Results written over the operands' buffers: every input is read before
    # any result is stored.
    res = jnp.asarray(rng.standard_normal((4, 8)).astype(np.float32))
    dy = jnp.asarray(rng.standard_normal((4, 8)).astype(np.float32))
    call = jax.ffi.ffi_call(GRAD_BETA, (S((4, 8), F32), S((4, 8), F32)), input_output_aliases={0: 0, 1: 1})
    g, b = jax.jit(call)(res, dy)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(res) * np.asarray(dy))
    np.testing.assert_array_equal(np.asarray(b), np.asarray(dy))
