"""`python -m jax_lngb.bench.allocators`: what the host allocator does to a
plain-jit LayerNorm training step (fresh outputs every call).

Each option is a way to run the same process: glibc's defaults; glibc
with `jax_lngb.retain_host_memory` (JAX_LNGB_RETAIN_HOST_MEMORY=1), and
with its heap settings alone; glibc
with transparent huge pages for its heap (GLIBC_TUNABLES
glibc.malloc.hugetlb=1); jemalloc and tcmalloc through LD_PRELOAD when
their libraries are installed. An allocator is chosen when a process
starts, so every (option, implementation) pair runs in a child process of
its own, and the parent alternates them: each round runs every pair once,
in an order rotated from round to round, so a disturbance from the rest of
the machine lands on different pairs each time.

A child times `reps` calls of the implementation's fwd+bwd after `warmup`
untimed ones, per shape and dtype, and reports the median, the minor page
faults per timed call (getrusage) and the process's peak RSS:

Options: ``glibc`` (defaults), ``retain`` (the opt-in), ``mmap_trim`` (the
opt-in's two heap settings without its single arena), ``thp``,
``jemalloc``, ``tcmalloc``.

* ``ours``: ``jax.jit`` of ``jax.vjp`` through ``jax_lngb.layer_norm``
  returning y, dx, dgamma, dbeta; nothing donated.
* ``xla``: the same through ``jax_lngb.layer_norm_jnp`` (XLA autodiff).
* ``torch``: ``aten.native_layer_norm`` then ``native_layer_norm_backward``
  (functional: fresh outputs), when PyTorch is installed.

It lives beside the benchmark rather than in it because it needs a process
per allocator, and so that anyone can rerun it on their own machine; the
allocator libraries are never dependencies of jax_lngb.

    python -m jax_lngb.bench.allocators                        every option, 3 rounds
    python -m jax_lngb.bench.allocators --rounds 5 --json alloc.json
    python -m jax_lngb.bench.allocators --options glibc retain --impls ours
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

DEFAULT_SHAPES = [(65536, 768), (4096, 4096)]
DEFAULT_DTYPES = ("float32", "bfloat16")
IMPLS = ("ours", "xla", "torch")
EPSILON = 1e-5
_LIBDIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
# Debian's libjemalloc2 and libtcmalloc-minimal4.
_PRELOADS = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}
OPTIONS = ("glibc", "retain", "mmap_trim", "thp", "jemalloc", "tcmalloc")
_DESCRIBE = {
    "glibc": "glibc malloc, defaults",
    "retain": "JAX_LNGB_RETAIN_HOST_MEMORY=1 (mallopt M_ARENA_MAX=1, M_MMAP_MAX=0, M_TRIM_THRESHOLD=2^31-1)",
    "mmap_trim": "mallopt M_MMAP_MAX=0, M_TRIM_THRESHOLD=2^31-1 only (threads keep their own arenas)",
    "thp": "GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (madvise huge pages)",
    "jemalloc": "LD_PRELOAD=libjemalloc.so.2",
    "tcmalloc": "LD_PRELOAD=libtcmalloc_minimal.so.4",
}


def find_library(name: str) -> str | None:
    for d in _LIBDIRS:
        path = os.path.join(d, name)
        if os.path.exists(path):
            return path
    return None


def option_env(option: str, base: dict[str, str]) -> dict[str, str] | None:
    """The child's environment for `option`; None when its library is
    missing."""
    env = {
        k: v
        for k, v in base.items()
        if k not in ("LD_PRELOAD", "GLIBC_TUNABLES", "JAX_LNGB_RETAIN_HOST_MEMORY", _MMAP_TRIM_ENV)
    }
    if option == "retain":
        env["JAX_LNGB_RETAIN_HOST_MEMORY"] = "1"
    elif option == "mmap_trim":
        env[_MMAP_TRIM_ENV] = "1"
    elif option == "thp":
        env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    elif option in _PRELOADS:
        lib = find_library(_PRELOADS[option])
        if lib is None:
            return None
        env["LD_PRELOAD"] = lib
    elif option != "glibc":
        raise ValueError(f"unknown option {option!r}: use one of {', '.join(OPTIONS)}")
    return env


# ------------------------------------------------------------------- child


def _faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _rss_mib() -> float:
    """Resident memory now (Linux /proc; the peak where it cannot be read)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return _peak_rss_mib()


def _jax_step(impl: str, shape, dtype: str, seed: int):
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jax_lngb import layer_norm, layer_norm_jnp

    fn = {"ours": layer_norm, "xla": layer_norm_jnp}[impl]
    rng = np.random.default_rng(seed)
    jdt = jnp.dtype(dtype)
    x = jax.device_put((rng.standard_normal(shape, dtype=np.float32) * 2 + 0.5).astype(jdt))
    dy = jax.device_put(rng.standard_normal(shape, dtype=np.float32).astype(jdt))
    g = jax.device_put((1 + 0.1 * rng.standard_normal(shape[-1])).astype(np.float32))
    b = jax.device_put((0.1 * rng.standard_normal(shape[-1])).astype(np.float32))

    def step(x, g, b, dy):
        y, f = jax.vjp(lambda *a: fn(*a, epsilon=EPSILON), x, g, b)
        return (y, *f(dy))

    jitted = jax.jit(step)
    return lambda: jax.block_until_ready(jitted(x, g, b, dy))


def _torch_step(shape, dtype: str, seed: int):
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    h = shape[-1]
    rows = math.prod(shape[:-1])
    x = torch.from_numpy(rng.standard_normal((rows, h), dtype=np.float32) * 2 + 0.5).to(tdt)
    dy = torch.from_numpy(rng.standard_normal((rows, h), dtype=np.float32)).to(tdt)
    g = torch.from_numpy((1 + 0.1 * rng.standard_normal(h)).astype(np.float32))
    b = torch.from_numpy((0.1 * rng.standard_normal(h)).astype(np.float32))
    mask = [True, True, True]

    def step():
        y, m, r = torch.ops.aten.native_layer_norm(x, [h], g, b, EPSILON)
        return (y, *torch.ops.aten.native_layer_norm_backward(dy, x, [h], m, r, g, b, mask))

    return step


_MMAP_TRIM_ENV = "JAX_LNGB_BENCH_MMAP_TRIM"


def _mmap_trim_only() -> None:
    """The opt-in without its M_ARENA_MAX=1: what it would do if threads
    kept their own arenas."""
    import ctypes

    from jax_lngb import host_memory

    mallopt = ctypes.CDLL(None).mallopt
    for name in ("M_MMAP_MAX", "M_TRIM_THRESHOLD"):
        if mallopt(host_memory._PARAMS[name], host_memory.SETTINGS[name]) != 1:
            raise RuntimeError(f"mallopt refused {name}")


def child(impl: str, shapes, dtypes, reps: int, warmup: int, seed: int) -> dict[str, Any]:
    """Runs in the child process: every shape and dtype of one implementation."""
    if os.environ.get(_MMAP_TRIM_ENV) == "1":
        _mmap_trim_only()
    import jax_lngb  # applies JAX_LNGB_RETAIN_HOST_MEMORY before anything large exists
    from jax_lngb import host_memory

    out: dict[str, Any] = {"retain_host_memory": host_memory.is_enabled(), "cases": []}
    for shape in shapes:
        for dtype in dtypes:
            fn = _torch_step(shape, dtype, seed) if impl == "torch" else _jax_step(impl, shape, dtype, seed)
            for _ in range(warmup):
                res = fn()
                del res
            times, call_faults, call_rss = [], [], []
            for _ in range(reps):
                f0 = _faults()
                t0 = time.perf_counter()
                res = fn()
                times.append((time.perf_counter() - t0) * 1e3)
                call_faults.append(_faults() - f0)
                del res
                call_rss.append(_rss_mib())
            out["cases"].append(
                {
                    "shape": list(shape),
                    "dtype": dtype,
                    "times_ms": times,
                    "ms": statistics.median(times),
                    "faults_per_call": sum(call_faults) / reps,
                    "faults": call_faults,
                    "rss_mib": call_rss,
                    "peak_rss_mib": _peak_rss_mib(),
                }
            )
            del fn
    del jax_lngb
    return out


# ------------------------------------------------------------------ parent


def _run_child(option: str, impl: str, args) -> dict[str, Any] | str:
    env = option_env(option, dict(os.environ))
    if env is None:
        return f"{_PRELOADS[option]} not found"
    cmd = [
        sys.executable,
        "-m",
        "jax_lngb.bench.allocators",
        "--child",
        impl,
        "--shapes",
        *["x".join(map(str, s)) for s in args.shapes],
        "--dtypes",
        *args.dtypes,
        "--reps",
        str(args.reps),
        "--warmup",
        str(args.warmup),
        "--seed",
        str(args.seed),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        return f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}"
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    return json.loads(line)


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (shape, dtype, impl, option): the median over rounds of
    each round's median time, the range of those, the median faults per call
    and the largest peak RSS."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for run in runs:
        if not isinstance(run["result"], dict):
            continue
        for c in run["result"]["cases"]:
            key = (tuple(c["shape"]), c["dtype"], run["impl"], run["option"])
            groups.setdefault(key, []).append(c)
    rows = []
    for (shape, dtype, impl, option), cs in groups.items():
        ms = [c["ms"] for c in cs]
        rows.append(
            {
                "shape": list(shape),
                "dtype": dtype,
                "impl": impl,
                "option": option,
                "rounds": len(cs),
                "ms": statistics.median(ms),
                "ms_min": min(ms),
                "ms_max": max(ms),
                "faults_per_call": statistics.median(c["faults_per_call"] for c in cs),
                "peak_rss_mib": max(c["peak_rss_mib"] for c in cs),
            }
        )
    return rows


def format_table(rows: list[dict[str, Any]], options: list[str]) -> str:
    """Markdown: per shape/dtype/impl, each option's time (range), faults per
    call and peak RSS."""
    lines = ["| case | impl | " + " | ".join(options) + " |", "|---|---|" + "---|" * len(options)]
    by = {(tuple(r["shape"]), r["dtype"], r["impl"], r["option"]): r for r in rows}
    cases = sorted({(tuple(r["shape"]), r["dtype"]) for r in rows}, key=lambda k: (-math.prod(k[0]), k[1]))
    impls = [i for i in IMPLS if any(r["impl"] == i for r in rows)]
    for shape, dtype in cases:
        for impl in impls:
            cells = []
            for o in options:
                r = by.get((shape, dtype, impl, o))
                cells.append(
                    "-"
                    if r is None
                    else f"{r['ms']:.1f} ms ({r['ms_min']:.1f}-{r['ms_max']:.1f}), "
                    f"{r['faults_per_call']:.0f} flt, {r['peak_rss_mib']:.0f} MiB"
                )
            lines.append(f"| [{', '.join(map(str, shape))}] {dtype} | {impl} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _parser() -> argparse.ArgumentParser:
    from .common import parse_dtype, parse_shape

    p = argparse.ArgumentParser(
        prog="python -m jax_lngb.bench.allocators",
        description="Plain-jit LayerNorm fwd+bwd under each host allocator option.",
    )
    p.add_argument("--options", nargs="+", choices=OPTIONS, default=list(OPTIONS))
    p.add_argument("--impls", nargs="+", choices=IMPLS, default=list(IMPLS))
    p.add_argument("--shapes", nargs="+", type=parse_shape, default=DEFAULT_SHAPES, metavar="RxH")
    p.add_argument("--dtypes", nargs="+", type=parse_dtype, default=list(DEFAULT_DTYPES), metavar="DT")
    p.add_argument("--rounds", type=int, default=3, help="times every (option, impl) child runs (default 3)")
    p.add_argument("--reps", type=int, default=7, help="timed calls per case in a child (default 7)")
    p.add_argument(
        "--warmup",
        type=int,
        default=4,
        help="untimed calls first (default 4: glibc's heap takes a few calls to settle with retain)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=900, help="seconds per child (default 900)")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--child", choices=IMPLS, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.shapes, args.dtypes, args.reps, args.warmup, args.seed)), flush=True)
        return 0
    options = list(args.options)
    pairs = [(o, i) for o in options for i in args.impls]
    print(
        f"{_cpu_model()}, {os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M %Z')}; "
        f"{args.rounds} rounds of {len(pairs)} child processes, order rotated each round; "
        f"each: {args.warmup} warm-up + {args.reps} timed plain-jit fwd+bwd calls per case",
        flush=True,
    )
    for o in options:
        print(f"  {o}: {_DESCRIBE[o]}")
    runs = []
    started = time.perf_counter()
    for r in range(args.rounds):
        k = (r * 3) % len(pairs)
        for option, impl in pairs[k:] + pairs[:k]:
            res = _run_child(option, impl, args)
            runs.append({"round": r, "option": option, "impl": impl, "result": res})
            summary = (
                res
                if isinstance(res, str)
                else ", ".join(
                    f"{c['dtype']} {c['ms']:.1f} ms {c['faults_per_call']:.0f} flt" for c in res["cases"][:2]
                )
            )
            print(f"round {r + 1}/{args.rounds} {option:9s} {impl:6s} {summary}", flush=True)
    rows = summarize(runs)
    print()
    print(
        "median over rounds of each child's median ms (range over rounds), minor page faults per call, "
        "peak RSS of the child"
    )
    print(format_table(rows, options))
    print(f"\ndone in {time.perf_counter() - started:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "cpu": _cpu_model(),
                    "cpus": os.cpu_count(),
                    "date": time.strftime("%Y-%m-%d %H:%M %Z"),
                    "argv": sys.argv[1:],
                    "options": {o: _DESCRIBE[o] for o in options},
                    "runs": runs,
                    "rows": rows,
                },
                f,
                indent=1,
            )
        print(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
