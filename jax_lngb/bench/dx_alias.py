"""`python -m jax_lngb.bench.dx_alias`: would letting the fused backward write
dx into dy's buffer (``input_output_aliases={0: 0}`` on its custom call)
save a plain-jit training step a fresh [rows, H] buffer?

It swaps the CPU lowering of ``layer_norm_backward_local_p`` for one with
the alias, checks that dx is unchanged bit for bit, and for three steps
compares the compiled HLO (copies XLA inserts, the temp allocation) and
the time of a plain-jit call with and without the alias:

* ``dy_param``: dy is an argument the caller keeps (the benchmark's step):
  dy is live after the backward.
* ``dy_internal``: dy is computed inside the step (``2 * t``) and dead after
  the backward, as an upstream layer's gradient is.
* ``dy_donated``: dy is an argument donated to the step.

An experiment, not part of the package's behaviour: the lowering is swapped
only in this process.

    python -m jax_lngb.bench.dx_alias --shape 65536x768 --reps 7
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from typing import Any

import numpy as np


def _aliased_lowering():
    import jax
    import jax.numpy as jnp
    from jax.interpreters import mlir

    from jax_lngb._ops.layer_norm import backward
    from jax_lngb._ops.primitives import LAYER_NORM_BACKWARD_TARGET

    def call(*args, epsilon, **params):
        args = [a.astype(jnp.float32) if i in (2, 3, 4) else a for i, a in enumerate(args)]
        outs = backward._result_avals(*args, **params)
        return jax.ffi.ffi_call(LAYER_NORM_BACKWARD_TARGET, outs, input_output_aliases={0: 0})(
            *args, epsilon=np.float32(epsilon)
        )

    return mlir.lower_fun(call, multiple_results=True)


def _use(aliased: bool) -> None:
    from jax.interpreters import mlir

    from jax_lngb._core.ffi_call import cpu_lowering
    from jax_lngb._ops.layer_norm import backward
    from jax_lngb._ops.primitives import LAYER_NORM_BACKWARD_TARGET, layer_norm_backward_local_p

    rule = (
        _aliased_lowering()
        if aliased
        else cpu_lowering(LAYER_NORM_BACKWARD_TARGET, backward._result_avals, float32_operands=(2, 3, 4))
    )
    mlir.register_lowering(layer_norm_backward_local_p, rule, platform="cpu")


def _steps():
    import jax

    from jax_lngb import layer_norm

    def dy_param(x, g, b, dy):
        y, f = jax.vjp(layer_norm, x, g, b)
        return (y, *f(dy))

    def dy_internal(x, g, b, t):
        y, f = jax.vjp(layer_norm, x, g, b)
        return (y, *f(2 * t))

    return {
        "dy_param": (jax.jit(dy_param), False),
        "dy_internal": (jax.jit(dy_internal), False),
        "dy_donated": (jax.jit(dy_param, donate_argnums=3), True),
    }


def _hlo_facts(compiled) -> dict[str, Any]:
    text = compiled.as_text()
    copies = [ln.strip() for ln in text.splitlines() if re.search(r"=\s*\S+\s+copy(-start)?\(", ln)]
    facts: dict[str, Any] = {"copies": len(copies), "copy_lines": copies[:4]}
    try:
        m = compiled.memory_analysis()
        facts.update(
            temp_bytes=int(m.temp_size_in_bytes),
            output_bytes=int(m.output_size_in_bytes),
            alias_bytes=int(m.alias_size_in_bytes),
        )
    except Exception as e:
        facts["memory_analysis"] = f"unavailable: {e}"
    facts["custom_call_aliases"] = "output_to_operand_aliasing" in text
    return facts


def run(shape, reps: int, warmup: int) -> dict[str, Any]:
    """Compiles and checks every step both ways, restores the package's
    lowering, then times the steps that ran."""
    import jax.numpy as jnp

    import jax_lngb

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(shape, dtype=np.float32))
    t = jnp.asarray(rng.standard_normal(shape, dtype=np.float32))
    g = jnp.asarray((1 + 0.1 * rng.standard_normal(shape[-1])).astype(np.float32))
    b = jnp.asarray((0.1 * rng.standard_normal(shape[-1])).astype(np.float32))
    out: dict[str, Any] = {"shape": list(shape), "retain_host_memory": jax_lngb.host_memory.is_enabled(), "steps": {}}
    ref: dict[str, bytes] = {}
    try:
        variants = _compile_all(x, g, b, t, out, ref)
    finally:
        _use(False)  # the package's own lowering again
    return _time_all(variants, x, g, b, out, reps, warmup)


def _compile_all(x, g, b, t, out, ref):
    import jax
    import jax.numpy as jnp

    variants = {}
    for aliased in (False, True):
        _use(aliased)
        steps = _steps()
        for name, (fn, donated) in steps.items():
            # A donated dy is consumed: each call gets a fresh copy.
            arg = (lambda: jnp.array(t, copy=True)) if donated else (lambda: t)
            compiled = fn.lower(x, g, b, t).compile()
            facts = _hlo_facts(compiled)
            try:
                res = jax.block_until_ready(fn(x, g, b, arg()))
            except Exception as e:
                facts["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                out["steps"].setdefault(name, {})["aliased" if aliased else "plain"] = facts
                continue
            digest = b"".join(np.asarray(r).tobytes() for r in res)
            del res
            # Every output of the aliased lowering against the plain one.
            if aliased:
                out.setdefault("bitwise_equal", {})[name] = digest == ref[name]
            else:
                ref[name] = digest
            variants[(name, aliased)] = (fn, arg, facts)
    return variants


def _time_all(variants, x, g, b, out, reps: int, warmup: int):
    """Times the variants that ran (already compiled), in alternating rounds."""
    import resource

    import jax

    times: dict[tuple, list[float]] = {k: [] for k in variants}
    faults: dict[tuple, list[int]] = {k: [] for k in variants}
    for fn, arg, _ in variants.values():
        for _ in range(warmup):
            jax.block_until_ready(fn(x, g, b, arg()))
    for _ in range(reps):
        for k, (fn, arg, _) in variants.items():
            a = arg()
            jax.block_until_ready(a)
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            jax.block_until_ready(fn(x, g, b, a))
            times[k].append((time.perf_counter() - t0) * 1e3)
            faults[k].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
            del a
    for (name, aliased), (_, _, facts) in variants.items():
        out["steps"].setdefault(name, {})["aliased" if aliased else "plain"] = {
            **facts,
            "ms": statistics.median(times[(name, aliased)]),
            "times_ms": times[(name, aliased)],
            "faults_per_call": statistics.median(faults[(name, aliased)]),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    from .common import parse_shape

    p = argparse.ArgumentParser(prog="python -m jax_lngb.bench.dx_alias")
    p.add_argument("--shape", type=parse_shape, default=(65536, 768))
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    res = run(args.shape, args.reps, args.warmup)
    print(
        f"shape {res['shape']} float32, retain_host_memory {'on' if res['retain_host_memory'] else 'off'}; "
        f"outputs with the alias bitwise equal to without: {res.get('bitwise_equal')}"
    )
    print("| step | lowering | copies in HLO | temp MiB | ms (median) | faults/call |")
    print("|---|---|---|---|---|---|")
    for name, by in res["steps"].items():
        for kind in ("plain", "aliased"):
            f = by[kind]
            temp = f.get("temp_bytes")
            ran = f"{f['ms']:.1f} | {f['faults_per_call']:.0f}" if "ms" in f else f"not run: {f['error']} | -"
            print(f"| {name} | {kind} | {f['copies']} | {'-' if temp is None else f'{temp / 2**20:.0f}'} | {ran} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
