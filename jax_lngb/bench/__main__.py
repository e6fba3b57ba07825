"""`python -m jax_lngb.bench`: run benchmark sections, print a table per case
and the targets, optionally write JSON and a PNG chart.

    python -m jax_lngb.bench                                  the reduction at its default shapes
    python -m jax_lngb.bench --section all --json out.json    both sections, machine-readable too
    python -m jax_lngb.bench --shapes 65536x768 --dtypes bf16 --reps 20
    python -m jax_lngb.bench --threads 1                      XLA (and torch) on one thread
    python -m jax_lngb.bench --section layer_norm --retain-host-memory   plain-jit steps without page faults
    python -m jax_lngb.bench --section layer_norm --shapes 65536x768 --dtypes f32 bf16 --png-headline h.png
                                                              the README's headline chart (--png: the detail)

Targets that fail are reported, never turned into a failing exit status:
the figures are evidence, not a test.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import platform
import sys
import time
from typing import Any

from . import SECTIONS

# Set in the environment of the re-executed process, so it does not re-exec.
_THREADS_ENV = "JAX_LNGB_BENCH_THREADS"


def _parser() -> argparse.ArgumentParser:
    from .common import parse_dtype, parse_shape

    p = argparse.ArgumentParser(
        prog="python -m jax_lngb.bench",
        description="Benchmark jax_lngb's CPU kernels against XLA, NumPy, PyTorch and a streaming-read probe.",
    )
    p.add_argument(
        "--section",
        choices=(*SECTIONS, "all"),
        default="reduction",
        help="what to measure (default: reduction; 'all' runs every section: "
        "reduction, layer_norm, rms_norm, add_norm)",
    )
    p.add_argument(
        "--shapes",
        nargs="+",
        type=parse_shape,
        metavar="RxH",
        help="shapes like 65536x768 or 4x128x768 (default: each section's list)",
    )
    p.add_argument("--dtypes", nargs="+", type=parse_dtype, metavar="DT", help="f32, f16, bf16 (default: all three)")
    p.add_argument(
        "--reps", type=int, default=10, help="timed calls per implementation; the median is reported (default 10)"
    )
    p.add_argument(
        "--settle-ms",
        type=float,
        default=None,
        help="pause before each timed call of a case larger than the L2 caches, so one "
        "implementation's aftermath is not charged to the next (default 50; 0: none)",
    )
    p.add_argument("--warmup", type=int, default=2, help="untimed calls first (default 2)")
    p.add_argument(
        "--threads", type=int, help="XLA CPU intra-op threads and torch threads (default: what XLA picks, one per core)"
    )
    p.add_argument(
        "--impls", nargs="+", metavar="NAME", help="only these implementations (e.g. ours xla probe; default: all)"
    )
    p.add_argument("--json", metavar="PATH", help="write every figure as JSON here")
    p.add_argument(
        "--png",
        metavar="PATH",
        help="write the detail chart here: every implementation's GB/s per case, and the "
        "fwd+bwd time (needs matplotlib)",
    )
    p.add_argument(
        "--png-headline",
        metavar="PATH",
        help="write the headline chart here: fwd+bwd milliseconds of jax_lngb, XLA and PyTorch, "
        "steady state beside plain jax.jit, one panel per dtype (needs matplotlib and the "
        "layer_norm or rms_norm section). Both charts can be redrawn from --json later: "
        "python -m jax_lngb.bench.chart --from-json PATH",
    )
    p.add_argument(
        "--chart-caption",
        metavar="TEXT",
        help="the headline chart's one-line caption (default: the CPU, its cores, the versions and today's date)",
    )
    p.add_argument("--no-progress", action="store_true", help="no status line on stderr")
    p.add_argument("--seed", type=int, default=0, help="random inputs' seed (default 0)")
    p.add_argument(
        "--retain-host-memory",
        action="store_true",
        help="call jax_lngb.retain_host_memory() before measuring (as JAX_LNGB_RETAIN_HOST_MEMORY=1 "
        "does at import): glibc keeps freed large blocks mapped, so the *_plain cases' fresh "
        "outputs stop page-faulting",
    )
    return p


def _reexec_with_threads(threads: int, argv: list[str]) -> None:
    """XLA sizes its CPU thread pool from the environment when its client
    starts, which importing jax_lngb may already have triggered: a fresh
    process with the variables set is the dependable way."""
    if os.environ.get(_THREADS_ENV) == str(threads):
        return
    env = dict(os.environ)
    env[_THREADS_ENV] = str(threads)
    env["NPROC"] = str(threads)  # XLA's PJRT CPU client: intra-op pool size
    env["PJRT_NPROC"] = str(threads)
    env["OMP_NUM_THREADS"] = str(threads)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "jax_lngb.bench", *argv], env)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


_THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


def transparent_hugepages(path: str = _THP_ENABLED) -> str | None:
    """The kernel's transparent-huge-page mode ("always", "madvise" or
    "never": the bracketed word of `path`), or None where it cannot be read.
    With "madvise", large buffers get huge pages only if their allocator asks
    (glibc's malloc does when GLIBC_TUNABLES has glibc.malloc.hugetlb=1):
    that decides much of the page-fault cost of the peers that allocate
    their outputs on every call (see the README's figures)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def machine_info(l3: int, l2_total: int | None = None, eviction_bytes: int | None = None) -> dict[str, Any]:
    from jax_lngb import host_memory
    from jax_lngb._core import native as _native
    from jax_lngb._version import __version__

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    torch_threads = None
    if _version("torch") is not None:
        try:
            import torch

            torch_threads = torch.get_num_threads()
        except ImportError:
            pass
    return {
        "cpu": _cpu_model(),
        "cores": cores,
        "l3_bytes": l3,
        "l2_total_bytes": l2_total,
        "eviction_bytes": eviction_bytes,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax_lngb": __version__,
        "jax": _version("jax"),
        "jaxlib": _version("jaxlib"),
        "numpy": _version("numpy"),
        "torch": _version("torch"),
        "isa": _native.cpu_isa(),
        "cpu_vendor": _native.cpu_vendor(),
        "cpu_features": _native.cpu_features(),
        # What XLA's CPU client sizes its intra-op pool from (see --threads).
        "xla_threads": int(os.environ["NPROC"]) if os.environ.get("NPROC", "").isdigit() else cores,
        "torch_threads": torch_threads,
        "jax_lngb_num_threads": os.environ.get("JAX_LNGB_NUM_THREADS"),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "transparent_hugepages": transparent_hugepages(),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES"),
        "ld_preload": os.environ.get("LD_PRELOAD"),
        "retain_host_memory": host_memory.status(),
    }


def _print_machine(info: dict[str, Any]) -> None:
    print(
        f"jax_lngb {info['jax_lngb']} benchmark on {info['cpu']}, {info['cores']} cores, "
        f"L3 {info['l3_bytes'] >> 20} MiB, kernel ISA {info['isa']} ({info['cpu_vendor']} loop choice)"
    )
    print(
        f"jax {info['jax']}, jaxlib {info['jaxlib']}, numpy {info['numpy']}, "
        f"torch {info['torch'] or 'not installed'}; XLA threads {info['xla_threads']}"
        + (f", torch threads {info['torch_threads']}" if info["torch_threads"] else "")
        + (f", OpenMP wait policy {info['omp_wait_policy']}" if info["omp_wait_policy"] else "")
    )
    if info["transparent_hugepages"] or info["glibc_tunables"]:
        print(
            f"transparent huge pages: {info['transparent_hugepages'] or 'unknown'}"
            + (f"; GLIBC_TUNABLES={info['glibc_tunables']}" if info["glibc_tunables"] else "")
        )
    from jax_lngb import host_memory

    print(
        f"retain_host_memory: {host_memory.summary(info['retain_host_memory'])}"
        + (f"; LD_PRELOAD={info['ld_preload']}" if info["ld_preload"] else "")
    )


# OpenMP runtimes (PyTorch's) keep their threads spinning for a while after
# each parallel region by default. In an interleaved run those threads take
# cores from whichever implementation is timed next: measured here, the probe
# timed right after torch read 20-45% slower. Passive waiting makes every
# call start on idle cores; a policy already set in the environment wins.
_OMP_WAIT_POLICY = "PASSIVE"


def main(argv: list[str] | None = None) -> int:
    # Read by the OpenMP runtime when it loads: before torch is imported.
    os.environ.setdefault("OMP_WAIT_POLICY", _OMP_WAIT_POLICY)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            _parser().error("--threads must be >= 1")
        _reexec_with_threads(args.threads, argv)

    from . import common, residency

    if args.retain_host_memory:
        # Before the first large allocation: nothing big exists yet.
        from jax_lngb import retain_host_memory

        retain_host_memory()

    args.dtypes = args.dtypes or list(common.DEFAULT_DTYPES)
    if args.threads is not None:
        try:
            import torch

            torch.set_num_threads(args.threads)
        except ImportError:
            pass

    sections = list(SECTIONS) if args.section == "all" else [args.section]
    modules = {name: importlib.import_module(f"jax_lngb.bench.{name}") for name in sections}
    progress = common.Progress(enabled=not args.no_progress)
    l3 = residency.l3_bytes()
    l2 = residency.l2_total_bytes()

    def on_case(case: common.CaseResult) -> None:
        progress.clear()
        print(common.format_case(case))
        print(flush=True)

    ctx = common.BenchContext(
        shapes=args.shapes,
        dtypes=args.dtypes,
        reps=args.reps,
        warmup=args.warmup,
        settle_ms=common.DEFAULT_SETTLE_MS if args.settle_ms is None else args.settle_ms,
        impls=set(args.impls) if args.impls else None,
        seed=args.seed,
        l3_bytes=l3,
        l2_bytes=l2,
        progress=progress,
        on_case=on_case,
    )
    info = machine_info(l3, l2, ctx.eviction_bytes())
    _print_machine(info)
    print(
        f"median of {args.reps} timed calls after {args.warmup} warm-up calls, rounds interleaving the "
        f"implementations, {ctx.settle_ms:g} ms pause before each timed call of a case larger than the L2 "
        "caches; 'of probe' = GB/s over the streaming-read probe's GB/s; 'vs ours' = time / ours' time",
        flush=True,
    )
    print(
        f"cache-resident = the probe, timed among the others, reads the inputs >= "
        f"{residency.RESIDENT_SPEEDUP:g}x as fast as right after reading {info['eviction_bytes'] >> 20} MiB of "
        "other data (the median of "
        f"{residency.EVICTED_CALLS} such calls); inputs within the L2 caches are cache-resident; without the "
        "probe, bytes <= L3\n",
        flush=True,
    )

    from .chart import ChartSection, today

    date = today()
    started = time.perf_counter()
    all_cases: list[common.CaseResult] = []
    all_targets: list[common.Target] = []
    per_section: list[ChartSection] = []
    for name, mod in modules.items():
        print(f"== {name}: {mod.TITLE}\n", flush=True)
        cases = mod.run(ctx)
        progress.clear()
        tg = mod.targets(cases)
        print(common.format_targets(tg))
        print(flush=True)
        all_cases += cases
        all_targets += tg
        per_section.append(ChartSection(name, mod.TITLE, cases))
    elapsed = time.perf_counter() - started
    print(f"done in {elapsed:.1f} s")

    if args.png or args.png_headline:
        from .chart import ChartUnavailable, default_caption, write_headline_png, write_png

        if args.png:
            try:
                write_png(args.png, per_section, f"jax_lngb benchmark on {info['cpu']}, {info['cores']} cores")
                print(f"chart written to {args.png}")
            except ChartUnavailable as e:
                print(f"--png: no chart written: {e}", file=sys.stderr)
        if args.png_headline:
            caption = args.chart_caption if args.chart_caption is not None else default_caption(info, date)
            try:
                write_headline_png(args.png_headline, per_section, caption)
                print(f"headline chart written to {args.png_headline}")
            except ChartUnavailable as e:
                print(f"--png-headline: no chart written: {e}", file=sys.stderr)
    if args.json:
        doc = {
            "machine": info,
            "args": {k: ([list(s) for s in v] if k == "shapes" and v else v) for k, v in vars(args).items()},
            "settle_ms": ctx.settle_ms,
            "date": date,
            "elapsed_s": elapsed,
            # Which section measured each case (labels repeat across the
            # norm sections), so the charts can be redrawn from this file.
            "sections": [{"name": s.name, "title": s.title} for s in per_section],
            "cases": [{**c.to_json(), "section": s.name} for s in per_section for c in s.cases],
            "targets": [t.to_json() for t in all_targets],
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
