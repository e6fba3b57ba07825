"""Bitwise reproducibility: the row partition is fixed by the shape, so the
thread count, the run, the kernel's ISA variant, eager vs jit, and vmap vs a
loop over the mapped elements never change a bit.

Subprocess probes vary what only a fresh process can (XLA's CPU threading,
CPU affinity, the forced ISA variant); everything else runs in-process.
To cover a new primitive, add its calls to PROBE's CASES (subprocess) and
to IN_PROCESS below.

The LayerNorm primitives (forward, LayerNormGrad, the fused and chained
backward) have their subprocess probe in test_layer_norm_determinism.py
(runs, thread counts, affinity, ISA variants); the in-process checks (eager
vs jit, vmap vs per element) are at the end of this file.
"""

from __future__ import annotations

import functools
import json
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DTYPE_IDS, DTYPES, random_array, run_python

from jax_lngb import layer_norm, layer_norm_forward_p, layer_norm_grad, layer_norm_grad_beta
from jax_lngb._core import native as _native

# Computes results for a few shapes/dtypes and prints a digest of their bits.
# Every branch of the partition appears: many row blocks, column chunks
# (H >> rows), several blocks per group, bundles of tiny groups, fewer rows
# than one block's minimum.
PROBE = r"""
import os, sys, json, hashlib
if os.environ.get("PIN_ONE_CPU"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
import numpy as np, jax, jax.numpy as jnp
import jax_lngb
rng = np.random.default_rng(7)
out = {"isa": jax_lngb._core.native.cpu_isa(), "cpus": len(os.sched_getaffinity(0))}
f32_out = lambda a, b: jax_lngb.layer_norm_grad_beta(a, b, out_dtype=jnp.float32)
CASES = [
    # (shape, vmapped leading axes)
    ((65536, 64), 0), ((4096, 768), 0), ((16, 70000), 0), ((3, 5000, 48), 1),
    ((2000, 3, 40), 1), ((5, 7), 0), ((2, 3, 300, 96), 2),
]
def canonical_nan(a):
    a = np.asarray(a, np.float32).copy()
    a[np.isnan(a)] = np.nan
    return a
for shape, vmaps in CASES:
    for dt in ("float32", "float16", "bfloat16"):
        x = rng.standard_normal(shape).astype(np.float32).astype(jnp.dtype(dt))
        y = rng.standard_normal(shape).astype(np.float32).astype(jnp.dtype(dt))
        h = hashlib.sha256()
        fns = [jax_lngb.layer_norm_grad_beta, f32_out]
        for f in fns:
            for _ in range(vmaps):
                f = jax.vmap(f)
            for r in jax.jit(f)(x, y):
                h.update(np.asarray(r).tobytes())
        out[f"{shape}-{dt}"] = h.hexdigest()
# The fused residual add + LayerNorm / RMSNorm: forward and VJP (y, h, the
# input and parameter gradients), same dtypes and a float32 residual stream
# under bfloat16 activations; short rows (16-row groups), a partial last
# block, long rows (two-row backward tiles), several row blocks.
def add_norm_step(fn, n_params):
    def step(x, r, ps, dy, dh):
        yh, vjp = jax.vjp(lambda x, r, *ps: fn(x, r, *ps), x, r, *ps)
        return (*yh, *vjp((dy, dh)))
    return jax.jit(step)
ADD_NORMS = {
    "add_layer_norm": (add_norm_step(lambda x, r, g, b: jax_lngb.add_layer_norm(x, r, g, b, epsilon=1e-5), 2), 2),
    "add_rms_norm": (add_norm_step(lambda x, r, g: jax_lngb.add_rms_norm(x, r, g, epsilon=1e-6), 1), 1),
    "add_layer_norm_zc": (add_norm_step(
        lambda x, r, g: jax_lngb.add_layer_norm(x, r, g, epsilon=1e-5, zero_centered_gamma=True), 1), 1),
}
for shape in ((4096, 768), (3, 700, 100), (16, 20000)):
    for dt, rdt in (("float32", "float32"), ("bfloat16", "bfloat16"), ("bfloat16", "float32")):
        x, dy = (rng.standard_normal(shape).astype(np.float32).astype(jnp.dtype(dt)) for _ in range(2))
        r, dh = (rng.standard_normal(shape).astype(np.float32).astype(jnp.dtype(rdt)) for _ in range(2))
        gb = [rng.standard_normal(shape[-1]).astype(np.float32) for _ in range(2)]
        for name, (f, n_params) in ADD_NORMS.items():
            h = hashlib.sha256()
            for a in f(x, r, gb[:n_params], dy, dh):
                h.update(np.asarray(a).tobytes())
            out[f"{name}-{shape}-{dt}-{rdt}"] = h.hexdigest()
# NaN and Inf inputs, NaN in both operands of a product with opposite signs
# included. "raw" hashes the NaN bits as computed, "canonical" only where
# the NaNs are.
for dt in ("float32", "float16", "bfloat16"):
    x = rng.standard_normal((3000, 40)).astype(np.float32)
    y = rng.standard_normal((3000, 40)).astype(np.float32)
    x[5, :10], y[5, :10] = np.nan, -np.nan
    x[7, 10:20], y[9, 20:30], y[11, 30:35], y[2999, 30:35] = np.nan, np.inf, np.inf, -np.inf
    x, y = x.astype(jnp.dtype(dt)), y.astype(jnp.dtype(dt))
    raw, canon = hashlib.sha256(), hashlib.sha256()
    for r in jax.jit(f32_out)(x, y):
        raw.update(np.asarray(r).tobytes())
        canon.update(canonical_nan(r).tobytes())
    out[f"nan-raw-{dt}"] = raw.hexdigest()
    out[f"nan-canonical-{dt}"] = canon.hexdigest()
print(json.dumps(out))
"""


def run_probe(**env) -> dict:
    proc = run_python(PROBE, env={k: str(v) for k, v in env.items()})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@functools.cache
def _probe_cached(env: tuple) -> str:
    return json.dumps(run_probe(**dict(env)))


def probe(**env) -> dict:
    """run_probe, run once per environment per session (run-to-run
    comparisons call run_probe itself)."""
    return json.loads(_probe_cached(tuple(sorted(env.items()))))


def digests(d: dict, raw_nan: bool = True) -> dict:
    return {k: v for k, v in d.items() if k not in ("isa", "cpus") and (raw_nan or not k.startswith("nan-raw"))}


@pytest.fixture(scope="module")
def baseline() -> dict:
    return probe()


ISA_ORDER = ["generic", "avx2", "avx512"]


def skip_unless_supported(isa: str) -> None:
    if ISA_ORDER.index(_native._cpu.supported_isa()) < ISA_ORDER.index(isa):
        pytest.skip(f"this CPU does not support the {isa} variant (supports {_native._cpu.supported_isa()})")


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
    skip_unless_supported(isa)
    forced = probe(JAX_LNGB_ISA=isa)
    assert forced["isa"] == isa
    assert digests(forced, raw_nan=False) == digests(baseline, raw_nan=False)


# When both factors of a product are NaN, which NaN comes out depends on the
# operand order each ISA variant's compiler picked; the kernels store one
# canonical quiet NaN, so even the raw NaN bits agree.
def test_nan_bits_are_the_same_on_every_isa_variant():
    skip_unless_supported("avx2")
    generic, avx2 = probe(JAX_LNGB_ISA="generic"), probe(JAX_LNGB_ISA="avx2")
    raw = {k: v for k, v in digests(generic).items() if k.startswith("nan-raw")}
    assert raw == {k: v for k, v in digests(avx2).items() if k.startswith("nan-raw")}


# ------------------------------------------------------------ in-process


def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view({4: np.uint32, 2: np.uint16}[a.dtype.itemsize])


def assert_bitwise(a, b, what=""):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape, what
        np.testing.assert_array_equal(bits(x), bits(y), err_msg=what)


SHAPES = [(5000, 96), (16, 70000), (3, 2500, 40), (7,), (0, 9)]
OUT_DTYPES = [None, jnp.float32, jnp.bfloat16]


@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=["same", "f32", "bf16"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_eager_jit_disable_jit_and_fused_agree(shape, dtype, out_dtype, rng):
    res = random_array(rng, shape, dtype)
    dy = random_array(rng, shape, dtype)
    f = functools.partial(layer_norm_grad_beta, out_dtype=out_dtype)
    eager = f(res, dy)
    jitted = jax.jit(f)(res, dy)
    with jax.disable_jit():
        nojit = f(res, dy)
    # Inside a bigger jitted computation (XLA fuses around the custom call);
    # x * 1 and x - 0 are exact.
    fused = jax.jit(lambda r, d: f(r * jnp.asarray(1, r.dtype), d - jnp.asarray(0, d.dtype)))(res, dy)
    assert_bitwise(eager, jitted, "eager vs jit")
    assert_bitwise(eager, nojit, "eager vs disable_jit")
    assert_bitwise(eager, fused, "eager vs fused jit")


# (res shape, dy shape, in_axes) for vmap; nested entries map twice.
VMAP_CASES = [
    ((6, 3000, 40), (6, 3000, 40), (0, 0)),
    ((3000, 6, 40), (6, 3000, 40), (1, 0)),
    ((300, 40, 6), (300, 40, 6), (-1, -1)),
    ((300, 40), (5, 300, 40), (None, 0)),
    ((2000, 3, 40), (2000, 3, 40), (1, 1)),
]


def per_element(x, axis, i):
    return x if axis is None else np.take(x, i, axis=axis)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("res_shape,dy_shape,in_axes", VMAP_CASES)
def test_vmapped_equals_unbatched_per_element(res_shape, dy_shape, in_axes, dtype, rng):
    res = random_array(rng, res_shape, dtype)
    dy = random_array(rng, dy_shape, dtype)
    for out_dtype in (None, jnp.float32):
        f = functools.partial(layer_norm_grad_beta, out_dtype=out_dtype)
        g, b = jax.jit(jax.vmap(f, in_axes=in_axes))(res, dy)
        size = next(s[a] for s, a in zip((res_shape, dy_shape), in_axes) if a is not None)
        for i in range(size):
            one = jax.jit(f)(per_element(res, in_axes[0], i), per_element(dy, in_axes[1], i))
            assert_bitwise((g[i], b[i]), one, f"element {i}")


def test_nested_vmap_equals_unbatched(rng):
    res = random_array(rng, (3, 4, 500, 24), jnp.bfloat16)
    dy = random_array(rng, (4, 3, 500, 24), jnp.bfloat16)
    g, b = jax.jit(jax.vmap(jax.vmap(layer_norm_grad_beta), in_axes=(1, 0)))(res, dy)
    for i in range(4):
        for j in range(3):
            assert_bitwise((g[i, j], b[i, j]), layer_norm_grad_beta(res[j, i], dy[i, j]), f"({i}, {j})")


def test_interleaved_shapes_reuse_scratch_safely(rng):
    # The kernel keeps a per-thread scratch buffer across calls: growing it,
    # shrinking the problem and growing again must not leak old partials.
    shapes = [(8192, 256), (3, 5), (64, 70001), (8192, 256), (1, 1), (64, 70001), (3, 5)]
    data = {s: (random_array(rng, s, jnp.float32), random_array(rng, s, jnp.float32)) for s in set(shapes)}
    first = {}
    f = jax.jit(layer_norm_grad_beta)
    for s in shapes:
        out = f(*data[s])
        if s in first:
            assert_bitwise(out, first[s], f"{s} again")
        else:
            first[s] = out


def test_concurrent_callers_get_identical_bits(rng):
    # Several Python threads run the compiled kernel at the same time (XLA
    # then runs them concurrently on its pool).
    res = random_array(rng, (6000, 128), jnp.bfloat16)
    dy = random_array(rng, (6000, 128), jnp.bfloat16)
    f = jax.jit(functools.partial(layer_norm_grad_beta, out_dtype=jnp.float32))
    want = f(res, dy)
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(jax.block_until_ready(f(res, dy)))
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 20
    for r in results:
        assert_bitwise(r, want, "concurrent call")


def test_layer_norm_gradients_run_to_run(rng):
    # The whole custom VJP, jitted, twice in one process: same bits.
    x = jnp.asarray(random_array(rng, (512, 96), jnp.bfloat16))
    gamma, beta = jnp.ones(96, jnp.float32), jnp.zeros(96, jnp.float32)
    w = jnp.asarray(rng.standard_normal((512, 96)).astype(np.float32))
    loss = lambda x, g, b: jnp.sum(layer_norm(x, g, b).astype(jnp.float32) * w)
    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    assert_bitwise(grad(x, gamma, beta), grad(x, gamma, beta), "layer_norm grads")


# ------------------------------------------------- LayerNorm, in-process


def layer_norm_vjp(backward: str):
    """(y, dx, dgamma, dbeta) of layer_norm for the cotangent dy."""

    def f(x, gamma, beta, dy):
        y, pullback = jax.vjp(lambda *a: layer_norm(*a, backward=backward), x, gamma, beta)
        return (y, *pullback(dy))

    return f


def forward_stats(x, gamma, beta):
    """y and the float32 statistics the forward kernel returns."""
    return layer_norm_forward_p.bind(x, gamma, beta, epsilon=1e-5, batch_dims=0, backward="fused")


# name -> (function, the operands it takes)
LN_FUNCTIONS = {
    "forward": (forward_stats, ("x", "gamma", "beta")),
    "grad": (layer_norm_grad, ("dy", "x", "variance", "mean", "gamma")),
    "vjp-fused": (layer_norm_vjp("fused"), ("x", "gamma", "beta", "dy")),
    "vjp-chained": (layer_norm_vjp("chained"), ("x", "gamma", "beta", "dy")),
}


def layer_norm_operands(rng, shape, dtype, param_dtype=jnp.float32) -> dict:
    h = shape[-1]
    x = random_array(rng, shape, dtype, scale=3.0)
    ops = {
        "x": x,
        "dy": random_array(rng, shape, dtype),
        "gamma": (1 + 0.1 * rng.standard_normal(h)).astype(np.float32).astype(param_dtype),
        "beta": (0.1 * rng.standard_normal(h)).astype(np.float32).astype(param_dtype),
    }
    _, ops["mean"], ops["variance"] = jax.jit(forward_stats)(x, ops["gamma"], ops["beta"])
    return ops


# Several row blocks, one long row per block, a vmapped-like 3-d shape with
# an odd H, rank 1, no rows.
LN_SHAPES = [(3000, 96), (4, 20000), (3, 700, 33), (7,), (0, 9)]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", LN_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_layer_norm_eager_jit_disable_jit_and_fused_agree(shape, dtype, rng):
    ops = layer_norm_operands(rng, shape, dtype, param_dtype=dtype)
    for name, (f, names) in LN_FUNCTIONS.items():
        args = [ops[n] for n in names]
        eager = f(*args)
        jitted = jax.jit(f)(*args)
        with jax.disable_jit():
            nojit = f(*args)
        # Inside a bigger jitted computation; a * 1 is exact.
        fused = jax.jit(lambda *a, f=f: f(*(v * jnp.asarray(1, v.dtype) for v in a)))(*args)
        assert_bitwise(eager, jitted, f"{name}: eager vs jit")
        assert_bitwise(eager, nojit, f"{name}: eager vs disable_jit")
        assert_bitwise(eager, fused, f"{name}: eager vs fused jit")


# (function, per-example shape, in_axes): None leaves an operand unbatched
# (the same for every element), an int maps that axis of it.
LN_VMAP_CASES = [
    ("forward", (500, 40), (0, 0, 0)),
    ("forward", (500, 40), (-1, None, 0)),
    ("grad", (300, 33), (0, 0, 0, 0, 0)),
    ("grad", (300, 33), (None, 1, 1, 1, None)),
    ("vjp-fused", (400, 48), (0, 0, 0, 0)),
    ("vjp-fused", (400, 48), (1, None, None, 1)),
    ("vjp-fused", (2, 200, 48), (0, None, 0, 2)),
    ("vjp-chained", (400, 48), (0, None, 0, 0)),
    ("vjp-chained", (400, 48), (2, 0, None, 2)),
]


def stack(examples: list[np.ndarray], axis) -> np.ndarray:
    """The per-example arrays stacked along `axis` (None: the first one,
    unbatched)."""
    return examples[0] if axis is None else np.stack(examples, axis=axis)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("fn,shape,in_axes", LN_VMAP_CASES, ids=lambda v: str(v).replace(" ", ""))
def test_layer_norm_vmapped_equals_unbatched_per_element(fn, shape, in_axes, dtype, rng):
    f, names = LN_FUNCTIONS[fn]
    size = 5
    per = [layer_norm_operands(rng, shape, dtype, param_dtype=dtype) for _ in range(size)]
    args = [stack([p[n] for p in per], ax) for n, ax in zip(names, in_axes, strict=True)]
    batched = jax.jit(jax.vmap(f, in_axes=in_axes))(*args)
    one = jax.jit(f)
    for i in range(size):
        # An unbatched operand is the first example's for every element.
        want = one(*[per[i if ax is not None else 0][n] for n, ax in zip(names, in_axes)])
        assert_bitwise([b[i] for b in batched], want, f"{fn} element {i}")


def test_layer_norm_nested_vmap_equals_unbatched(rng):
    f = layer_norm_vjp("fused")
    per = [[layer_norm_operands(rng, (150, 24), jnp.bfloat16) for _ in range(3)] for _ in range(2)]
    args = [np.stack([np.stack([p[n] for p in row]) for row in per]) for n in ("x", "gamma", "beta", "dy")]
    batched = jax.jit(jax.vmap(jax.vmap(f)))(*args)
    for i in range(2):
        for j in range(3):
            want = jax.jit(f)(*[per[i][j][n] for n in ("x", "gamma", "beta", "dy")])
            assert_bitwise([b[i, j] for b in batched], want, f"({i}, {j})")
