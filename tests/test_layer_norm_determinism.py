"""Bitwise reproducibility of the LayerNorm kernels (forward, LayerNormGrad,
fused backward): the row blocks are fixed by the shape and every sum over
a row has the same 16-lane association on every ISA, so neither the thread
count, nor the run, nor the kernel's ISA variant changes a bit."""

from __future__ import annotations

import json

import pytest
from conftest import run_python

from jax_lngb._core import native as _native

# Runs every LayerNorm kernel on a few shapes/dtypes; prints digests.
PROBE = r"""
import os, json, hashlib
if os.environ.get("PIN_ONE_CPU"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
import numpy as np, jax, jax.numpy as jnp
import jax_lngb
from jax_lngb import layer_norm, layer_norm_grad
rng = np.random.default_rng(11)
out = {"isa": jax_lngb._core.native.cpu_isa(), "cpus": len(os.sched_getaffinity(0))}

def vjp(mode):
    def f(x, g, b, dy):
        y, back = jax.vjp(lambda *a: layer_norm(*a, backward=mode), x, g, b)
        return (y,) + tuple(back(dy))
    return jax.jit(f)

fused, chained = vjp("fused"), vjp("chained")
stats = jax.jit(lambda x, g, b: jax_lngb.layer_norm_forward_p.bind(x, g, b, epsilon=1e-5, batch_dims=0, backward="fused"))
grad = jax.jit(layer_norm_grad)
per_example = jax.jit(jax.vmap(jax.grad(lambda x, g, b: jnp.sum(jnp.sin(layer_norm(x, g, b).astype(jnp.float32))), argnums=(0, 1, 2)), in_axes=(0, None, None)))
# (shape, scale of gamma and beta, scale of dy): 1e-5 makes float16 y or dx subnormal.
cases = [((8192, 768), 1, 1), ((1000, 33), 1, 1), ((16, 70001), 1, 1), ((3, 2000, 48), 1, 1), ((512, 100), 1e-5, 1), ((512, 100), 1, 1e-5)]
for shape, scale, dy_scale in cases:
    h = shape[-1]
    for dt in ("float32", "float16", "bfloat16"):
        d = jnp.dtype(dt)
        x = (rng.standard_normal(shape).astype(np.float32) * 3 + 1).astype(d)
        dy = (rng.standard_normal(shape).astype(np.float32) * dy_scale).astype(d)
        g = ((1 + 0.1 * rng.standard_normal(h)) * scale).astype(np.float32)
        b = (0.1 * rng.standard_normal(h) * scale).astype(np.float32)
        hsh = hashlib.sha256()
        results = list(fused(x, g, b, dy)) + list(chained(x, g, b, dy))
        y, mean, var = stats(x, g, b)
        results += [mean, var] + list(grad(dy, x, var, mean, g))
        if len(shape) == 3:
            results += list(per_example(x, g, b))
        for r in results:
            hsh.update(np.asarray(r).tobytes())
        out[f"{shape}-{scale}-{dy_scale}-{dt}"] = hsh.hexdigest()
# Narrowing edge cases (ties, overflow, NaN payloads) through y = 0 + beta.
u = np.arange(4096, dtype=np.uint32) * np.uint32(1048573) ^ np.uint32(0x7F80FFFF)
beta = u.view(np.float32).copy()
beta[np.abs(beta) < 2.0**-126] = 0.5  # keep float32 subnormals out: XLA's threads flush them
for dt in ("float16", "bfloat16"):
    x = rng.standard_normal((4, beta.size)).astype(np.float32).astype(jnp.dtype(dt))
    y = np.asarray(jax.jit(layer_norm)(x, np.zeros(beta.size, np.float32), beta))
    out[f"narrowing-{dt}"] = hashlib.sha256(y.tobytes()).hexdigest()
print(json.dumps(out))
"""


def run_probe(**env) -> dict:
    proc = run_python(PROBE, env={k: str(v) for k, v in env.items()})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def digests(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("isa", "cpus")}


@pytest.fixture(scope="module")
def baseline() -> dict:
    return run_probe()


def test_run_to_run(baseline):
    assert digests(run_probe()) == digests(baseline)


def test_one_thread(baseline):
    assert digests(run_probe(JAX_LNGB_NUM_THREADS=1)) == digests(baseline)


def test_one_cpu_via_affinity(baseline):
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
