"""The command lines of the README's shell blocks, for CI and the tests.

    python3 .ci/readme_commands.py quickstart   the Quickstart's commands, one per line
    python3 .ci/readme_commands.py all          every command line of every shell block

CI runs the Quickstart's commands as this prints them, so the README and
CI cannot drift apart; tests/test_readme_commands.py checks every line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_FENCE = re.compile(r"^```(\w*)\s*$")
_SHELLS = {"bash", "sh", "shell", "console"}


def _section(text: str, heading: str) -> str:
    """The text under a `## heading`, up to the next heading of that level."""
    match = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        raise SystemExit(f"README.md has no '## {heading}' section")
    return match.group(1)


def shell_lines(text: str) -> list[str]:
    """Every non-blank, non-comment line inside a shell code block, with
    any trailing comment removed."""
    lines, lang = [], None
    for line in text.splitlines():
        fence = _FENCE.match(line.strip())
        if fence:
            lang = fence.group(1) if lang is None else None
            continue
        if lang in _SHELLS:
            code = re.sub(r"\s+#.*$", "", line).strip()
            if code and not code.startswith("#"):
                lines.append(code)
    return lines


def quickstart_commands(text: str) -> list[str]:
    return shell_lines(_section(text, "Quickstart"))


def main(argv: list[str]) -> int:
    text = README.read_text()
    if argv == ["quickstart"]:
        print("\n".join(quickstart_commands(text)))
    elif argv == ["all"]:
        print("\n".join(shell_lines(text)))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
