"""The library's floors: every import points one way, and the top of `lmrl/` holds no benchmark modules.

Read from the source (AST) without importing anything; function-level imports count as much as top-level ones."""

from __future__ import annotations

import ast
from pathlib import Path

LMRL = Path(__file__).resolve().parents[1] / "lmrl"


def module_name(path: Path) -> str:
    parts = path.relative_to(LMRL.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """{module: the lmrl modules it imports}, for every module under lmrl/."""
    paths = {module_name(p): p for p in sorted(LMRL.rglob("*.py"))}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, `level - 1` floors up
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # `from a.b import c` imports the module a.b.c when there is one, else names of a.b
                targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base
                               for alias in node.names)
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read():
    graph = import_graph()
    assert "lmrl.evaluation" in graph["lmrl.train"] and "lmrl.models.resolve" in graph["lmrl.models.factory"]


def test_no_two_modules_import_each_other():
    graph = import_graph()
    pairs = sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph[b])
    assert not pairs, f"modules that import each other: {pairs}"


def test_no_import_cycles():
    assert not cycles(import_graph()), f"import cycles: {cycles(import_graph())}"


def test_no_benchmark_modules_at_the_top_of_lmrl():
    assert not sorted(p.name for p in LMRL.glob("bench*.py")), "benchmarks live in lmrl/bench/"
