"""The Python sources pass ruff's lint and are formatted as ruff formats
them, with the settings in pyproject.toml ([tool.ruff]). ruff comes from the
test extras (pinned there); nothing is fetched at test time.

To fix a failure, from the repository root:

    .venv/bin/ruff format . && .venv/bin/ruff check --fix .
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff() -> str:
    exe = Path(sys.executable).with_name("ruff")
    if exe.is_file():
        return str(exe)
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (it comes with the test extras: pip install '.[test]')")
    return found


def test_ruff_lint():
    proc = subprocess.run([ruff(), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_ruff_format():
    proc = subprocess.run(
        [ruff(), "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, "files ruff would reformat:\n" + proc.stdout[-6000:] + proc.stderr[-2000:]


def test_the_check_can_fail(tmp_path):
    # The same ruff, settings and command flag a badly formatted, unused import.
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nx=1\n")
    cfg = ["--config", str(ROOT / "pyproject.toml")]
    lint = subprocess.run([ruff(), "check", "--no-cache", *cfg, str(bad)], capture_output=True, text=True, timeout=300)
    fmt = subprocess.run(
        [ruff(), "format", "--check", "--no-cache", *cfg, str(bad)], capture_output=True, text=True, timeout=300
    )
    assert lint.returncode != 0 and "F401" in lint.stdout
    assert fmt.returncode != 0
