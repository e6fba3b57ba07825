"""The newest jax release the test suite has passed on, and a check of a
version against it.

jax and jaxlib have no upper bound in pyproject.toml: the FFI handlers are
built against the XLA FFI headers of the oldest supported jaxlib (0.7.2),
and those load on every newer jaxlib. What a newer jax can still change is
the Python API this package uses (jax.extend's Primitive, jax.ffi, the
batching and lowering registries, jax.export), so `newer_than_tested`
tells when a jax is newer than any the tests ran on, for `jax-lngb info`
to say so.

To bump TESTED_JAX_UP_TO: in a fresh virtual environment with a Python
that release supports (jax 0.11 and later need Python 3.12 or newer), run
`pip install "jax==X" "jaxlib==X" ".[test]"` from the repository root,
then `pytest` there (at the least tests/test_layer_norm.py,
tests/test_rms_norm.py, tests/test_export.py and tests/test_grad_beta.py,
which cover the primitives, their lowerings, batching and export), and set
the constant to X once they pass.

This module imports nothing (no JAX), so it can be asked before JAX loads.
"""

from __future__ import annotations

import re

# jax 0.12.1 and jaxlib 0.12.1 on Python 3.13: the four files above and
# test_batching, test_layer_norm_grad, test_higher_order, test_sharding
# and the Flax, NNX and Equinox drop-in tests passed.
TESTED_JAX_UP_TO = "0.12.1"

# The release segment of a version (PEP 440's N(.N)*, an optional leading
# "v"); anything after it (pre-, post-, dev-release or local parts) is not
# compared.
_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)")


def _release(version: str) -> tuple[int, ...]:
    if not isinstance(version, str):
        raise TypeError(f"version must be a str such as '0.10.2', not {type(version).__name__}")
    m = _RELEASE.match(version)
    if m is None:
        raise ValueError(f"version {version!r} does not start with a release number such as '0.10.2'")
    parts = [int(p) for p in m.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:  # 0.12 == 0.12.0
        parts.pop()
    return tuple(parts)


def newer_than_tested(version: str) -> bool:
    """Whether jax `version` (e.g. ``jax.__version__``) is a newer release
    than TESTED_JAX_UP_TO.

    Only the release numbers count: a pre-release or development build of a
    later release is newer ("0.13.0.dev20260101" after "0.12.1"); one of the
    tested release itself, or a post or local build of it, is not. Raises
    TypeError for a non-string and ValueError for a string that does not
    start with a release number."""
    return _release(version) > _release(TESTED_JAX_UP_TO)
