"""The import graph inside ``dagster_privrelease.core`` has no cycle.

Every ``import`` statement counts, at module level or inside a function (an import moved into a function to
dodge a cycle is still a cycle); only ``if TYPE_CHECKING:`` blocks are left out, since they never run. The
registries load their built-in entries by module name on first lookup (``importlib``), which is not an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dagster_privrelease

ROOT = Path(dagster_privrelease.__file__).parent
CORE = "dagster_privrelease.core"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            found.extend(_imports(ast.Module(body=node.orelse, type_ignores=[])))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        found.extend(_imports(node))
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ``dagster_privrelease.core`` it imports."""
    paths = {_module_name(p): p for p in ROOT.joinpath("core").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                module = node.module or ""
                base = module if node.level == 0 else ".".join(p for p in (base, module) if p)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            edges.update(t for t in targets if t in paths and t != name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph[node]):
            cycle = visit(nxt)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle is not None:
            return cycle
    return None


def test_core_has_no_import_cycle():
    graph = import_graph()
    assert graph.get(f"{CORE}.spec"), "the graph reads the spec's imports"
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
