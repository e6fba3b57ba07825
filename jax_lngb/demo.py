"""The main job: the product document's example, then a small training run.

Runs offline with nothing but jax, jaxlib and numpy.
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from .grad_beta import layer_norm_grad_beta
from .norm import layer_norm

# The document's [1, 8, 8] example: dy = res_for_gamma = 0..63.
DOC_PD_GAMMA = [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488]
DOC_PD_BETA = [224, 232, 240, 248, 256, 264, 272, 280]


def document_example() -> bool:
    x = jnp.arange(64, dtype=jnp.float32).reshape(1, 8, 8)
    pd_gamma, pd_beta = layer_norm_grad_beta(x, x)
    ok = np.array_equal(np.asarray(pd_gamma), DOC_PD_GAMMA) and np.array_equal(np.asarray(pd_beta), DOC_PD_BETA)
    print("LayerNormGradBeta, the document's [1, 8, 8] example (dy = res_for_gamma = 0..63):")
    print(f"  pd_gamma = {np.asarray(pd_gamma).astype(int).tolist()}")
    print(f"  pd_beta  = {np.asarray(pd_beta).astype(int).tolist()}")
    print(f"  matches the document: {'yes' if ok else 'NO'}")
    return ok


def _init(key, d_in: int, d_hidden: int, d_out: int):
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (d_in, d_hidden)) / np.sqrt(d_in),
        "b1": jnp.zeros(d_hidden),
        "gamma": jnp.ones(d_hidden),
        "beta": jnp.zeros(d_hidden),
        "w2": jax.random.normal(k2, (d_hidden, d_out)) / np.sqrt(d_hidden),
    }


def _model(params, x):
    h = x @ params["w1"] + params["b1"]
    h = layer_norm(h, params["gamma"], params["beta"])
    return jax.nn.gelu(h) @ params["w2"]


def _loss(params, x, y):
    return jnp.mean(jnp.square(_model(params, x) - y))


def train(steps: int = 300, batch: int = 256, lr: float = 0.05, seed: int = 0) -> tuple[float, float, float]:
    """Fits a 2-layer MLP with LayerNorm to a fixed random teacher."""
    d_in, d_hidden, d_out = 32, 128, 8
    key = jax.random.PRNGKey(seed)
    k_teacher, k_init, k_data = jax.random.split(key, 3)
    teacher = _init(k_teacher, d_in, d_hidden, d_out)
    params = _init(k_init, d_in, d_hidden, d_out)

    @jax.jit
    def step(params, key):
        x = jax.random.normal(key, (batch, d_in))
        y = _model(teacher, x)
        loss, grads = jax.value_and_grad(_loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss

    keys = jax.random.split(k_data, steps)
    params, first = step(params, keys[0])
    jax.block_until_ready(params)
    t0 = time.perf_counter()
    loss = first
    for i in range(1, steps):
        params, loss = step(params, keys[i])
        if i % 25 == 0 or i == steps - 1:
            print(f"\r  step {i:4d}/{steps - 1}  loss {float(loss):.5f}", end="", flush=True)
    jax.block_until_ready(params)
    per_step = (time.perf_counter() - t0) / max(steps - 1, 1)
    print()
    return float(first), float(loss), per_step


def main(argv: list[str] | None = None) -> int:
    ok = document_example()
    print("\nTraining an MLP with jax_lngb.layer_norm (jitted SGD step, synthetic data):")
    first, last, per_step = train()
    print(f"  loss {first:.5f} -> {last:.5f}; {per_step * 1e3:.2f} ms per step on {jax.devices()[0].platform}")
    falling = last < 0.5 * first
    print(f"  loss fell: {'yes' if falling else 'NO'}")
    return 0 if ok and falling else 1


if __name__ == "__main__":
    sys.exit(main())
