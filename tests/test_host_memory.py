"""jax_lngb.retain_host_memory / JAX_LNGB_RETAIN_HOST_MEMORY: it applies where
glibc's malloc is in charge, declines (warning once) elsewhere, removes the
page faults of a plain-jit step's fresh outputs, changes no result bit, and
keeps threads that allocate large blocks working with bounded RSS.

The opt-in is process-wide, so everything that turns it on runs in a child
interpreter; the unit tests of the decision logic patch the module's state.
Timings are never asserted (the benchmark reports them). Page faults are,
and only in ways that other processes and xdist workers cannot move: with
the opt-in the heap must settle (some calls in a row below a bound that is
a fraction of the step's own pages) within a number of calls, rather than
the last call being clean, and the same criterion must fail on the run
without it."""

from __future__ import annotations

import json
import resource
import warnings

import pytest
from conftest import run_python

from jax_lngb import host_memory

ENV = host_memory.ENV_VAR
GLIBC = host_memory.probe()["applicable"]
needs_glibc = pytest.mark.skipif(
    not GLIBC, reason="the opt-in acts on glibc's malloc only: " + host_memory.probe()["reason"]
)


def _child_json(code: str, env: dict | None = None, timeout: float = 300) -> dict:
    proc = run_python(code, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------ the decision


@pytest.fixture
def fresh_state(monkeypatch):
    monkeypatch.setattr(
        host_memory, "_state", {"enabled": False, "source": None, "reason": "not requested", "warned": False}
    )


def test_env_values(recwarn):
    assert host_memory.requested_by_env({ENV: "1"}) is True
    assert host_memory.requested_by_env({ENV: " On "}) is True
    for off in ("0", "", "false", "no"):
        assert host_memory.requested_by_env({ENV: off}) is False
    assert host_memory.requested_by_env({}) is False
    assert not recwarn.list
    with pytest.warns(RuntimeWarning, match=f"{ENV}='maybe' is not understood"):
        assert host_memory.requested_by_env({ENV: "maybe"}) is False


def test_declines_with_a_preloaded_allocator_and_warns_once(fresh_state, monkeypatch):
    # malloc resolving to another library than glibc: what LD_PRELOAD of
    # jemalloc or tcmalloc gives.
    real = host_memory._object_of
    monkeypatch.setattr(
        host_memory, "_object_of", lambda lib, sym: "/usr/lib/libjemalloc.so.2" if sym == "malloc" else real(lib, sym)
    )
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libjemalloc.so.2")
    if not host_memory.probe()["libc"]:
        pytest.skip("not glibc: covered by test_declines_off_glibc")
    with pytest.warns(RuntimeWarning, match="malloc comes from /usr/lib/libjemalloc.so.2.*LD_PRELOAD"):
        assert host_memory.retain_host_memory() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert host_memory.retain_host_memory() is False  # no second warning
    st = host_memory.status()
    assert st["enabled"] is False and st["settings"] == {} and "jemalloc" in st["reason"]


def test_status_when_off(fresh_state):
    st = host_memory.status()
    assert st["enabled"] is False and st["settings"] == {} and st["source"] is None
    assert host_memory.summary(st).startswith("off (not requested; it would ")


def test_declines_off_glibc(fresh_state, monkeypatch):
    monkeypatch.setattr(host_memory.sys, "platform", "darwin")
    with pytest.warns(RuntimeWarning, match="not Linux"):
        assert host_memory.retain_host_memory() is False
    monkeypatch.setattr(host_memory.sys, "platform", "linux")

    class Musl:  # a libc without glibc's gnu_get_libc_version
        pass

    monkeypatch.setattr(host_memory.ctypes, "CDLL", lambda name: Musl())
    found = host_memory.probe()
    assert found["applicable"] is False and "not glibc" in found["reason"]


@needs_glibc
def test_applies_by_call_and_by_env():
    code = (
        "import json, jax_lngb; from jax_lngb import host_memory as h; before = h.status()['enabled']; "
        "r = [jax_lngb.retain_host_memory(), jax_lngb.retain_host_memory()]; "
        "print(json.dumps({'before': before, 'returns': r, 'status': h.status(), 'line': h.summary()}))"
    )
    got = _child_json(code, env={ENV: "0"})
    assert got["before"] is False and got["returns"] == [True, True]
    st = got["status"]
    assert st["enabled"] is True and st["source"] == "call" and st["settings"] == host_memory.SETTINGS
    assert (
        got["line"].startswith("on (glibc malloc: M_ARENA_MAX=1, M_MMAP_MAX=0")
        and "set by retain_host_memory()" in got["line"]
    )
    # The variable is applied by the import itself.
    got = _child_json("import json, jax_lngb; print(json.dumps(jax_lngb.host_memory.status()))", env={ENV: "1"})
    assert got["enabled"] is True and got["source"] == "env" and got["env"] == "1"


@needs_glibc
def test_preloaded_allocator_in_a_real_process():
    from jax_lngb.bench.allocators import find_library

    lib = find_library("libjemalloc.so.2") or find_library("libtcmalloc_minimal.so.4")
    if lib is None:
        pytest.skip("neither libjemalloc2 nor libtcmalloc-minimal4 is installed (the patched test covers the logic)")
    code = (
        "import json, warnings\nwith warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always'); import jax_lngb; r = jax_lngb.retain_host_memory()\n"
        "print(json.dumps({'r': r, 'warnings': [str(x.message) for x in w]}))"
    )
    got = _child_json(code, env={ENV: "1", "LD_PRELOAD": lib})
    assert got["r"] is False
    assert len(got["warnings"]) == 1 and "LD_PRELOAD" in got["warnings"][0], got


# ------------------------------------------------ what it does to a step

# With the opt-in, glibc's heap grows for a few calls (more when XLA's
# worker threads interleave their allocations differently, as they do on a
# loaded machine), then serves every call from memory already mapped. A
# call counts as clean below 1/CLEAN_FRACTION of the step's pages (the rest
# of the process, and the kernel reclaiming page cache under memory
# pressure, cause a few faults of their own); the heap has settled after
# SETTLED_CALLS clean calls in a row, within MAX_CALLS calls. Without the
# opt-in every call faults in its buffers again, a quarter of the pages or
# more.
CLEAN_FRACTION = 16
SETTLED_CALLS = 3
MAX_CALLS = 24
OFF_CALLS = 6


def settled(per_call: list[int], pages: int) -> bool:
    """Whether SETTLED_CALLS calls in a row each faulted fewer than
    pages // CLEAN_FRACTION pages."""
    bound = pages // CLEAN_FRACTION
    return any(max(per_call[i : i + SETTLED_CALLS]) < bound for i in range(len(per_call) - SETTLED_CALLS + 1))


# A jitted LayerNorm fwd+bwd over 256 MiB of [rows, H] arrays: x and dy in,
# y and dx fresh out, 64 MiB each ([16384, 1024] float32), well above
# glibc's largest mmap threshold (32 MiB). Each step is called until the
# heap settles (at most MAX_CALLS times; OFF_CALLS without the opt-in).
_STEP_CHILD = r"""
import hashlib, json, resource
import numpy as np
import jax, jax.numpy as jnp
import jax_lngb

CLEAN_FRACTION, SETTLED_CALLS = %(clean_fraction)d, %(settled_calls)d
MAX_CALLS = %(max_calls)d if jax_lngb.host_memory.is_enabled() else %(off_calls)d

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def faults_until_settled(call, pages):
    per_call = []
    while len(per_call) < MAX_CALLS:
        f0 = faults()
        jax.block_until_ready(call())  # the outputs die here, as a training step's would
        per_call.append(faults() - f0)
        if len(per_call) >= SETTLED_CALLS and max(per_call[-SETTLED_CALLS:]) < pages // CLEAN_FRACTION:
            break
    return per_call

rng = np.random.default_rng(0)
x = jnp.asarray(rng.standard_normal((16384, 1024), dtype=np.float32))
dy = jnp.asarray(rng.standard_normal((16384, 1024), dtype=np.float32))
g = jnp.asarray(1 + 0.1 * rng.standard_normal(1024).astype(np.float32))
b = jnp.asarray(0.1 * rng.standard_normal(1024).astype(np.float32))

@jax.jit
def step(x, g, b, dy):
    y, f = jax.vjp(jax_lngb.layer_norm, x, g, b)
    return (y, *f(dy))

output_pages = 2 * x.nbytes // resource.getpagesize()
per_call = faults_until_settled(lambda: step(x, g, b, dy), output_pages)
# The digest after the counted calls: hashing copies the outputs, and those
# copies come from the same heap.
out = jax.block_until_ready(step(x, g, b, dy))
digest = hashlib.sha256(b"".join(np.asarray(o).tobytes() for o in out)).hexdigest()
del out
# bfloat16 too, for the bitwise comparison.
xb, dyb = x[:4096].astype(jnp.bfloat16), dy[:4096].astype(jnp.bfloat16)
outb = jax.block_until_ready(step(xb, g, b, dyb))
digest_bf16 = hashlib.sha256(b"".join(np.asarray(o).tobytes() for o in outb)).hexdigest()

# A step with a dot in it: XLA runs such a computation on its worker
# threads, which allocate its buffers there.
w = jnp.eye(1024, dtype=jnp.float32) * 0.5
xd = x[:8192]
grad = jax.jit(jax.grad(lambda w, g, b: jnp.sum(jax_lngb.layer_norm(xd @ w, g, b) ** 2), argnums=(0, 1, 2)))
temp_pages = grad.lower(w, g, b).compile().memory_analysis().temp_size_in_bytes // resource.getpagesize()
dot_faults = faults_until_settled(lambda: grad(w, g, b), temp_pages)
print(json.dumps({"enabled": jax_lngb.host_memory.is_enabled(), "faults": per_call, "sha256": digest,
                  "sha256_bf16": digest_bf16, "output_pages": output_pages,
                  "dot_faults": dot_faults, "dot_temp_pages": temp_pages}))
""" % {"clean_fraction": CLEAN_FRACTION, "settled_calls": SETTLED_CALLS, "max_calls": MAX_CALLS, "off_calls": OFF_CALLS}


@pytest.fixture(scope="module")
def step_runs():
    if not GLIBC:
        pytest.skip("the opt-in acts on glibc's malloc only")
    return {on: _child_json(_STEP_CHILD, env={ENV: "1" if on else "0"}) for on in (False, True)}


def test_page_faults_per_call_drop_to_near_zero(step_runs):
    off, on = step_runs[False], step_runs[True]
    assert off["enabled"] is False and on["enabled"] is True
    pages = off["output_pages"]
    # Without it every call faults in (most of) its fresh outputs again.
    assert len(off["faults"]) == OFF_CALLS and min(off["faults"][2:]) > pages // 2, off
    assert not settled(off["faults"], pages), off
    # With it glibc's heap settles; from then on the outputs land in memory
    # already mapped.
    assert settled(on["faults"], pages), on


def test_buffers_of_xla_worker_threads_too(step_runs):
    # The dot step's buffers come from XLA's worker threads: retained only
    # because the opt-in puts every thread on glibc's main arena.
    off, on = step_runs[False], step_runs[True]
    pages = off["dot_temp_pages"]
    assert pages * 4096 > 64 << 20, off  # above a thread heap's 64 MiB
    assert len(off["dot_faults"]) == OFF_CALLS and min(off["dot_faults"][2:]) > pages // 4, off
    assert not settled(off["dot_faults"], pages), off
    assert settled(on["dot_faults"], pages), on


def test_results_bitwise_identical(step_runs):
    assert step_runs[True]["sha256"] == step_runs[False]["sha256"]
    assert step_runs[True]["sha256_bf16"] == step_runs[False]["sha256_bf16"]


# 80 MiB blocks (more than glibc's 64 MiB per-thread heaps, which the
# opt-in's single arena stands in for), allocated, written and freed by four
# threads at once, ROUNDS blocks each: a count, not a time, so that a loaded
# machine makes the child slower but never changes what it checks. Each
# thread reads RSS while its block is live, the main thread every 50 ms.
_THREADS_CHILD = r"""
import json, threading, time
import numpy as np
import jax_lngb

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

BLOCK, ROUNDS = 80 << 20, 16
errors, counts, peaks = [], [0] * 4, []
start = threading.Barrier(4)

def work(i):
    try:
        start.wait()
        for _ in range(ROUNDS):
            a = np.empty(BLOCK + 4096 * i, np.uint8)
            a[::4096] = i          # touch every page
            assert a[-4096 * (i + 1)] == i
            peaks.append(rss_mib())
            del a
            counts[i] += 1
    except BaseException as e:
        errors.append(repr(e))

before = rss_mib()
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
while any(t.is_alive() for t in threads):
    peaks.append(rss_mib())
    time.sleep(0.05)
for t in threads:
    t.join()
print(json.dumps({"enabled": jax_lngb.host_memory.is_enabled(), "errors": errors, "counts": counts,
                  "rounds": ROUNDS, "before": before, "peak": max(peaks + [rss_mib()]), "after": rss_mib(),
                  "block_mib": BLOCK >> 20}))
"""


@needs_glibc
def test_threads_allocating_large_blocks_stay_bounded():
    got = _child_json(_THREADS_CHILD, env={ENV: "1"})
    assert got["enabled"] is True and got["errors"] == []
    assert got["counts"] == [got["rounds"]] * 4, got  # every thread kept allocating
    # With one arena the freed blocks stay in the heap for the next ones:
    # RSS stays within the four threads' live blocks twice over, however
    # many blocks come and go.
    bound = got["before"] + 4 * 2 * (got["block_mib"] + 1) + 64
    assert got["peak"] <= bound and got["after"] <= bound, got
    assert sum(got["counts"]) * got["block_mib"] > 4 * (bound - got["before"]), got  # far more than RSS grew


@needs_glibc
def test_time_both_ways_for_the_demo():
    code = r"""
import json, jax, jax.numpy as jnp, jax_lngb
x = jnp.ones((12288, 1024)); g = jnp.ones(1024); b = jnp.zeros(1024)
step = jax.jit(lambda x, g, b: jax.vjp(jax_lngb.layer_norm, x, g, b)[1](x))
print(json.dumps(jax_lngb.host_memory.time_both_ways(lambda: jax.block_until_ready(step(x, g, b)), calls=3)))
"""
    got = _child_json(code, env={ENV: "0"})
    assert got["enabled"] is True and got["off_ms"] > 0 and got["on_ms"] > 0, got
    # dx is 48 MiB: above glibc's largest mmap threshold, so each call maps it
    # afresh without the opt-in; with it, the heap settles and it is reused.
    dx_pages = 12288 * 1024 * 4 // resource.getpagesize()
    assert got["faults_off"] > dx_pages // 3, got
    assert got["settled"] is True and got["faults_on"] < dx_pages // CLEAN_FRACTION, got
