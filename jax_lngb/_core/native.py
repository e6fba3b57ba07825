"""Loads the compiled extension and registers its XLA FFI handlers, once.

Every primitive's CPU lowering names an FFI target registered here, so the
import of any op module is enough to make its custom call resolvable.
"""

from __future__ import annotations

import functools

import jax

try:
    from .. import _cpu  # the compiled extension (cpp/python/cpu_module.cc)
except ImportError as e:  # pragma: no cover - depends on how it was installed
    # One line that says what to run: these sources are imported, but no
    # build of them (installed or linked by cpp/dev_build.sh) was found.
    raise ImportError(
        f"jax_lngb's compiled extension is not built or failed to load ({e}); from the repository root run "
        "`python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/jax-lngb`, or `cpp/dev_build.sh` "
        "for a working-tree build"
    ) from e


@functools.cache
def register_cpu_targets() -> tuple[str, ...]:
    """Registers every CPU handler of the extension; returns their names."""
    names = []
    for name, capsule in _cpu.registrations().items():
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
        names.append(name)
    return tuple(sorted(names))


def cpu_isa() -> str:
    """The kernel variant the dispatcher chose for this CPU (generic/avx2/avx512)."""
    return _cpu.isa()


def cpu_vendor() -> str:
    """Who made the CPU (intel/amd/other): the reduction's loop choice depends on it."""
    return _cpu.cpu_vendor()


def cpu_features() -> str:
    """The CPU features the dispatcher looked at, as a space-separated list."""
    return _cpu.cpu_features()


def ffi_api_version() -> tuple[int, int]:
    """The XLA FFI API version the handlers were compiled against."""
    return tuple(_cpu.ffi_api_version)


register_cpu_targets()
