"""Equinox's per-example LayerNorm and RMSNorm under jax.vmap(jax.vmap(layer)), full VJP.

Times, for x of shape [B, T, H], one jitted call that returns y, dx,
dweight and dbias (every output of the VJP used) for, with --norm layer:

  eqx-dropin   jax.vmap(jax.vmap(jax_lngb.equinox.LayerNorm(H)))
  eqx          jax.vmap(jax.vmap(equinox.nn.LayerNorm(H)))  (XLA autodiff)
  flat         jax_lngb.layer_norm on x reshaped to [B * T, H]

and with --norm rms (both by default, one table per norm and dtype):

  eqx-dropin   jax.vmap(jax.vmap(jax_lngb.equinox.RMSNorm(H)))
  eqx          jax.vmap(jax.vmap(equinox.nn.RMSNorm(H)))  (XLA autodiff)
  flat         jax_lngb.rms_norm on x reshaped to [B * T, H], plus the bias
               added in float32 before the one rounding, as the drop-in does
               (Equinox's RMSNorm has a bias by default)

Rounds interleave the implementations (each round in a rotated order), with a 50 ms busy pause before each
timed call (what one implementation leaves behind, XLA's temporaries above
all, otherwise slows the next one); the figure is the median of the timed
calls. Also checks that the three agree (max abs difference of each
output against the flat call, in float32).

    python -m jax_lngb.bench.equinox_vmap --shape 16x512x768 --dtypes f32 bf16 --reps 20 [--norm layer rms]

(needs Equinox)
"""

from __future__ import annotations

import argparse
import statistics
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jax_lngb
import jax_lngb.equinox as je

DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16}


def _nested(model, x, ct):
    y, back = jax.vjp(lambda m, x: jax.vmap(jax.vmap(m))(x), model, x)
    dm, dx = back(ct)
    return y, dx, dm.weight, dm.bias


def _flat(model, x, ct):
    h = x.shape[-1]

    def f(g, b, x):
        return jax_lngb.layer_norm(x.reshape(-1, h), g, b, epsilon=model.eps).reshape(x.shape)

    y, back = jax.vjp(f, model.weight, model.bias, x)
    dg, db, dx = back(ct)
    return y, dx, dg, db


def _flat_rms(model, x, ct):
    h = x.shape[-1]

    def f(g, b, x):
        # The drop-in's arithmetic with a bias: float32 in, bias added in
        # float32, one rounding to x's dtype; the same work minus the vmaps.
        y = jax_lngb.rms_norm(x.astype(jnp.float32).reshape(-1, h), g, epsilon=model.eps) + b
        return y.reshape(x.shape).astype(x.dtype)

    y, back = jax.vjp(f, model.weight, model.bias, x)
    dg, db, dx = back(ct)
    return y, dx, dg, db


def _settle(seconds=0.05):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


# norm -> (title, Equinox layer class, flat call)
NORMS = {
    "layer": ("LayerNorm", eqx.nn.LayerNorm, _flat),
    "rms": ("RMSNorm", eqx.nn.RMSNorm, _flat_rms),
}


def run(shape, dtype, reps, warmup, norm="layer"):
    b, t, h = shape
    title, layer_cls, flat = NORMS[norm]
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(shape).astype(np.float32)).astype(dtype)
    ct = jnp.asarray(rng.standard_normal(shape).astype(np.float32)).astype(dtype)
    theirs = layer_cls(h)
    theirs = eqx.tree_at(
        lambda m: (m.weight, m.bias),
        theirs,
        (
            jnp.asarray(1 + 0.1 * rng.standard_normal(h), jnp.float32),
            jnp.asarray(0.1 * rng.standard_normal(h), jnp.float32),
        ),
    )
    ours = je.convert(theirs)
    impls = {
        "eqx-dropin": (jax.jit(_nested), ours),
        "eqx": (jax.jit(_nested), theirs),
        "flat": (jax.jit(flat), ours),
    }
    outs = {}
    for name, (fn, model) in impls.items():
        for _ in range(warmup):
            outs[name] = jax.block_until_ready(fn(model, x, ct))
    times = {name: [] for name in impls}
    names = list(impls)
    for r in range(reps):
        # Each round in another order: no implementation always follows the same one.
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn, model = impls[name]
            _settle()
            t0 = time.perf_counter()
            jax.block_until_ready(fn(model, x, ct))
            times[name].append(time.perf_counter() - t0)
    ref = outs["flat"]
    print(f"{title} [{b}, {t}, {h}] {np.dtype(dtype).name}, full VJP (y, dx, dweight, dbias), median of {reps}")
    print("  impl          ms   vs flat   vs eqx   max |diff| vs flat (y, dx, dw, db)")
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    diffs = {}
    for name in impls:
        diffs[name] = [
            float(np.abs(np.asarray(a, np.float32) - np.asarray(r, np.float32)).max()) for a, r in zip(outs[name], ref)
        ]
        print(
            f"  {name:11s} {med[name]:7.2f}  {med[name] / med['flat']:6.2f}x  {med[name] / med['eqx']:6.2f}x   "
            + ", ".join(f"{d:.2e}" for d in diffs[name])
        )
    return med, diffs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="16x512x768")
    p.add_argument("--dtypes", nargs="+", default=["f32", "bf16"], choices=sorted(DTYPES))
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--norm", nargs="+", default=["layer", "rms"], choices=list(NORMS))
    a = p.parse_args(argv)
    shape = tuple(int(s) for s in a.shape.split("x"))
    assert len(shape) == 3, "--shape is BxTxH"
    print(f"jax {jax.__version__}, equinox {eqx.__version__}, kernel ISA {jax_lngb._core.native.cpu_isa()}")
    for norm in a.norm:
        for d in a.dtypes:
            run(shape, DTYPES[d], a.reps, a.warmup, norm)


if __name__ == "__main__":
    main()
