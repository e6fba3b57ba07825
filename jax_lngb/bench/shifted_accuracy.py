"""Accuracy of the LayerNorm forward on rows far from zero.

Rows x = c + s * N(0, 1) with offsets c from 1e3 to 1e7 times their spread
s, rounded to float32 (the input is what it is: the reference is the
float64 LayerNorm of those float32 values). Each implementation's error in
a row is the largest |y - y_ref| over the row; over `rows` rows per offset
we report the median and the worst row.

A float32 mean is one of the float32 values near c, spaced ulp(c) apart, so
even a correctly rounded mean can be off by ulp(c) / 2 and y by that times
rstd; an implementation whose sum of the raw values rounds at the scale of
H * c lands further off. Implementations:

  ours           jax_lngb.layer_norm (the C++ kernel on the CPU)
  ours-jnp       its jax.numpy lowering (other platforms), same formulas
  flax-two-pass  flax.linen.LayerNorm(use_fast_variance=False)
  flax           flax.linen.LayerNorm() (default: E[x^2] - E[x]^2)
  equinox        equinox.nn.LayerNorm under jax.vmap
  floor          not an implementation: the correctly rounded float32 mean
                 m, then the variance about m and the output in float64
                 (what a two-pass LayerNorm that keeps its mean in float32
                 attains at best; the variance about m is var + (m - mean)^2)

    PYTHONPATH=$PWD python -m jax_lngb.shifted_accuracy --rows 10000 --h 768
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

OFFSETS = (1e3, 1e4, 1e5, 1e6, 1e7)
EPSILON = 1e-5


def shifted_rows(rows: int, h: int, offset: float, seed: int = 0) -> np.ndarray:
    """float32 rows around `offset` with unit spread."""
    rng = np.random.default_rng(seed)
    return (offset + rng.standard_normal((rows, h))).astype(np.float32)


def implementations(h: int) -> dict[str, Callable[[jax.Array], jax.Array]]:
    """name -> jitted x [rows, h] float32 -> y, gamma = 1 and beta = 0; the
    upstream ones only where Flax / Equinox are installed."""
    from .. import layer_norm
    from .._ops.layer_norm.formulas import forward_jnp

    ones, zeros = jnp.ones((h,), jnp.float32), jnp.zeros((h,), jnp.float32)
    out: dict[str, Callable] = {
        "ours": jax.jit(lambda x: layer_norm(x, ones, zeros, epsilon=EPSILON)),
        "ours-jnp": jax.jit(lambda x: forward_jnp(x, ones, zeros, epsilon=EPSILON)[0]),
    }
    try:
        import flax.linen as nn

        for name, fast in (("flax-two-pass", False), ("flax", True)):
            m = nn.LayerNorm(epsilon=EPSILON, use_fast_variance=fast, use_scale=False, use_bias=False)
            out[name] = jax.jit(lambda x, m=m: m.apply({}, x))
    except ImportError:
        pass
    try:
        import equinox as eqx

        e = eqx.nn.LayerNorm(h, eps=EPSILON, use_weight=False, use_bias=False)
        out["equinox"] = jax.jit(jax.vmap(e))
    except ImportError:
        pass
    return out


def row_errors(y: jax.Array, x: np.ndarray) -> np.ndarray:
    """max over each row of |y - float64 LayerNorm(x)|."""
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    ref = (x64 - mean) / np.sqrt(var + EPSILON)
    return np.abs(np.asarray(y, np.float64) - ref).max(-1)


def measure(rows: int, h: int, offsets: Sequence[float] = OFFSETS) -> dict[float, dict[str, tuple[float, float]]]:
    """offset -> name -> (median row error, worst row error)."""
    impls = implementations(h)
    result = {}
    for i, c in enumerate(offsets):
        x = shifted_rows(rows, h, c, seed=i)
        xj = jnp.asarray(x)
        result[c] = {}
        for name, fn in impls.items():
            err = row_errors(fn(xj), x)
            result[c][name] = (float(np.median(err)), float(err.max()))
        x64 = x.astype(np.float64)
        m32 = x64.mean(-1, keepdims=True).astype(np.float32).astype(np.float64)
        floor = (x64 - m32) / np.sqrt(((x64 - m32) ** 2).mean(-1, keepdims=True) + EPSILON)
        err = row_errors(floor, x)
        result[c]["floor"] = (float(np.median(err)), float(err.max()))
    return result


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10000)
    p.add_argument("--h", type=int, default=768)
    a = p.parse_args(argv)
    res = measure(a.rows, a.h)
    names = list(next(iter(res.values())))
    print(f"LayerNorm forward, float32, H = {a.h}, {a.rows} rows per offset (unit spread), error vs float64:")
    print("median row error / worst row error (max |y - y_ref| over a row)")
    print("  offset  " + "".join(f"{n:>22s}" for n in names))
    for c, by in res.items():
        print(f"  {c:6.0e}  " + "".join(f"{by[n][0]:10.2e} /{by[n][1]:9.2e}" for n in names))


if __name__ == "__main__":
    main()
