"""No import cycle among the ``tuner`` modules, counting every import the source writes.

Imports inside functions and under ``if TYPE_CHECKING:`` count too: a cycle hidden behind a
late import is still two modules that cannot be read (or moved) one without the other. The
graph is read from the source with :mod:`ast`, nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "tuner"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The module an ``from ... import`` names, relative ones resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The ``tuner`` modules ``module`` imports anywhere in its source (a name imported from a
    package is the package, a submodule imported from it is the submodule)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node, path.name == "__init__.py")
            for alias in node.names:
                found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source)
    return {name for name in found if name in known and name != module}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_through(graph, set(component)) for component in components]


def _cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A path that leaves the component's first module and comes back to it."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    return paths[node] + [start]
                if target not in paths:
                    paths[target] = paths[node] + [target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{sorted(component)} is not strongly connected")


def test_no_import_cycle_among_tuner_modules() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_graph_reads_late_and_type_checking_imports(tmp_path: Path) -> None:
    """The reader is not blind: a cycle made of a TYPE_CHECKING import and a function-local
    one is found and listed."""
    source = {
        "a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "b": "def f():\n    from pkg import a\n    return a\n",
        "c": "from . import b\n",
    }
    known = {f"pkg.{name}" for name in source} | {"pkg"}
    graph = {}
    for name, text in source.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        graph[f"pkg.{name}"] = imports_of(f"pkg.{name}", path, known)
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.b"}}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]


@pytest.mark.parametrize("module", ["tuner.cli", "tuner.space", "tuner.loadgen._level"])
def test_the_graph_holds_the_package(module: str) -> None:
    assert import_graph()[module], f"{module} imports nothing of tuner, by this reader"
