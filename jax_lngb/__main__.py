"""`python -m jax_lngb`: the demo; `--version` and `info` describe the install."""

from __future__ import annotations

import argparse
import sys


def _info() -> int:
    import jax
    import jaxlib

    from . import __version__, _native

    print(f"jax_lngb {__version__}")
    print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}")
    major, minor = _native.ffi_api_version()
    print(f"XLA FFI API the handlers were built against: {major}.{minor}")
    print(f"CPU kernel variant: {_native.cpu_isa()} (features seen: {_native.cpu_features()})")
    print("native lowerings: cpu (C++ kernels through XLA FFI); other platforms use the jax.numpy lowering")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jax_lngb", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("command", nargs="?", default="demo", choices=["demo", "info"])
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__

        print(__version__)
        return 0
    if args.command == "info":
        return _info()
    from . import demo

    return demo.main()


if __name__ == "__main__":
    sys.exit(main())
