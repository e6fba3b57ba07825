"""The main job (`jax-lngb`): what the package is for, in under a minute.

1. LayerNormGradBeta on the product document's [1, 8, 8] example.
2. A jitted training step of a small pre-LN transformer-style model
   (residual blocks of LayerNorm -> MLP, then a final LayerNorm), trained
   twice from the same initialisation: once with `jax_lngb.layer_norm` and
   `jax_lngb.add_layer_norm` (each residual add fused with the LayerNorm
   after it), once with the plain `jax.numpy` add and LayerNorm that XLA
   differentiates. The
   two loss curves must agree; the step times and the share of the step
   spent in LayerNorm show what the kernels buy inside a real step.
3. LayerNorm forward+backward alone at a realistic size, ours against XLA
   autodiff, with the gradients' agreement.

The exit status is about correctness only (the example's numbers, the
loss agreement, the gradients' agreement), never about speed: timings on a
shared machine are evidence, not a test. Runs offline with nothing but jax,
jaxlib and numpy.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import host_memory
from .._ops.add_norm.api import add_layer_norm
from .._ops.grad_beta import layer_norm_grad_beta
from .._ops.layer_norm.api import layer_norm, layer_norm_jnp

# The document's [1, 8, 8] example: dy = res_for_gamma = 0..63.
DOC_PD_GAMMA = [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488]
DOC_PD_BETA = [224, 232, 240, 248, 256, 264, 272, 280]

# Two float32 trainings that differ only in how LayerNorm rounds drift apart
# slowly; this bounds how far the losses may differ, relative to the loss.
LOSS_RTOL = 1e-3
# Gradients of one LayerNorm fwd+bwd against XLA's, relative to the largest
# gradient entry (float32 sums over many rows in another order).
GRAD_RTOL = 1e-4

LayerNormFn = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]
AddLayerNormFn = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


class Norms(NamedTuple):
    """A model's two norm forms: LayerNorm, and the residual add fused with
    the LayerNorm that follows it (`y, h = add_ln(x, residual, gamma, beta)`)."""

    ln: LayerNormFn
    add_ln: AddLayerNormFn


def _add_layer_norm_jnp(x, residual, gamma, beta):
    h = x + residual
    return layer_norm_jnp(h, gamma, beta), h


IMPLEMENTATIONS: dict[str, Norms] = {
    "jax_lngb": Norms(layer_norm, add_layer_norm),
    "jax.numpy": Norms(layer_norm_jnp, _add_layer_norm_jnp),
}


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes of the demo; `quick` is the test suite's small version."""

    tokens: int  # rows per training step (batch x sequence, flattened)
    width: int  # model width = LayerNorm's H
    hidden: int  # MLP hidden width
    blocks: int  # pre-LN residual blocks (each has one LayerNorm, plus one final LayerNorm)
    steps: int  # training steps per implementation
    ln_rows: int  # part 3: LayerNorm alone at [ln_rows, ln_width]
    ln_width: int
    reps: int  # timed calls in part 3

    @property
    def layer_norms(self) -> int:
        return self.blocks + 1


FULL = Config(tokens=8192, width=512, hidden=512, blocks=1, steps=15, ln_rows=65536, ln_width=768, reps=5)
QUICK = Config(tokens=512, width=512, hidden=512, blocks=1, steps=6, ln_rows=2048, ln_width=512, reps=2)


def document_example() -> bool:
    x = jnp.arange(64, dtype=jnp.float32).reshape(1, 8, 8)
    pd_gamma, pd_beta = layer_norm_grad_beta(x, x)
    ok = np.array_equal(np.asarray(pd_gamma), DOC_PD_GAMMA) and np.array_equal(np.asarray(pd_beta), DOC_PD_BETA)
    print("1. LayerNormGradBeta on the document's [1, 8, 8] example (dy = res_for_gamma = 0..63):")
    print(f"   pd_gamma = {np.asarray(pd_gamma).astype(int).tolist()}")
    print(f"   pd_beta  = {np.asarray(pd_beta).astype(int).tolist()}")
    print(f"   matches the document: {'yes' if ok else 'NO'}")
    return ok


# ---------------------------------------------------------------- the model


def init_params(key: jax.Array, cfg: Config) -> dict[str, Any]:
    keys = jax.random.split(key, 2 * cfg.blocks + 1)
    blocks = []
    for b in range(cfg.blocks):
        blocks.append(
            {
                "gamma": jnp.ones(cfg.width),
                "beta": jnp.zeros(cfg.width),
                "w1": jax.random.normal(keys[2 * b], (cfg.width, cfg.hidden)) / np.sqrt(cfg.width),
                "b1": jnp.zeros(cfg.hidden),
                "w2": jax.random.normal(keys[2 * b + 1], (cfg.hidden, cfg.width)) / np.sqrt(cfg.hidden),
            }
        )
    return {
        "blocks": blocks,
        "gamma": jnp.ones(cfg.width),
        "beta": jnp.zeros(cfg.width),
        "head": jax.random.normal(keys[-1], (cfg.width, 8)) / np.sqrt(cfg.width),
    }


def forward(params: dict[str, Any], x: jax.Array, norms: Norms) -> jax.Array:
    """Pre-LN residual blocks, h = h + MLP(LayerNorm(h)), a final LayerNorm, a
    linear head. Each block's residual add and the LayerNorm after it (the
    next block's, or the final one) are one `add_ln`, as a transformer
    block written with `jax_lngb.add_layer_norm` does it."""
    blocks = params["blocks"]
    norm_params = [(b["gamma"], b["beta"]) for b in blocks[1:]] + [(params["gamma"], params["beta"])]
    h = x
    u = norms.ln(h, blocks[0]["gamma"], blocks[0]["beta"]) if blocks else norms.ln(h, *norm_params[-1])
    for blk, (gamma, beta) in zip(blocks, norm_params):
        delta = jax.nn.gelu(u @ blk["w1"] + blk["b1"]) @ blk["w2"]
        u, h = norms.add_ln(delta, h, gamma, beta)
    return u @ params["head"]


def make_step(norms: Norms, lr: float = 0.05) -> Callable[..., tuple[Any, jax.Array]]:
    """A plain `jax.jit` SGD step, as a user would write it (nothing donated)."""

    def loss_fn(params, x, y):
        return jnp.mean(jnp.square(forward(params, x, norms) - y))

    @jax.jit
    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss

    return step


@dataclasses.dataclass
class Run:
    losses: list[float]
    times: list[float]

    @property
    def step_ms(self) -> float:
        """Median over the steps after the first (which compiles)."""
        return 1e3 * statistics.median(self.times[1:])


def train(cfg: Config, params: dict[str, Any], batches: list[tuple[jax.Array, jax.Array]]) -> dict[str, Run]:
    """Trains one copy of `params` per LayerNorm implementation, in lockstep
    (a step of each in turn), so both see the same machine load."""
    steps = {name: make_step(norms) for name, norms in IMPLEMENTATIONS.items()}
    state = {name: params for name in IMPLEMENTATIONS}
    runs = {name: Run([], []) for name in IMPLEMENTATIONS}
    line = ""
    for i, (x, y) in enumerate(batches):
        for name, step in steps.items():
            t0 = time.perf_counter()
            state[name], loss = step(state[name], x, y)
            runs[name].losses.append(float(loss))  # float() waits for the step
            runs[name].times.append(time.perf_counter() - t0)
        line = f"   step {i + 1:3d}/{len(batches)}  loss " + "  ".join(
            f"{name} {r.losses[-1]:.6f} ({1e3 * r.times[-1]:.0f} ms)" for name, r in runs.items()
        )
        if sys.stdout.isatty():  # one line that updates in place
            print(f"\r{line}", end="", flush=True)
    print(f"\r{line}" if sys.stdout.isatty() else line)
    return runs


def layer_norm_fwd_bwd(ln: LayerNormFn) -> Callable[..., Any]:
    """One LayerNorm forward and backward (y, dx, dgamma, dbeta), jitted."""

    def f(x, gamma, beta, dy):
        y, vjp = jax.vjp(ln, x, gamma, beta)
        return (y, *vjp(dy))

    return jax.jit(f)


def time_call(fn: Callable[..., Any], args: tuple, reps: int) -> tuple[float, Any]:
    """Median milliseconds of `reps` calls after one untimed call, and the last result."""
    out = jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times), out


def layer_norm_inputs(key: jax.Array, rows: int, width: int) -> tuple[jax.Array, ...]:
    kx, kg, kb, kd = jax.random.split(key, 4)
    return (
        jax.random.normal(kx, (rows, width)),
        1 + 0.1 * jax.random.normal(kg, (width,)),
        0.1 * jax.random.normal(kb, (width,)),
        jax.random.normal(kd, (rows, width)),
    )


def training_comparison(cfg: Config) -> bool:
    print(
        f"\n2. A pre-LN transformer-style model ({cfg.blocks} block{'s' * (cfg.blocks != 1)} of LayerNorm -> MLP "
        f"{cfg.width}->{cfg.hidden}"
        f"->{cfg.width} with residuals, a final LayerNorm; {cfg.tokens} tokens per step), trained for "
        f"{cfg.steps} jitted SGD steps twice from the same initialisation:"
    )
    key = jax.random.PRNGKey(0)
    k_teacher, k_init, k_data = jax.random.split(key, 3)
    teacher = init_params(k_teacher, cfg)
    params = init_params(k_init, cfg)
    batches = []
    for k in jax.random.split(k_data, cfg.steps):
        x = jax.random.normal(k, (cfg.tokens, cfg.width))
        batches.append((x, forward(teacher, x, IMPLEMENTATIONS["jax.numpy"])))
    runs = train(cfg, params, batches)

    ours, xla = runs["jax_lngb"], runs["jax.numpy"]
    diffs = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(ours.losses, xla.losses)]
    agree = max(diffs) <= LOSS_RTOL and ours.losses[-1] < ours.losses[0]
    print(
        f"   loss {xla.losses[0]:.6f} -> {xla.losses[-1]:.6f}; largest difference between the two curves "
        f"{max(diffs):.2e} of the loss (allowed {LOSS_RTOL:g}): {'agree' if agree else 'DISAGREE'}"
    )

    # LayerNorm's share: the step's LayerNorm calls timed alone, at the step's shape.
    inputs = layer_norm_inputs(jax.random.PRNGKey(1), cfg.tokens, cfg.width)
    for name, run in runs.items():
        ln_ms, _ = time_call(layer_norm_fwd_bwd(IMPLEMENTATIONS[name].ln), inputs, max(cfg.reps, 3))
        share = min(1.0, cfg.layer_norms * ln_ms / run.step_ms)
        print(
            f"   {name:9s} {run.step_ms:8.2f} ms per step; its {cfg.layer_norms} LayerNorms (fwd+bwd, timed alone) "
            f"{cfg.layer_norms * ln_ms:7.2f} ms, {100 * share:4.1f}% of the step"
        )
    print(f"   step time jax.numpy / jax_lngb: {xla.step_ms / ours.step_ms:.2f}x")
    return agree


def layer_norm_alone(cfg: Config) -> bool:
    print(f"\n3. LayerNorm forward+backward alone at [{cfg.ln_rows}, {cfg.ln_width}] float32 (y, dx, dgamma, dbeta):")
    inputs = layer_norm_inputs(jax.random.PRNGKey(2), cfg.ln_rows, cfg.ln_width)
    ours_ms, ours = time_call(layer_norm_fwd_bwd(layer_norm), inputs, cfg.reps)
    xla_ms, xla = time_call(layer_norm_fwd_bwd(layer_norm_jnp), inputs, cfg.reps)
    # The same plain-jit call without, then with, the opt-in that keeps
    # freed host memory mapped (jax_lngb.retain_host_memory): fresh output
    # buffers otherwise cost page faults on every call.
    fn = layer_norm_fwd_bwd(layer_norm)
    both = host_memory.time_both_ways(lambda: jax.block_until_ready(fn(*inputs)), calls=cfg.reps)
    if both["off_ms"] is not None and both["on_ms"] is not None:
        print(
            f"   jax_lngb without / with retain_host_memory(): {both['off_ms']:.2f} / {both['on_ms']:.2f} ms "
            f"({both['faults_off']:.0f} / {both['faults_on']:.0f} page faults per call)"
        )
    else:
        print(f"   retain_host_memory(): {both['reason']}")
    worst = 0.0
    for a, b in zip(ours, xla):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        worst = max(worst, float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30)))
    ok = worst <= GRAD_RTOL
    print(f"   jax_lngb {ours_ms:8.2f} ms, XLA autodiff of jax.numpy {xla_ms:8.2f} ms: {xla_ms / ours_ms:.1f}x faster")
    print(
        f"   outputs and gradients agree with XLA's to {worst:.1e} of their largest entry "
        f"(allowed {GRAD_RTOL:g}): {'yes' if ok else 'NO'}"
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="jax-lngb demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds (what the tests run)")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    print(f"jax_lngb demo on {jax.devices()[0].platform} ({jax.device_count()} device(s), jax {jax.__version__})")
    print(f"host memory retention: {host_memory.summary()}\n")
    results = [document_example(), training_comparison(cfg), layer_norm_alone(cfg)]
    ok = all(results)
    print(f"\n{'all checks passed' if ok else 'A CHECK FAILED'} (the exit status reflects correctness only, not speed)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
