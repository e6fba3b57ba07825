"""The package's import graph, read from the source (nothing is imported):
no module imports another that imports it back (directly or around a loop),
and no library function hides an import of the package inside its body to
dodge such a loop. Rules that bind another primitive import it from
`jax_lngb._ops.primitives`, which imports nothing of ours (the way JAX's
own `lax` declares its primitives before the rules that bind them).

Imports inside functions stay allowed where they are the point: the command
line loading a subcommand, the benchmark's sections and child processes,
and the optional Flax/Equinox integrations loaded on first use.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "jax_lngb"

# Folders whose functions may import the package lazily (see the docstring).
LAZY_OK = ("cli", "bench")
# Module files whose functions may import lazily: the package's __getattr__
# (the optional integrations, the emulator) and nothing else.
LAZY_OK_FILES = ("__init__.py", "ascend/__init__.py")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}
# The compiled extensions (cpp/): imported as `from .. import _cpu`, which
# loads the extension, not the package's __init__.
EXTENSIONS = {"jax_lngb._cpu", "jax_lngb._tiling", "jax_lngb._ascend_emu", "jax_lngb._ascend"}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(importer: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The package modules an import statement loads (an imported name that
    is a submodule counts as that submodule; compiled extensions are not
    source modules and are left out)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODULES]
    if node.level:
        base = importer.split(".")
        if not _is_package(importer):
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target not in MODULES:
        return []
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        if sub not in EXTENSIONS:
            out.append(sub if sub in MODULES else target)
    return out


def _imports(name: str) -> tuple[set[str], list[tuple[int, str]]]:
    """(modules imported at module level, [(line, module) imported inside functions])."""
    tree = ast.parse(MODULES[name].read_text())
    top, inner = set(), []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            func = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _resolve(name, child):
                    if target == name:
                        continue
                    if in_function:
                        inner.append((child.lineno, target))
                    else:
                        top.add(target)
            visit(child, func)

    visit(tree, False)
    return top, inner


GRAPH = {name: _imports(name)[0] for name in MODULES}


def test_the_package_has_its_modules():
    # The graph below is only meaningful if it holds the package.
    assert {"jax_lngb._ops.primitives", "jax_lngb._ops.layer_norm.forward", "jax_lngb._core.native"} <= set(MODULES)
    assert "jax_lngb._ops.layer_norm.tangent" in GRAPH["jax_lngb._ops.layer_norm.forward"] or (
        "jax_lngb._ops.primitives" in GRAPH["jax_lngb._ops.layer_norm.forward"]
    )


def _cycle() -> list[str] | None:
    """A loop in GRAPH, as a list of modules, or None (depth-first search).
    An edge into a package's __init__ from one of its own submodules is the
    parent import every submodule makes anyway; only edges the code writes
    are in GRAPH."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(GRAPH):
        if node not in state:
            found = dfs(node)
            if found:
                return found
    return None


def test_no_import_cycles():
    loop = _cycle()
    assert loop is None, "import cycle: " + " -> ".join(loop)


def test_primitives_are_declared_before_any_rule():
    assert GRAPH["jax_lngb._ops.primitives"] == set(), GRAPH["jax_lngb._ops.primitives"]


def _lazy_allowed(name: str) -> bool:
    rel = MODULES[name].relative_to(PKG).as_posix()
    return rel.split("/")[0] in LAZY_OK or rel in LAZY_OK_FILES


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not _lazy_allowed(n)))
def test_no_library_function_imports_the_package(name):
    _, inner = _imports(name)
    assert not inner, f"{MODULES[name]}: imports inside functions: {inner}"


def test_a_cycle_would_be_found(monkeypatch):
    # The check itself can fail: a loop added to the graph is reported.
    monkeypatch.setitem(GRAPH, "jax_lngb._ops.primitives", {"jax_lngb._ops.layer_norm.forward"})
    loop = _cycle()
    assert loop is not None and "jax_lngb._ops.primitives" in loop
