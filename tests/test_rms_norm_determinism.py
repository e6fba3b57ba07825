"""Bitwise reproducibility of the RMSNorm kernels (forward, the chained
backward's rows, the fused backward): the row blocks are fixed by the
shape and every sum over a row has the same 16-lane association on every
ISA, so neither the thread count, nor the run, nor the kernel's ISA variant
changes a bit."""

from __future__ import annotations

import json

import pytest
from conftest import run_python

from jax_lngb._core import native as _native

PROBE = r"""
import json, hashlib
import numpy as np, jax, jax.numpy as jnp
import jax_lngb
from jax_lngb import rms_norm
rng = np.random.default_rng(13)
out = {"isa": jax_lngb._core.native.cpu_isa()}

def vjp(mode):
    def f(x, g, dy):
        y, back = jax.vjp(lambda *a: rms_norm(*a, backward=mode), x, g)
        return (y,) + tuple(back(dy))
    return jax.jit(f)

fused, chained = vjp("fused"), vjp("chained")
stats = jax.jit(lambda x, g: jax_lngb.rms_norm_forward_p.bind(x, g, epsilon=1e-6, batch_dims=0, backward="fused"))
per_example = jax.jit(jax.vmap(jax.grad(lambda x, g: jnp.sum(jnp.sin(rms_norm(x, g).astype(jnp.float32))), argnums=(0, 1)), in_axes=(0, None)))
# Many row blocks, short rows (16 at a time), a tail, long rows in tiles of two, groups.
for shape in [(8192, 768), (1000, 33), (6, 70001), (3, 700, 48)]:
    for dt in ("float32", "float16", "bfloat16"):
        d = jnp.dtype(dt)
        x = (rng.standard_normal(shape).astype(np.float32) * 3).astype(d)
        dy = rng.standard_normal(shape).astype(np.float32).astype(d)
        g = (1 + 0.1 * rng.standard_normal(shape[-1])).astype(np.float32)
        h = hashlib.sha256()
        results = list(fused(x, g, dy)) + list(chained(x, g, dy)) + list(stats(x, g))
        if len(shape) == 3:
            results += list(per_example(x, g))
        for r in results:
            h.update(np.asarray(r).tobytes())
        out[f"{shape}-{dt}"] = h.hexdigest()
print(json.dumps(out))
"""


def run_probe(**env) -> dict:
    proc = run_python(PROBE, env={k: str(v) for k, v in env.items()})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def digests(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "isa"}


@pytest.fixture(scope="module")
def baseline() -> dict:
    return run_probe()


def test_one_thread(baseline):
    assert digests(run_probe(JAX_LNGB_NUM_THREADS=1)) == digests(baseline)


@pytest.mark.parametrize("isa", ["generic", "avx2"])
def test_every_isa_variant_gives_the_same_bits(baseline, isa):
    order = ["generic", "avx2", "avx512"]
    if order.index(_native._cpu.supported_isa()) < order.index(isa):
        pytest.skip(f"this CPU does not support the {isa} variant")
    forced = run_probe(JAX_LNGB_ISA=isa)
    assert forced["isa"] == isa
    assert digests(forced) == digests(baseline)
