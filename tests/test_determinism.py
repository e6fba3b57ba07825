"""Bitwise reproducibility: the row partition is fixed by the shape, so the
thread count, the run and the kernel's ISA variant never change a bit."""

from __future__ import annotations

import json

import pytest
from conftest import run_python

from jax_lngb import _native

# Computes results for a few shapes/dtypes and prints a digest of their bits.
PROBE = r"""
import os, sys, json, hashlib
if os.environ.get("PIN_ONE_CPU"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
import numpy as np, jax, jax.numpy as jnp
import jax_lngb
rng = np.random.default_rng(7)
out = {"isa": jax_lngb._native.cpu_isa(), "cpus": len(os.sched_getaffinity(0))}
for shape in [(65536, 64), (4096, 768), (16, 70000), (3, 5000, 48)]:
    for dt in ("float32", "float16", "bfloat16"):
        x = rng.standard_normal(shape).astype(np.float32).astype(jnp.dtype(dt))
        y = rng.standard_normal(shape).astype(np.float32).astype(jnp.dtype(dt))
        h = hashlib.sha256()
        for f in (jax.jit(jax_lngb.layer_norm_grad_beta),
                  jax.jit(lambda a, b: jax_lngb.layer_norm_grad_beta(a, b, out_dtype=jnp.float32))):
            for r in f(x, y):
                h.update(np.asarray(r).tobytes())
        if len(shape) == 3:
            for r in jax.jit(jax.vmap(jax_lngb.layer_norm_grad_beta))(x, y):
                h.update(np.asarray(r).tobytes())
        out[f"{shape}-{dt}"] = h.hexdigest()
print(json.dumps(out))
"""


def run_probe(**env) -> dict:
    proc = run_python(PROBE, env={k: str(v) for k, v in env.items()})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def digests(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("isa", "cpus")}


@pytest.fixture(scope="module")
def baseline() -> dict:
    return run_probe()


def test_run_to_run(baseline):
    assert digests(run_probe()) == digests(baseline)


def test_one_thread_via_env(baseline):
    assert digests(run_probe(JAX_LNGB_NUM_THREADS=1)) == digests(baseline)


def test_one_cpu_via_affinity(baseline):
    # XLA sizes its intra-op pool from the CPUs the process may use.
    pinned = run_probe(PIN_ONE_CPU=1, XLA_FLAGS="--xla_cpu_multi_thread_eigen=false")
    assert pinned["cpus"] == 1
    assert digests(pinned) == digests(baseline)


@pytest.mark.parametrize("isa", ["generic", "avx2"])
def test_every_isa_variant_gives_the_same_bits(baseline, isa):
    order = ["generic", "avx2", "avx512"]
    if order.index(_native._cpu.supported_isa()) < order.index(isa):
        pytest.skip(f"this CPU does not support the {isa} variant")
    forced = run_probe(JAX_LNGB_ISA=isa)
    assert forced["isa"] == isa
    assert digests(forced) == digests(baseline)
