"""The package's import graph has no cycles, counting imports inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

import attnkit

ROOT = Path(attnkit.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST):
    """Every node but the bodies of ``if TYPE_CHECKING:`` (annotations only, never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            yield from (n for child in node.orelse for n in ast.walk(child))
            continue
        yield node
        yield from _runtime_nodes(node)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """attnkit modules imported anywhere in ``path`` when it runs (module level, functions,
    classes; not under ``if TYPE_CHECKING:``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in modules:  # the longest module prefix
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules) for p in paths}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt.startswith(node + "."):  # a package importing its own children
                continue
            if state.get(nxt) == "open":
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_no_import_cycles_lazy_imports_included():
    graph = _graph()
    # lazy imports count: checkpoint.load_model imports the registry inside the function
    assert "attnkit.models.registry" in graph["attnkit.training.checkpoint"]
    assert {"attnkit.training.checkpoint", "attnkit.training.optim"} <= graph[
        "attnkit.training.engine"
    ]
    cycles = _cycles(graph)
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_finds_a_cycle():
    type_only = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n")
    assert not any(
        isinstance(n, ast.Import) and n.names[0].name == "a" for n in _runtime_nodes(type_only)
    )
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
