"""rms_norm beyond one CPU device, in child interpreters (both need JAX
state this process must not carry):

* a mesh of 4 forced host devices with the rows sharded: every device runs
  the kernels on its own rows, dgamma's float32 partials are all-reduced,
  nothing is gathered, and the results match one device's;
* an Ascend platform (a stand-in backend, as in test_ascend_lowering): the
  exported gradient of rms_norm sends its dgamma reduction, fused and
  chained alike, through the AscendC LayerNormGradBeta custom call, while
  the forward and dx are jax.numpy."""

from __future__ import annotations

import json

from conftest import run_python

MESH = r"""
import os, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import jax_lngb
mesh = jax.make_mesh((4,), ("data",))
rng = np.random.default_rng(3)
out = {}
for mode in ("fused", "chained"):
    for dt in ("float32", "bfloat16"):
        x = rng.standard_normal((64, 8, 96)).astype(np.float32).astype(jnp.dtype(dt))
        g = (1 + 0.1 * rng.standard_normal(96)).astype(np.float32)
        loss = lambda x, g: jnp.sum(jnp.sin(jax_lngb.rms_norm(x, g, backward=mode).astype(jnp.float32)))
        step = jax.jit(jax.value_and_grad(loss, (0, 1)))
        xs = jax.device_put(x, NamedSharding(mesh, P("data", None, None)))
        gs = jax.device_put(g, NamedSharding(mesh, P()))
        hlo = step.lower(xs, gs).compile().as_text()
        v, (dx, dg) = step(xs, gs)
        v1, (dx1, dg1) = step(jax.device_put(x, jax.devices()[0]), jax.device_put(g, jax.devices()[0]))
        out[f"{mode}-{dt}"] = dict(
            all_gather=hlo.count("all-gather"), all_reduce=hlo.count("all-reduce"),
            custom_calls=[t for t in ("jax_lngb_rms_norm_forward", "jax_lngb_rms_norm_backward", "jax_lngb_rms_norm_grad", "jax_lngb_layer_norm_grad_beta") if t in hlo],
            dx_sharding=str(dx.sharding.spec),
            dx_equal=bool(np.array_equal(np.asarray(dx.astype(jnp.float32)), np.asarray(dx1.astype(jnp.float32)))),
            dg_err=float(np.max(np.abs(np.asarray(dg) - np.asarray(dg1)))), dg_max=float(np.max(np.abs(np.asarray(dg1)))),
        )
print("RESULT " + json.dumps(out))
"""

ASCEND = r"""
import json, re
import jax, jax.numpy as jnp
from jax import export
from jax._src import xla_bridge
def factory():
    raise RuntimeError("stand-in backend: there is no NPU here")
xla_bridge.register_backend_factory("ascend", factory, priority=-1000)
import jax_lngb
checks = jax_lngb.export.disabled_safety_checks() + [export.DisabledSafetyCheck.custom_call(jax_lngb.ascend.FFI_TARGET)]
out = {}
for mode in ("fused", "chained"):
    for dt in ("float32", "float16"):
        loss = lambda x, g: jnp.sum(jax_lngb.rms_norm(x, g, backward=mode).astype(jnp.float32) ** 2)
        f = jax.jit(jax.grad(loss, (0, 1)))
        exp = export.export(f, platforms=["ascend"], disabled_checks=checks)(
            jax.ShapeDtypeStruct((64, 128), jnp.dtype(dt)), jax.ShapeDtypeStruct((128,), jnp.float32))
        text = exp.mlir_module()
        out[f"{mode}-{dt}"] = sorted(set(re.findall(r"stablehlo\.custom_call @(\w+)", text)))
print("RESULT " + json.dumps(out))
"""


def child(code: str) -> dict:
    proc = run_python(code)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def test_row_sharded_mesh_gathers_nothing():
    res = child(MESH)
    assert len(res) == 4
    for name, r in res.items():
        assert r["all_gather"] == 0, (name, r)
        assert r["all_reduce"] >= 1, (name, r)  # dgamma's partials (and the loss)
        want = ["jax_lngb_rms_norm_forward"] + (
            ["jax_lngb_rms_norm_backward"]
            if name.startswith("fused")
            else ["jax_lngb_rms_norm_grad", "jax_lngb_layer_norm_grad_beta"]
        )
        assert set(r["custom_calls"]) == set(want), (name, r)
        assert "data" in r["dx_sharding"], (name, r)
        # dx is per row: the same bits; dgamma adds four float32 partials.
        assert r["dx_equal"], (name, r)
        assert r["dg_err"] <= 4e-6 * r["dg_max"], (name, r)


def test_ascend_runs_the_rms_norm_kernels_and_dgamma_on_layer_norm_grad_beta():
    # Fused: the AscendC RMSNorm forward and backward (whose dgamma is
    # LayerNormGradBeta inside the kernel). Chained: the forward kernel, dx
    # in jax.numpy and dgamma through LayerNormGradBeta's own AscendC call.
    res = child(ASCEND)
    assert len(res) == 4
    for name, targets in res.items():
        if name.startswith("fused"):
            assert targets == ["jax_lngb_ascend_rms_norm_backward", "jax_lngb_ascend_rms_norm_forward"], (name, targets)
        else:
            assert targets == ["jax_lngb_ascend_layer_norm_grad_beta", "jax_lngb_ascend_rms_norm_forward"], (
                name,
                targets,
            )
