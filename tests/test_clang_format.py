r"""The C++ sources under cpp/ are formatted as the repository's .clang-format
says.

Runs the clang-format binary of the PyPI ``clang-format`` package (the style
was written against clang-format 23.1.5) with ``--dry-run --Werror`` over
every ``*.h``, ``*.cc`` and ``*.asc`` file under cpp/, and fails listing the
files it would change. The AscendC ``*.asc`` sources are C++ with a few
keywords and the ``<<<...>>>`` launch syntax; clang-format reads a file of an
unknown extension as C++ and keeps that syntax, so they are checked too.
Skipped only where the ``clang-format`` package is not installed.

To reformat everything (from the repository root):

    find cpp \( -name '*.h' -o -name '*.cc' -o -name '*.asc' \) -print0 | xargs -0 .venv/bin/clang-format -i
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STYLE = ROOT / ".clang-format"
SUFFIXES = (".h", ".cc", ".asc")


def clang_format_binary() -> Path:
    if importlib.util.find_spec("clang_format") is None:
        pytest.skip("the clang-format package is not installed (pip install clang-format)")
    import clang_format

    binary = Path(clang_format.get_executable("clang-format"))
    assert binary.is_file(), f"the clang-format package is installed but has no binary at {binary}"
    return binary


def cpp_sources() -> list[Path]:
    return sorted(p for p in (ROOT / "cpp").rglob("*") if p.suffix in SUFFIXES and p.is_file())


def test_cpp_sources_are_clang_formatted():
    binary = clang_format_binary()
    version = importlib.metadata.version("clang-format")
    assert STYLE.is_file(), f"{STYLE} is missing"
    sources = cpp_sources()
    # The tree has C++ sources in every one of these folders: an empty or
    # partial list means the walk above, not the formatting, is wrong.
    for folder in ("kernels", "ffi", "tiling", "ascend", "bench", "tests"):
        assert any(p.relative_to(ROOT / "cpp").parts[0] == folder for p in sources), folder
    proc = subprocess.run(
        [str(binary), f"--style=file:{STYLE}", "--dry-run", "--Werror", *map(str, sources)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    flagged = sorted({m.group(1) for m in re.finditer(r"^(.+?):\d+:\d+: error:", proc.stderr, re.M)})
    unformatted = [str(Path(f).resolve().relative_to(ROOT)) for f in flagged]
    if unformatted:
        pytest.fail(
            f"clang-format {version} would change {len(unformatted)} of {len(sources)} files under cpp/ "
            "(reformat with the command in this test's docstring):\n  " + "\n  ".join(unformatted),
            pytrace=False,
        )
    assert proc.returncode == 0, f"clang-format {version} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
