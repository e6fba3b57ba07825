"""`python -m jax_lngb --version` and `python -m jax_lngb info`: what they
print matches the running install; `info` reports an Ascend lowering module
when there is one and copes when there is none; `import jax_lngb` pulls in
no optional library."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import types

import jax
import jaxlib
import pytest

import jax_lngb
from jax_lngb._core import native as _native
from jax_lngb._ops.primitives import LAYER_NORM_GRAD_BETA_TARGET as FFI_TARGET
from jax_lngb.cli import main as cli


def _run(tmp_path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # Outside the source tree, so `-m` finds the package the tests import.
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=full_env
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def test_version_prints_the_versions(tmp_path):
    out = _run(tmp_path, "-m", "jax_lngb", "--version").stdout.strip()
    assert out == (
        f"jax_lngb {jax_lngb.__version__} (jax {jax.__version__}, jaxlib {jaxlib.__version__}, "
        f"Python {platform.python_version()})"
    )


def _vendor_from_cpuinfo() -> str:
    """The CPU's maker as /proc/cpuinfo names it, in cpu_vendor()'s words."""
    try:
        with open("/proc/cpuinfo") as f:
            ids = {line.split(":", 1)[1].strip() for line in f if line.startswith("vendor_id")}
    except OSError:
        ids = set()
    return {frozenset({"GenuineIntel"}): "intel", frozenset({"AuthenticAMD"}): "amd"}.get(frozenset(ids), "other")


def test_info_json_describes_this_install(tmp_path):
    # Forcing the baseline variant must show in what info reports.
    proc = _run(tmp_path, "-m", "jax_lngb", "info", "--json", env={"JAX_LNGB_ISA": "generic"})
    info = json.loads(proc.stdout)
    assert info["jax_lngb"] == jax_lngb.__version__
    assert (info["jax"], info["jaxlib"]) == (jax.__version__, jaxlib.__version__)
    assert info["python"] == platform.python_version()
    assert info["ffi_api_version"] == ".".join(map(str, _native.ffi_api_version()))
    assert os.path.samefile(info["extension"], _native._cpu.__file__)
    cpu = info["cpu"]
    assert cpu["kernel_variant"] == "generic"
    assert cpu["environment"] == {"JAX_LNGB_ISA": "generic"}
    assert cpu["best_supported_variant"] == _native._cpu.supported_isa()
    assert cpu["features"] == _native.cpu_features().split()
    assert cpu["vendor"] == _native.cpu_vendor() == _vendor_from_cpuinfo()
    assert FFI_TARGET in info["native_lowerings"]["cpu"]["ffi_targets"]
    # Whether the Ascend module exists is a property of the build.
    has_ascend = importlib.util.find_spec("jax_lngb.ascend") is not None
    assert info["native_lowerings"]["ascend"]["available"] is has_ascend
    for dist in ("flax", "equinox"):
        try:
            want = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            want = None
        assert info["integrations"][dist]["version"] == want


def test_info_text_names_the_kernel_variant_and_lowerings(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAX_LNGB_ISA"}
    proc = subprocess.run(
        [sys.executable, "-m", "jax_lngb", "info"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == f"jax_lngb {jax_lngb.__version__}"
    assert f"CPU kernel variant: {_native._cpu.supported_isa()}" in lines
    assert f"CPU features the dispatcher saw: {_native.cpu_features()}" in lines
    assert f"CPU vendor (the reduction's loop choice from memory): {_native.cpu_vendor()}" in lines
    targets = _native.register_cpu_targets()
    assert FFI_TARGET in targets
    assert f"  cpu: C++ kernels through XLA FFI ({', '.join(targets)})" in lines
    assert any(line.startswith("  ascend: ") for line in lines)
    assert "  every other platform: the jax.numpy lowering of the same math" in lines


def _fake_ascend(registered=("ascend",), fail=False) -> types.ModuleType:
    mod = types.ModuleType("jax_lngb.ascend")
    mod.__spec__ = importlib.machinery.ModuleSpec("jax_lngb.ascend", None)

    def registered_platforms():
        if fail:
            raise RuntimeError("no backend")
        return registered

    mod.registered_platforms = registered_platforms
    mod.platform_names = lambda: ("ascend", "npu")
    mod.handler_available = lambda: False
    return mod


def test_info_reports_the_platforms_an_ascend_module_registered(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax_lngb.ascend", _fake_ascend())
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "  ascend: registered for ascend (platform names watched: ascend, npu; NPU handler compiled: False)" in out
    asc = cli.collect_info()["native_lowerings"]["ascend"]
    assert asc == {
        "available": True,
        "registered_platforms": ["ascend"],
        "platform_names": ["ascend", "npu"],
        "npu_handler_compiled": False,
    }


def test_info_copes_with_an_ascend_module_that_registered_nothing_or_fails(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax_lngb.ascend", _fake_ascend(registered=()))
    assert cli.main(["info"]) == 0
    assert "  ascend: registered for no platform yet" in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "jax_lngb.ascend", _fake_ascend(fail=True))
    assert cli.main(["info"]) == 0
    assert cli.collect_info()["native_lowerings"]["ascend"]["registered_platforms"] == "error: RuntimeError: no backend"


def test_info_without_an_ascend_module(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax_lngb.ascend", None)  # as if absent from the build
    assert cli.main(["info"]) == 0
    assert "  ascend: none (no jax_lngb.ascend module in this build)" in capsys.readouterr().out


def test_json_flag_needs_the_info_command(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--json"])
    assert e.value.code == 2
    assert "--json goes with the info command" in capsys.readouterr().err


def test_import_jax_lngb_imports_no_optional_library(tmp_path):
    code = (
        "import json, sys, jax_lngb\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('flax', 'equinox', 'optax'))))"
    )
    loaded = json.loads(_run(tmp_path, "-c", code).stdout)
    assert loaded == []


def test_info_says_when_jax_is_newer_than_the_tests_ran_on(monkeypatch, capsys):
    from jax_lngb import _compat

    info = cli.collect_info()
    assert info["jax_tested_up_to"] == _compat.TESTED_JAX_UP_TO
    assert info["jax_newer_than_tested"] == _compat.newer_than_tested(info["jax"])
    # A jax newer than any tested one gets the note; the tested one does not.
    monkeypatch.setattr(cli, "collect_info", lambda: {**info, "jax": "99.0.0", "jax_newer_than_tested": True})
    assert cli.main(["info"]) == 0
    assert "note: jax 99.0.0 is newer than the newest release the tests ran on" in capsys.readouterr().out
    monkeypatch.setattr(cli, "collect_info", lambda: {**info, "jax_newer_than_tested": False})
    assert cli.main(["info"]) == 0
    assert "newer than the newest release" not in capsys.readouterr().out
