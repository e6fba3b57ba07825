"""Shared test helpers: dtypes, random data, and error bounds derived from
float32 accumulation."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import jax.numpy as jnp
import numpy as np
import pytest

DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16]
DTYPE_IDS = ["f32", "f16", "bf16"]

U32 = 2.0**-24  # unit roundoff of float32
UNIT_ROUNDOFF = {
    np.dtype(jnp.float32): 2.0**-24,
    np.dtype(jnp.float16): 2.0**-11,
    np.dtype(jnp.bfloat16): 2.0**-8,
}


# Half the smallest subnormal: the absolute rounding error near zero.
HALF_MIN_SUBNORMAL = {
    np.dtype(jnp.float32): 2.0**-150,
    np.dtype(jnp.float16): 2.0**-25,
    np.dtype(jnp.bfloat16): 2.0**-134,
}


def unit_roundoff(dtype) -> float:
    return UNIT_ROUNDOFF[np.dtype(dtype)]


def random_array(rng: np.random.Generator, shape, dtype, scale: float = 1.0) -> np.ndarray:
    """Random normals already rounded to `dtype` (returned as that dtype)."""
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)


def assert_sums_close(got, ref, abs_terms_sum, n_terms: int, out_dtype, what: str = "") -> None:
    """Checks a float32-accumulated sum against its float64 reference.

    Each product is rounded once and each of at most n additions once, so the
    accumulation error is at most gamma_{n+1} * sum|terms| (Higham, with
    gamma_k = k u / (1 - k u)); narrowing to out_dtype adds half an ulp of
    the (perturbed) result, or half the smallest subnormal near zero.
    """
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    k = (n_terms + 1) * U32
    acc_err = k / (1 - k) * abs_terms_sum
    bound = acc_err + unit_roundoff(out_dtype) * (np.abs(ref) + acc_err) + HALF_MIN_SUBNORMAL[np.dtype(out_dtype)]
    err = np.abs(got - ref)
    bad = ~(err <= bound)
    assert not bad.any(), (
        f"{what}: {bad.sum()} of {bad.size} values exceed the bound; worst err {err[bad].max()} "
        f"vs bound {bound[bad][np.argmax(err[bad])]}"
    )


def run_python(code: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter with the test's environment.

    The child starts in a neutral folder: `python -c` puts its working
    folder first on sys.path, and from the repository root that would import
    the sources (which lack the compiled extension) instead of the package
    under test.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tempfile.gettempdir(),
    )


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
