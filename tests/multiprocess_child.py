"""One process of the data-parallel run of test_multiprocess.py.

Usage: python multiprocess_child.py PROCESS_ID NUM_PROCESSES PORT WORKDIR.
Joins the others through jax.distributed (CPU collectives over gloo), builds
the global batch from WORKDIR/inputs.npz (each process fills only its own
devices' shards), runs STEPS jitted SGD steps of a LayerNorm model with the
batch split over every device of every process, and (process 0) writes the
first step's loss and gradients, the final parameters and facts about the
compiled step to WORKDIR/result.npz and WORKDIR/result.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jax_lngb  # before jax.distributed.initialize, as users import it

STEPS = 3
LR = 0.1


def loss_fn(params, x, target):
    y = jax_lngb.layer_norm(x, *params)
    return 0.5 * jnp.mean(jnp.square(y.astype(jnp.float32) - target))


def train_step(params, x, target):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, target)
    return loss, grads, jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)


def main(process_id: int, num_processes: int, port: int, workdir: str) -> None:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=num_processes,
        process_id=process_id,
        initialization_timeout=120,
    )
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    work = Path(workdir)
    data = dict(np.load(work / "inputs.npz"))
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rows = NamedSharding(mesh, PartitionSpec("data"))
    rep = NamedSharding(mesh, PartitionSpec())

    def global_array(a, sharding, dtype):
        a = np.asarray(a).astype(dtype)
        return jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])

    x = global_array(data["x"], rows, jnp.bfloat16)
    target = global_array(data["target"], rows, np.float32)
    params = (global_array(data["gamma"], rep, np.float32), global_array(data["beta"], rep, np.float32))

    step = jax.jit(train_step)
    hlo = step.lower(params, x, target).compile().as_text()
    first = None
    for _ in range(STEPS):
        loss, grads, params = step(params, x, target)
        if first is None:
            first = (loss, *grads)
    local = lambda a: np.asarray(a.addressable_data(0), np.float32)  # replicated: every shard is whole
    if process_id == 0:
        np.savez(
            work / "result.npz",
            loss=local(first[0]),
            dgamma=local(first[1]),
            dbeta=local(first[2]),
            gamma=local(params[0]),
            beta=local(params[1]),
        )
        (work / "result.json").write_text(
            json.dumps(
                {
                    "process_count": jax.process_count(),
                    "device_count": jax.device_count(),
                    "local_device_count": jax.local_device_count(),
                    "all_gather": hlo.count(" all-gather(") + hlo.count(" all-gather-start("),
                    "all_reduce": hlo.count(" all-reduce(") + hlo.count(" all-reduce-start("),
                }
            )
        )
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
