"""The `jax-lngb` command (also `python -m jax_lngb`): the demo, `info` and
the benchmark.

    jax-lngb                   the demo: the document's example, a training step, LayerNorm alone
    jax-lngb demo --quick      the same at small sizes, in seconds
    jax-lngb info [--json]     versions, CPU kernel dispatch, native lowerings, extras
    jax-lngb bench ...         the benchmark (`jax-lngb bench --help`)
    jax-lngb --version         jax_lngb's version, with jax's, jaxlib's and Python's

The console script is what the README shows: it runs the installed package
from any folder. `python -m jax_lngb` works too, from the repository root
included (the package's __init__ lets a source checkout find the installed
extension), but it depends on which folder Python puts first on sys.path.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
from typing import Any

# Optional libraries with a drop-in module here: distribution -> modules.
_INTEGRATIONS = {"flax": ("jax_lngb.flax", "jax_lngb.nnx"), "equinox": ("jax_lngb.equinox",)}


def _dist_version(name: str) -> str | None:
    """An installed distribution's version, read from its metadata (the
    package itself is not imported)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _version_line() -> str:
    from .._version import __version__

    return (
        f"jax_lngb {__version__} (jax {_dist_version('jax')}, jaxlib {_dist_version('jaxlib')}, "
        f"Python {platform.python_version()})"
    )


def _ascend_info() -> dict[str, Any]:
    """What the optional Ascend lowering module says about itself, without
    depending on it: absent, failing to import, or its registered platforms."""
    name = "jax_lngb.ascend"
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return {"available": False, "reason": "no jax_lngb.ascend module in this build"}
    try:
        mod = importlib.import_module(name)
    except Exception as e:
        return {"available": False, "reason": f"jax_lngb.ascend failed to import: {type(e).__name__}: {e}"}

    def ask(attr: str) -> Any:
        fn = getattr(mod, attr, None)
        if not callable(fn):
            return None
        try:
            value = fn()
        except Exception as e:
            return f"error: {type(e).__name__}: {e}"
        return list(value) if isinstance(value, (tuple, list)) else value

    return {
        "available": True,
        "registered_platforms": ask("registered_platforms"),
        "platform_names": ask("platform_names"),
        "npu_handler_compiled": ask("handler_available"),
    }


def collect_info() -> dict[str, Any]:
    """Everything `info` prints, as plain data."""
    import jax
    import jaxlib

    from .. import __version__, host_memory
    from .._compat import TESTED_JAX_UP_TO, newer_than_tested
    from .._core import native as _native

    cpu = _native._cpu
    supported = getattr(cpu, "supported_isa", None)
    env = {k: os.environ[k] for k in ("JAX_LNGB_ISA", "JAX_LNGB_NUM_THREADS") if k in os.environ}
    integrations = {}
    for dist, modules in _INTEGRATIONS.items():
        integrations[dist] = {"version": _dist_version(dist), "modules": list(modules)}
    return {
        "jax_lngb": __version__,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": f"{platform.system()} {platform.machine()}",
        "jax": jax.__version__,
        "jax_tested_up_to": TESTED_JAX_UP_TO,
        "jax_newer_than_tested": newer_than_tested(jax.__version__),
        "jaxlib": jaxlib.__version__,
        "numpy": _dist_version("numpy"),
        "ffi_api_version": ".".join(map(str, _native.ffi_api_version())),
        "extension": getattr(cpu, "__file__", None),
        "cpu": {
            "kernel_variant": _native.cpu_isa(),
            "best_supported_variant": supported() if callable(supported) else None,
            "features": _native.cpu_features().split(),
            "vendor": _native.cpu_vendor(),
            "environment": env,
        },
        "native_lowerings": {
            "cpu": {"ffi_targets": list(_native.register_cpu_targets())},
            "ascend": _ascend_info(),
        },
        "host_memory": host_memory.status(),
        "jax_default_backend": jax.default_backend(),
        "integrations": integrations,
    }


def _print_info(info: dict[str, Any]) -> None:
    cpu = info["cpu"]
    print(f"jax_lngb {info['jax_lngb']}")
    print(f"Python {info['python']} ({info['implementation']}), {info['platform']}")
    print(f"jax {info['jax']}, jaxlib {info['jaxlib']}, numpy {info['numpy']}")
    if info["jax_newer_than_tested"]:
        print(
            f"note: jax {info['jax']} is newer than the newest release the tests ran on "
            f"({info['jax_tested_up_to']}); if something fails, report it with this output"
        )
    print(f"XLA FFI API the handlers were built against: {info['ffi_api_version']}")
    variant = cpu["kernel_variant"]
    best = cpu["best_supported_variant"]
    chosen = f"{variant}" + (f" (best this CPU and build support: {best})" if best and best != variant else "")
    print(f"CPU kernel variant: {chosen}")
    print(f"CPU features the dispatcher saw: {' '.join(cpu['features']) or '(none)'}")
    print(f"CPU vendor (the reduction's loop choice from memory): {cpu['vendor']}")
    for k, v in cpu["environment"].items():
        print(f"  {k}={v}")
    print("native lowerings:")
    print(f"  cpu: C++ kernels through XLA FFI ({', '.join(info['native_lowerings']['cpu']['ffi_targets'])})")
    asc = info["native_lowerings"]["ascend"]
    if not asc["available"]:
        print(f"  ascend: none ({asc['reason']})")
    else:

        def show(value: Any, empty: str) -> str:
            if isinstance(value, list):
                return ", ".join(map(str, value)) or empty
            return "unknown" if value is None else str(value)

        print(
            f"  ascend: registered for {show(asc['registered_platforms'], 'no platform yet')} "
            f"(platform names watched: {show(asc['platform_names'], 'none')}; "
            f"NPU handler compiled: {show(asc['npu_handler_compiled'], 'unknown')})"
        )
    print("  every other platform: the jax.numpy lowering of the same math")
    from ..host_memory import summary

    print(f"host memory retention (JAX_LNGB_RETAIN_HOST_MEMORY): {summary(info['host_memory'])}")
    print(f"JAX default backend: {info['jax_default_backend']}")
    print("integrations:")
    for dist, entry in info["integrations"].items():
        mods = ", ".join(entry["modules"])
        state = entry["version"] or f"not installed (pip install 'jax_lngb[{dist}]')"
        print(f"  {dist}: {state} -> {mods}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        # The benchmark has its own options; hand it everything after the word.
        from ..bench.__main__ import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["demo"]:
        from . import demo

        return demo.main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="jax-lngb", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="store_true", help="print the versions and exit")
    parser.add_argument(
        "command",
        nargs="?",
        default="demo",
        choices=["demo", "info", "bench"],
        help="demo (default), info, or bench (each answers --help)",
    )
    parser.add_argument("--json", action="store_true", help="with info: print one JSON object")
    args = parser.parse_args(argv)
    if args.version:
        print(_version_line())
        return 0
    if args.command == "info":
        info = collect_info()
        if args.json:
            print(json.dumps(info, indent=2))
        else:
            _print_info(info)
        return 0
    if args.json:
        parser.error("--json goes with the info command")
    from . import demo

    return demo.main([])


if __name__ == "__main__":
    sys.exit(main())
