"""`jax.export` of jitted training steps that run our kernels: the custom-call
targets to allow, serialization round trips (here and in a fresh process),
symbolic batch sizes, several platforms (Ascend included, from this CPU
machine), and multi-device exports."""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import run_python
from jax import export as jax_export

import jax_lngb

H, S = 64, 8
TARGET = "jax_lngb_layer_norm_grad_beta"
# What layer_norm's training step runs: the forward and the fused backward.
LAYER_NORM_TARGETS = ("jax_lngb_layer_norm_forward", "jax_lngb_layer_norm_backward")


def loss(params, x, target):
    y = jax_lngb.layer_norm(x, *params)
    return 0.5 * jnp.mean(jnp.square(y.astype(jnp.float32) - target))


def train_step(params, x, target):
    value, grads = jax.value_and_grad(loss)(params, x, target)
    return value, grads, jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


STEP = jax.jit(train_step)
PER_EXAMPLE = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
GRAD_BETA_F32 = jax.jit(lambda res, dy, _: jax_lngb.layer_norm_grad_beta(res, dy, out_dtype=jnp.float32))
FUNCTIONS = {"train_step": STEP, "per_example_grads": PER_EXAMPLE, "grad_beta_bf16_to_f32": GRAD_BETA_F32}
EXPECTED_TARGETS = {
    "train_step": LAYER_NORM_TARGETS,
    "per_example_grads": LAYER_NORM_TARGETS,
    "grad_beta_bf16_to_f32": (TARGET,),
}


def specs(batch):
    """(params, x, target) shapes with the given (possibly symbolic) batch."""
    p = jax.ShapeDtypeStruct((H,), jnp.float32)
    return (p, p), jax.ShapeDtypeStruct((batch, S, H), jnp.bfloat16), jax.ShapeDtypeStruct((batch, S, H), jnp.float32)


def grad_beta_specs(batch):
    r = jax.ShapeDtypeStruct((batch, S, H), jnp.bfloat16)
    return r, r, jax.ShapeDtypeStruct((), jnp.float32)


def arguments(name, batch, seed=0):
    rng = np.random.default_rng(seed + batch)
    x = jnp.asarray(rng.standard_normal((batch, S, H)) * 2 + 0.5, jnp.bfloat16)
    if name == "grad_beta_bf16_to_f32":
        return x, jnp.asarray(rng.standard_normal((batch, S, H)), jnp.bfloat16), jnp.float32(0)
    params = (jnp.asarray(np.linspace(0.5, 1.5, H), jnp.float32), jnp.asarray(np.linspace(-1, 1, H), jnp.float32))
    return params, x, jnp.asarray(rng.standard_normal((batch, S, H)), jnp.float32)


def symbolic_specs(name):
    (b,) = jax_export.symbolic_shape("b")
    return grad_beta_specs(b) if name == "grad_beta_bf16_to_f32" else specs(b)


def custom_call_names(mlir_text: str) -> set[str]:
    return set(re.findall(r"stablehlo\.custom_call @([\w.]+)", mlir_text))


def test_targets_are_the_registered_handlers():
    targets = jax_lngb.export.custom_call_targets()
    assert TARGET in targets and list(targets) == sorted(targets)
    # every platform's: the Ascend kernels too, though this machine has no NPU
    assert jax_lngb.ascend.FFI_TARGET in targets
    from jax_lngb._ops.primitives import ASCEND_TARGETS

    assert "jax_lngb_ascend_layer_norm_forward" in ASCEND_TARGETS
    assert {"jax_lngb_ascend_rms_norm_forward", "jax_lngb_ascend_rms_norm_backward"} <= set(ASCEND_TARGETS)
    assert set(targets) == {*jax_lngb._core.native.register_cpu_targets(), *ASCEND_TARGETS}
    checks = jax_lngb.export.disabled_safety_checks()
    assert len(checks) == len(targets)
    assert all(isinstance(c, jax_export.DisabledSafetyCheck) for c in checks)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_targets_cover_every_custom_call_we_emit(name):
    text = FUNCTIONS[name].lower(*arguments(name, 2)).as_text()
    ours = {t for t in custom_call_names(text) if t.startswith("jax_lngb")}
    assert ours and ours <= set(jax_lngb.export.custom_call_targets()), ours


def test_plain_export_refuses_our_custom_call():
    with pytest.raises(ValueError, match="|".join(LAYER_NORM_TARGETS)):
        jax_export.export(STEP)(*specs(4))
    with pytest.raises(ValueError, match=TARGET):
        jax_export.export(GRAD_BETA_F32)(*grad_beta_specs(4))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_round_trip_with_symbolic_batch(name):
    exp = jax_lngb.export.export(FUNCTIONS[name])(*symbolic_specs(name))
    assert set(EXPECTED_TARGETS[name]) <= custom_call_names(exp.mlir_module())
    assert "b" in str(exp.in_avals)
    restored = jax_export.deserialize(exp.serialize())
    for batch in (1, 3, 6):
        args = arguments(name, batch)
        got, want = restored.call(*args), FUNCTIONS[name](*args)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            assert g.shape == w.shape and g.dtype == w.dtype
            # The same kernels on the same shapes: the same bits.
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_the_wrapper_and_the_explicit_checks_agree():
    a = jax_lngb.export.export(STEP)(*specs(2))
    b = jax_export.export(STEP, disabled_checks=jax_lngb.export.disabled_safety_checks())(*specs(2))
    assert a.mlir_module() == b.mlir_module()


def test_wrapper_wants_a_jitted_function():
    with pytest.raises(TypeError, match="jax.jit"):
        jax_lngb.export.export(train_step)


def test_export_for_cpu_and_cuda_runs_on_cpu():
    exp = jax_lngb.export.export(STEP, platforms=("cpu", "cuda"))(*symbolic_specs("train_step"))
    assert exp.platforms == ("cpu", "cuda")
    args = arguments("train_step", 2)
    got = jax_export.deserialize(exp.serialize()).call(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(STEP(*args))):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


ASCEND_EXPORT = r"""
import json, numpy as np, jax, jax.numpy as jnp
from jax import export
import jax_lngb
jax_lngb.ascend.register_platform("ascend")
spec = jax.ShapeDtypeStruct((2, 8, 64), jnp.float32)
f = jax.jit(jax_lngb.layer_norm_grad_beta)
out = {}
for name, platforms in (("ascend", ["ascend"]), ("cpu_ascend", ["cpu", "ascend"])):
    exp = jax_lngb.export.export(f, platforms=platforms)(spec, spec)  # the wrapper: no extra checks
    blob = exp.serialize()
    out[name] = sorted(set(__import__("re").findall(r"stablehlo\.custom_call @([\w.]+)", exp.mlir_module())))
    out[name + "_platforms"] = list(export.deserialize(blob).platforms)
try:
    export.export(f, platforms=["ascend"])(spec, spec)
    out["plain"] = None
except ValueError as e:
    out["plain"] = str(e)
print(json.dumps(out))
"""


def test_export_for_ascend_and_cpu_plus_ascend():
    proc = run_python(ASCEND_EXPORT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ascend"] == [jax_lngb.ascend.FFI_TARGET] and got["ascend_platforms"] == ["ascend"]
    assert got["cpu_ascend"] == sorted([jax_lngb.ascend.FFI_TARGET, TARGET])
    assert got["cpu_ascend_platforms"] == ["cpu", "ascend"]
    # what the wrapper allows is needed: plain jax.export refuses the Ascend target
    assert got["plain"] and jax_lngb.ascend.FFI_TARGET in got["plain"]


def test_artifact_runs_in_a_fresh_process(tmp_path):
    exp = jax_lngb.export.export(STEP)(*symbolic_specs("train_step"))
    (tmp_path / "step.bin").write_bytes(exp.serialize())
    params, x, target = arguments("train_step", 5)
    want = jax.tree_util.tree_leaves(STEP(params, x, target))
    np.savez(
        tmp_path / "io.npz",
        gamma=params[0],
        beta=params[1],
        x=np.asarray(x, np.float32),
        target=target,
        **{f"want{i}": np.asarray(w) for i, w in enumerate(want)},
    )
    code = f"""
import json, numpy as np, jax, jax.numpy as jnp
import jax_lngb  # registers the FFI handlers the artifact names
from jax import export
exp = export.deserialize(open({str(tmp_path / "step.bin")!r}, "rb").read())
io = np.load({str(tmp_path / "io.npz")!r})
out = jax.tree_util.tree_leaves(exp.call((io["gamma"], io["beta"]), jnp.asarray(io["x"], jnp.bfloat16), io["target"]))
print(json.dumps([bool(np.array_equal(np.asarray(o), io[f"want{{i}}"])) for i, o in enumerate(out)]))
"""
    proc = run_python(code, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    same = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(same) == len(want) and all(same), same


MULTI_DEVICE = r"""
import json, sys, numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax import export
import jax_lngb
def loss(params, x, target):
    y = jax_lngb.layer_norm(x, *params)
    return 0.5 * jnp.mean(jnp.square(y.astype(jnp.float32) - target))
mesh = Mesh(np.array(jax.devices()), ("data",))
rows, rep = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
step = jax.jit(jax.value_and_grad(loss), in_shardings=((rep, rep), rows, rows), out_shardings=rep)
H, S, B = 64, 8, 8
p = jax.ShapeDtypeStruct((H,), jnp.float32)
exp = export.export(step)((p, p), jax.ShapeDtypeStruct((B, S, H), jnp.bfloat16),
                          jax.ShapeDtypeStruct((B, S, H), jnp.float32))
text = exp.mlir_module()
restored = export.deserialize(exp.serialize())
rng = np.random.default_rng(5)
x = jnp.asarray(rng.standard_normal((B, S, H)) * 2 + 0.5, jnp.bfloat16)
t = jnp.asarray(rng.standard_normal((B, S, H)), jnp.float32)
params = (jnp.asarray(np.linspace(0.5, 1.5, H), jnp.float32), jnp.asarray(np.linspace(-1, 1, H), jnp.float32))
args = (jax.device_put(params, rep), jax.device_put(x, rows), jax.device_put(t, rows))
hlo = jax.jit(restored.call).lower(*args).compile().as_text()
value, (dg, db) = restored.call(*args)
print(json.dumps({"nr_devices": exp.nr_devices, "custom_calls": sorted(set(__import__("re").findall(
    r"stablehlo\.custom_call @([\w.]+)", text))), "all_gather": hlo.count(" all-gather("),
    "loss": float(value), "dgamma": np.asarray(dg).tolist(), "dbeta": np.asarray(db).tolist()}))
"""


def test_multi_device_export_needs_no_custom_call_and_keeps_rows_local():
    proc = run_python(MULTI_DEVICE, env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["nr_devices"] == 4
    assert not [c for c in got["custom_calls"] if c.startswith("jax_lngb") or c == "CustomSPMDPartitioning"]
    assert got["all_gather"] == 0
    # The child's inputs, on this process's single device.
    params = (jnp.asarray(np.linspace(0.5, 1.5, H), jnp.float32), jnp.asarray(np.linspace(-1, 1, H), jnp.float32))
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.standard_normal((8, S, H)) * 2 + 0.5, jnp.bfloat16)
    target = jnp.asarray(rng.standard_normal((8, S, H)), jnp.float32)
    value, (dg, db) = jax.jit(jax.value_and_grad(loss))(params, x, target)
    np.testing.assert_allclose(got["loss"], float(value), rtol=1e-5)
    for g, w in ((got["dgamma"], dg), (got["dbeta"], db)):
        w = np.asarray(w, np.float64)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * np.abs(w).max())
