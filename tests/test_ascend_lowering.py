"""The Ascend lowering without Ascend hardware: a stand-in backend factory
makes JAX know the platform, jax.export lowers for it, and the StableHLO
custom call is checked (target, padded operand shapes, tiling). Registering
a platform pollutes JAX's global state, so those tests run in child
interpreters. The FFI handler's contract is run end to end on the CPU with
the handler bound to the emulated launcher. Last, the CMake switch
JAX_LNGB_ASCEND."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import run_python

from jax_lngb import ascend, tiling

ROOT = Path(__file__).resolve().parents[1]

PRELUDE = r"""
import json, sys
import numpy as np, jax, jax.numpy as jnp
from jax import export
from jax._src import xla_bridge

def stand_in(name):
    # What a PJRT plugin does first; the factory is never needed for export.
    def factory():
        raise RuntimeError("stand-in backend: there is no NPU here")
    xla_bridge.register_backend_factory(name, factory, priority=-1000)

def export_for(platforms, *avals, fn=None):
    import jax_lngb
    checks = [export.DisabledSafetyCheck.custom_call(jax_lngb.ascend.FFI_TARGET),
              export.DisabledSafetyCheck.custom_call("jax_lngb_layer_norm_grad_beta")]
    f = jax.jit(fn or jax_lngb.layer_norm_grad_beta)
    return export.export(f, platforms=platforms, disabled_checks=checks)(*avals)

def done(**out):
    print("RESULT " + json.dumps(out))
"""


def child(code: str, env: dict | None = None) -> dict:
    proc = run_python(PRELUDE + code, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def ascend_custom_call(text: str) -> re.Match:
    m = re.search(
        r"stablehlo\.custom_call @jax_lngb_ascend_layer_norm_grad_beta\((?P<args>[^)]*)\)\s*"
        r"\{(?P<attrs>.*?)\}\s*:\s*\((?P<ins>[^)]*)\)\s*->\s*\((?P<outs>[^)]*)\)",
        text,
    )
    assert m, "no Ascend custom call in:\n" + text
    return m


def backend_config(attrs: str) -> dict[str, int]:
    cfg = re.search(r"mhlo\.backend_config = \{([^}]*)\}", attrs)
    assert cfg, attrs
    return {k: int(v) for k, v in re.findall(r"(\w+) = (\d+) : ui32", cfg.group(1))}


def constant_named(text: str, name: str) -> list[int]:
    m = re.search(rf"{re.escape(name)} = stablehlo\.constant dense<\[([0-9, ]+)\]> : tensor<56xui32>", text)
    assert m, text
    return [int(v) for v in m.group(1).split(",")]


# ------------------------------------------------------------ registration


def test_plugin_registered_before_import_exports_the_custom_call():
    out = child(
        r"""
stand_in("ascend")
import jax_lngb
x = jax.ShapeDtypeStruct((2, 8, 12), jnp.float16)
ex = export_for(["ascend"], x, x)
done(registered=jax_lngb.ascend.registered_platforms(), text=ex.mlir_module(), platforms=ex.platforms)
"""
    )
    assert out["registered"] == ["ascend"] and out["platforms"] == ["ascend"]
    text = out["text"]
    m = ascend_custom_call(text)
    # padded operands (H 12 -> 16 for half), the tiling constant, three results
    assert m.group("ins").replace(" ", "") == "tensor<2x8x16xf16>,tensor<2x8x16xf16>,tensor<56xui32>"
    hp, plan = ascend.plan_for((2, 8, 12), np.float16, np.float16)
    assert hp == 16
    assert m.group("outs").replace(" ", "") == (
        f"tensor<16xf16>,tensor<16xf16>,tensor<{plan.workspace_bytes // 4}xf32>"
    )
    assert "stablehlo.pad" in text and re.search(r"stablehlo\.slice .*\[0:12\]", text)
    cfg = backend_config(m.group("attrs"))
    assert cfg == dict(
        block_dim=plan.block_dim,
        combine_block_dim=plan.combine_block_dim,
        combine_cols_per_core=plan.combine_cols_per_core,
        rows=16,
        h_length=16,
        original_h_length=12,
        tile_rows=plan.tile_rows,
        num_groups=plan.num_groups,
        stack_buffer_bytes=plan.stack_buffer_bytes,
        one_cal_size=plan.api_tile.one_cal_size,
    )
    # the tiling operand is the plan's packed words, CANN's tiling included
    tiling_name = m.group("args").split(",")[-1].strip()
    words = constant_named(text, tiling_name)
    assert words == [int(w) for w in plan.to_array()]
    assert words[16:36] == [int(w) for w in plan.api_tile.to_array()]


def test_plugin_registered_after_import_is_picked_up():
    out = child(
        r"""
import jax_lngb
before = jax_lngb.ascend.registered_platforms()
stand_in("ascend")
after = jax_lngb.ascend.registered_platforms()
x = jax.ShapeDtypeStruct((4, 100, 64), jnp.float32)
done(before=before, after=after, text=export_for(["ascend"], x, x).mlir_module())
"""
    )
    assert out["before"] == [] and out["after"] == ["ascend"]
    m = ascend_custom_call(out["text"])
    assert m.group("ins").replace(" ", "") == "tensor<4x100x64xf32>,tensor<4x100x64xf32>,tensor<56xui32>"
    hp, plan = ascend.plan_for((4, 100, 64), np.float32, np.float32)
    assert plan.is_reuse_source  # float tiles are the kernel's own copies
    assert backend_config(m.group("attrs"))["tile_rows"] == plan.tile_rows


def test_platform_name_comes_from_the_environment():
    out = child(
        r"""
stand_in("ascend")
stand_in("npu")
import jax_lngb
x = jax.ShapeDtypeStruct((2, 8, 16), jnp.float32)
done(registered=jax_lngb.ascend.registered_platforms(),
     npu=export_for(["npu"], x, x).mlir_module(),
     ascend=export_for(["ascend"], x, x).mlir_module())
""",
        env={"JAX_LNGB_ASCEND_PLATFORM": "npu"},
    )
    assert out["registered"] == ["npu"]
    ascend_custom_call(out["npu"])
    # "ascend" is not an Ascend platform under this setting: portable lowering
    assert "jax_lngb_ascend" not in out["ascend"] and "stablehlo.reduce" in out["ascend"]


def test_unsupported_cases_keep_the_portable_lowering():
    out = child(
        r"""
stand_in("ascend")
import jax_lngb
def lower(shape, dtype, fn=None):
    x = jax.ShapeDtypeStruct(shape, dtype)
    return export_for(["ascend"], x, x, fn=fn).mlir_module()
sym = export.symbolic_shape("b, 8, 16")
done(
    bf16=lower((2, 8, 16), jnp.bfloat16),
    vmapped=lower((3, 2, 8, 16), jnp.float32, fn=jax.vmap(jax_lngb.layer_norm_grad_beta)),
    wide=lower((4, 8192), jnp.float32),
    symbolic=lower(sym, jnp.float32),
    f32_out=lower((2, 8, 16), jnp.float16,
                  fn=lambda a, b: jax_lngb.layer_norm_grad_beta(a, b, out_dtype=jnp.float32)),
)
"""
    )
    for case in ("bf16", "vmapped", "wide", "symbolic"):
        assert "jax_lngb_ascend" not in out[case], case
        assert "stablehlo.reduce" in out[case], case
    # half in, float32 out is a kernel case
    m = ascend_custom_call(out["f32_out"])
    assert m.group("outs").replace(" ", "").startswith("tensor<16xf32>,tensor<16xf32>")


def test_one_artifact_for_cpu_and_ascend_runs_on_the_cpu():
    out = child(
        r"""
stand_in("ascend")
import jax_lngb
rng = np.random.default_rng(0)
a = rng.standard_normal((3, 40, 20)).astype(np.float32)
b = rng.standard_normal((3, 40, 20)).astype(np.float32)
x = jax.ShapeDtypeStruct(a.shape, jnp.float32)
ex = export_for(["cpu", "ascend"], x, x)
again = export.deserialize(ex.serialize())
g, bt = again.call(a, b)
g0, b0 = jax.jit(jax_lngb.layer_norm_grad_beta)(a, b)
done(platforms=again.platforms, text=ex.mlir_module(),
     same=bool(np.array_equal(np.asarray(g), np.asarray(g0)) and np.array_equal(np.asarray(bt), np.asarray(b0))),
     err=float(np.abs(np.asarray(g, np.float64) - (a.astype(np.float64) * b).sum((0, 1))).max()))
"""
    )
    assert out["platforms"] == ["cpu", "ascend"]
    assert "custom_call @jax_lngb_layer_norm_grad_beta(" in out["text"]  # the CPU kernel
    ascend_custom_call(out["text"])  # and the NPU one, in one module
    assert out["same"] and out["err"] < 1e-4


def test_register_platform_lets_a_cpu_machine_export_the_ascend_kernel():
    # No plugin, no hand-made stand-in: only the documented call.
    out = child(
        r"""
import jax_lngb
spec = jax.ShapeDtypeStruct((4, 100, 64), jnp.float32)
f = jax.jit(jax_lngb.layer_norm_grad_beta)
known_before = xla_bridge.is_known_platform("ascend")
before = jax_lngb.export.export(f, platforms=["ascend"])(spec, spec).mlir_module()
jax_lngb.ascend.register_platform("ascend")
jax_lngb.ascend.register_platform("ascend")  # idempotent
only = jax_lngb.export.export(f, platforms=["ascend"])(spec, spec)  # the same jitted f
both = jax_lngb.export.export(f, platforms=["cpu", "ascend"])(spec, spec)
again = export.deserialize(both.serialize())
rng = np.random.default_rng(1)
a = rng.standard_normal((4, 100, 64)).astype(np.float32)
b = rng.standard_normal((4, 100, 64)).astype(np.float32)
g, bt = again.call(a, b)
g0, b0 = f(a, b)
try:
    jax.devices("ascend")
    devices_error = None
except Exception as e:
    devices_error = str(e)
done(known_before=known_before, before=before, only=only.mlir_module(), both=both.mlir_module(),
     platforms=list(again.platforms), registered=jax_lngb.ascend.registered_platforms(),
     same=bool(np.array_equal(np.asarray(g), np.asarray(g0)) and np.array_equal(np.asarray(bt), np.asarray(b0))),
     err=float(np.abs(np.asarray(g, np.float64) - (a.astype(np.float64) * b).sum((0, 1))).max()),
     cpu=[d.platform for d in jax.devices()], devices_error=devices_error)
"""
    )
    # Without it JAX does not know the platform and the export silently
    # holds the portable reduction: the pitfall register_platform removes.
    assert not out["known_before"]
    assert "jax_lngb_ascend" not in out["before"] and "stablehlo.reduce" in out["before"]
    m = ascend_custom_call(out["only"])
    assert m.group("ins").replace(" ", "") == "tensor<4x100x64xf32>,tensor<4x100x64xf32>,tensor<56xui32>"
    ascend_custom_call(out["both"])
    assert "custom_call @jax_lngb_layer_norm_grad_beta(" in out["both"]
    assert out["platforms"] == ["cpu", "ascend"] and out["registered"] == ["ascend"]
    assert out["same"] and out["err"] < 1e-4  # the cpu+ascend artifact runs here
    assert out["cpu"] == ["cpu"]  # the stand-in never becomes a device
    assert out["devices_error"] and "ascend" in out["devices_error"]


def test_register_platform_checks_its_argument():
    with pytest.raises(TypeError, match="platform must be a non-empty string; got 3"):
        ascend.register_platform(3)
    with pytest.raises(ValueError, match="'cpu' is not an Ascend platform"):
        ascend.register_platform("cpu")


@pytest.mark.parametrize(
    "arch, ub, cores, block",
    [
        ("dav-2201", 196608, 40, "vector cores"),
        ("dav-3510", 245760, 40, "vector cores"),
        ("dav-2002", 262144, 8, "AI cores"),
    ],
)
def test_the_plan_follows_the_npu_architecture(monkeypatch, arch, ub, cores, block):
    monkeypatch.setenv(ascend.ARCH_ENV, arch)
    assert ascend.npu_arch() == arch
    hp, plan = ascend.plan_for((64, 4096, 64), np.float16, np.float16)
    assert plan.npu_arch == arch and hp == 64
    assert plan.ub_bytes_used <= ub and plan.num_groups > cores
    assert plan.block_dim == cores  # the unit block_dim counts there: "vector cores" / "AI cores"
    assert tiling.npu_arch_defaults(arch).block == block
    monkeypatch.setenv(ascend.ARCH_ENV, "dav-1001")
    with pytest.raises(ValueError, match="npu_arch must be 'dav-2002', 'dav-2201' or 'dav-3510'"):
        ascend.npu_arch()
    monkeypatch.delenv(ascend.ARCH_ENV)
    assert ascend.npu_arch() == "dav-2201"  # no NPU handler built here to say otherwise


def test_nothing_is_registered_for_an_unknown_platform():
    assert "ascend" not in ascend.registered_platforms()
    assert ascend.register("no_such_platform") == ()
    from jax._src import xla_bridge

    assert getattr(xla_bridge.register_backend_factory, "_jax_lngb_ascend_hook", False)


def test_platform_names_parsing(monkeypatch):
    monkeypatch.delenv(ascend.PLATFORM_ENV, raising=False)
    assert ascend.platform_names() == ("ascend",)
    monkeypatch.setenv(ascend.PLATFORM_ENV, " npu , ascend_v2 ,")
    assert ascend.platform_names() == ("npu", "ascend_v2")


def test_tuning_knobs_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(ascend.UB_BYTES_ENV, "65536")
    monkeypatch.setenv(ascend.NUM_CORES_ENV, "3")
    hp, plan = ascend.plan_for((8, 1000, 100), np.float16, np.float16)
    assert hp == 112 and plan.ub_bytes_used <= 65536 and plan.block_dim == 3
    monkeypatch.setenv(ascend.NUM_CORES_ENV, "many")
    with pytest.raises(ValueError, match=r"\$JAX_LNGB_ASCEND_NUM_CORES must be an integer; got 'many'"):
        ascend.plan_for((8, 100), np.float32, np.float32)
    monkeypatch.delenv(ascend.NUM_CORES_ENV)
    # a row that does not fit the unified buffer: the portable lowering
    assert ascend.plan_for((4, 8192), np.float32, np.float32) is None
    assert ascend.plan_for((4, 16), np.float64, np.float32) is None


# ------------------------- the handler's contract, end to end on the CPU

E2E = r"""
from jax.interpreters import mlir
import jax_lngb
from jax_lngb import _ascend_emu
from jax_lngb.ascend import lowering as ascend, emulator as ascend_emu
# Bind the Ascend FFI target on the CPU to the emulated launcher, and lower
# the primitive with the Ascend rule there: lowering -> custom call ->
# handler -> kernels, all through XLA.
for name, capsule in _ascend_emu.registrations().items():
    jax.ffi.register_ffi_target(name, capsule, platform="cpu")
from jax_lngb._ops.primitives import layer_norm_grad_beta_local_p
mlir.register_lowering(layer_norm_grad_beta_local_p, ascend._lowering, platform="cpu")
"""


@pytest.mark.parametrize("arch", ["dav-2201", "dav-3510"])
def test_lowering_and_handler_run_the_emulated_kernel_through_xla(arch):
    out = child(
        E2E
        + r"""
rng = np.random.default_rng(3)
res = {}
for dt, shape, out_dt in [(np.float32, (3, 70, 20), None), (np.float16, (2, 300, 40), None),
                          (np.float16, (5, 9, 8), np.float32)]:
    a = rng.standard_normal(shape).astype(dt)
    b = rng.standard_normal(shape).astype(dt)
    f = jax.jit(lambda x, y: jax_lngb.layer_norm_grad_beta(x, y, out_dtype=out_dt))
    assert "jax_lngb_ascend_layer_norm_grad_beta" in f.lower(a, b).as_text()
    g, bt = f(a, b)
    hp, plan = ascend.plan_for(shape, dt, out_dt or dt)
    arch = ascend.npu_arch()
    assert plan.npu_arch == arch
    d = jax_lngb.tiling.npu_arch_defaults(arch)
    eg, eb = ascend_emu.layer_norm_grad_beta(a, b, num_cores=d.num_cores, ub_bytes=d.ub_bytes, out_dtype=out_dt,
                                             is_reuse_source=plan.is_reuse_source, npu_arch=arch)
    ref = (a.astype(np.float64) * b).reshape(-1, shape[-1]).sum(0)
    res[str(shape)] = dict(
        dtype=str(np.asarray(g).dtype),
        same=bool(np.array_equal(np.asarray(g), eg) and np.array_equal(np.asarray(bt), eb)),
        rel=float(np.abs(np.asarray(g, np.float64) - ref).max() / np.abs(ref).max()))
done(**res)
""",
        env={"JAX_LNGB_ASCEND_ARCH": arch},
    )
    assert out["(3, 70, 20)"]["dtype"] == "float32" and out["(3, 70, 20)"]["rel"] < 1e-5
    assert out["(2, 300, 40)"]["dtype"] == "float16" and out["(2, 300, 40)"]["rel"] < 2e-3
    assert out["(5, 9, 8)"]["dtype"] == "float32"
    assert all(v["same"] for v in out.values()), out


def test_handler_rejects_a_call_that_breaks_the_contract():
    out = child(
        E2E
        + r"""
import numpy as np
a = np.ones((4, 16), np.float32)
hp, plan = ascend.plan_for((4, 16), np.float32, np.float32)
outs = (jax.ShapeDtypeStruct((16,), jnp.float32),) * 2 + (jax.ShapeDtypeStruct((plan.workspace_bytes // 4,), jnp.float32),)
attrs = dict(block_dim=np.uint32(plan.block_dim), combine_block_dim=np.uint32(plan.combine_block_dim),
             combine_cols_per_core=np.uint32(plan.combine_cols_per_core), rows=np.uint32(4), h_length=np.uint32(16),
             original_h_length=np.uint32(16), tile_rows=np.uint32(plan.tile_rows), num_groups=np.uint32(plan.num_groups),
             stack_buffer_bytes=np.uint32(plan.stack_buffer_bytes), one_cal_size=np.uint32(plan.api_tile.one_cal_size))
call = jax.ffi.ffi_call(ascend.FFI_TARGET, outs)
ok = call(a, a, plan.to_array(), **attrs)
errors = {}
for name, change in [("rows", dict(rows=np.uint32(5))), ("h", dict(h_length=np.uint32(8))),
                     ("groups", dict(num_groups=np.uint32(plan.num_groups + 1))),
                     ("combine", dict(combine_block_dim=np.uint32(1), combine_cols_per_core=np.uint32(8)))]:
    try:
        jax.block_until_ready(call(a, a, plan.to_array(), **{**attrs, **change}))
        errors[name] = None
    except Exception as e:
        errors[name] = f"{type(e).__name__}: {e}"
try:
    jax.block_until_ready(call(a, a, plan.to_array()[:50], **attrs))
except Exception as e:
    errors["tiling"] = f"{type(e).__name__}: {e}"
done(ok=[float(v) for v in np.asarray(ok[1])], errors=errors)
"""
    )
    assert out["ok"] == [4.0] * 16
    e = out["errors"]
    assert "must hold rows * h_length = 80 elements" in e["rows"]
    assert "last dimension must be h_length = 8" in e["h"]
    assert "workspace must have num_groups * 2 * h_length" in e["groups"]
    assert "tiling operand must have 56 uint32 words" in e["tiling"]
    assert "must cover h_length = 16" in e["combine"]
    assert all(v.startswith("JaxRuntimeError") for v in e.values()), e


def test_no_npu_handler_without_cann():
    # This build machine has no CANN toolkit: the NPU handler is not built,
    # the lowering still is (tests above).
    assert not ascend.handler_available()


# -------------------------------------------------- the CMake switch


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
@pytest.mark.parametrize(
    "mode, ok, message",
    [
        ("AUTO", True, "CANN toolkit not found; Ascend NPU launcher not built"),
        ("OFF", True, "Ascend NPU launcher not built (JAX_LNGB_ASCEND=OFF)"),
        ("ON", False, "JAX_LNGB_ASCEND=ON but the CANN toolkit was not found"),
        ("maybe", False, "JAX_LNGB_ASCEND must be AUTO, ON or OFF; got 'maybe'"),
    ],
)
def test_cmake_ascend_switch(tmp_path, mode, ok, message):
    env = {k: v for k, v in __import__("os").environ.items() if k != "ASCEND_HOME_PATH"}
    proc = subprocess.run(
        ["cmake", "-S", str(ROOT / "cpp"), "-B", str(tmp_path), f"-DJAX_LNGB_ASCEND={mode}", "-DJAX_LNGB_PYTHON=OFF"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    output = " ".join((proc.stdout + proc.stderr).split())
    assert (proc.returncode == 0) == ok, output[-3000:]
    assert message in output, output[-3000:]
