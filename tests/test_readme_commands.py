"""The README's commands: the Quickstart holds exactly the two commands CI
runs (the demo, then the tests), and every command line of the README's
shell blocks answers `--help` from the repository root, so none of them
names a program or option that does not exist. Install steps (`python3 -m
venv`, `pip install`) are what CI runs verbatim; here they are left out.

These run the installed console scripts, so they need the package
installed (`pip install .`) into the interpreter running the tests, as the
Quickstart does."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _readme_commands():
    spec = importlib.util.spec_from_file_location("readme_commands", ROOT / ".ci" / "readme_commands.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_MOD = _readme_commands()
_TEXT = (ROOT / "README.md").read_text()
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _is_install_step(words: list[str]) -> bool:
    return words[1:3] == ["-m", "venv"] or "install" in words[1:2]


def _help_invocation(part: str) -> tuple[list[str], dict[str, str]] | None:
    """The argv (and environment) that asks one step of a command line for
    its --help, run from the repository root; None for install steps."""
    words = shlex.split(part)
    env = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = os.path.expandvars(value.replace("$PWD", str(ROOT)))
    assert words, part
    if _is_install_step(words):
        return None
    exe = words[0]
    if exe.startswith(".venv/bin/"):
        # The README's .venv is whatever environment runs these tests.
        name = exe.removeprefix(".venv/bin/")
        exe = sys.executable if name in ("python", "python3") else str(BIN / name)
    elif "/" in exe:
        exe = str(ROOT / exe)
    return [exe, *words[1:], "--help"], env


def test_the_quickstart_is_the_demo_then_the_tests():
    demo, tests = _MOD.quickstart_commands(_TEXT)  # exactly two, or this unpacking fails
    assert demo.endswith(".venv/bin/jax-lngb"), demo
    assert tests.endswith(".venv/bin/pytest"), tests
    for command in (demo, tests):
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install "), command


def test_the_shell_blocks_are_found():
    lines = _MOD.shell_lines(_TEXT)
    # Quickstart (2), the chart, the commands section, development.
    assert len(lines) >= 7, lines
    assert any("bench" in line for line in lines)
    assert any(" info" in line for line in lines)


@pytest.mark.parametrize("line", _MOD.shell_lines(_TEXT))
def test_every_readme_command_answers_help(line):
    checked = 0
    for part in line.split("&&"):
        invocation = _help_invocation(part.strip())
        if invocation is None:
            continue
        argv, env = invocation
        assert os.path.exists(argv[0]), f"{part.strip()!r}: {argv[0]} does not exist (is the package installed?)"
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **env})
        assert proc.returncode == 0, (
            f"{' '.join(argv)} (from {part.strip()!r}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
        assert "usage" in proc.stdout.lower(), proc.stdout[-2000:]
        checked += 1
    assert checked, f"nothing to run in {line!r}"


def test_python_m_from_the_root_runs_the_installed_build():
    # `python -m` puts the repository root first on sys.path, so the sources
    # are imported; they must still find a compiled extension.
    proc = subprocess.run(
        [sys.executable, "-m", "jax_lngb", "--version"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("jax_lngb "), proc.stdout
