"""The package's import graph: layers that hold, and no cycles (imports inside functions
count too).

``LAYERS`` is the one statement of the order, bottom to top (the README's and
docs/architecture.md's map): a module may import its own package and any package of a
lower layer, never a higher layer nor a sibling of its own layer.
"""

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
            # ``from attnkit import metrics`` imports attnkit.metrics, not the package root
            subs = [f"{base}.{alias.name}" for alias in node.names]
            targets = [t for t in subs if t in modules] or [base]
            if len(targets) < len(subs):
                targets.append(base)
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


LAYERS = [
    ("i18n",),  # the message catalog and the language in force, below everything
    ("_validate",),  # the argument checks, below everything
    ("checkpoint", "cpu_memory", "metrics", "viz", "distributed"),  # foundation
    ("attention", "data"),
    ("models",),
    ("convert",),  # other formats' checkpoints (Hugging Face) in and out of attnkit's models
    ("inference",),
    ("training",),
    ("views",),  # the attention views drawn inline in notebooks and by the explorer
    ("tour", "serve", "d2l"),  # applications over the core
    ("exercises",),  # the book's exercises, answered with the tour's experiments
    ("",),  # the package root: attnkit/__init__.py re-exports the public API
    ("cli",),  # the `attnkit` command
    ("__main__",),  # python -m attnkit
]


def _package(module: str) -> str:
    """attnkit.training.lm -> "training"; attnkit -> "" (the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(module: str) -> int:
    package = _package(module)
    for index, names in enumerate(LAYERS):
        if package in names:
            return index
    raise AssertionError(f"{module}: package {package!r} is in no layer of LAYERS")


def _upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if _package(target) == _package(module):
                continue
            if _layer(target) >= _layer(module):
                found.append(
                    f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
                )
    return found


def test_every_package_has_a_layer():
    for module in _graph():
        _layer(module)


def test_lower_layers_never_import_higher_ones():
    graph = _graph()
    # lazy imports count: the translator imports its loader inside a classmethod
    assert "attnkit.inference.loading" in graph["attnkit.inference.translator"]
    problems = _upward_imports(graph)
    assert problems == [], "\n".join(problems)


def test_the_layer_check_finds_an_upward_and_a_sibling_import():
    graph = {
        "attnkit.data.subword": {"attnkit.training.engine", "attnkit.checkpoint"},
        "attnkit.attention.masking": {"attnkit.data.text"},
        "attnkit.training.engine": {"attnkit.training.optim", "attnkit.models.rnn"},
    }
    assert _upward_imports(graph) == [
        "attnkit.attention.masking (layer 3) imports attnkit.data.text (layer 3)",
        "attnkit.data.subword (layer 3) imports attnkit.training.engine (layer 7)",
    ]


def test_no_import_cycles_lazy_imports_included():
    graph = _graph()
    assert {"attnkit.checkpoint", "attnkit.training.optim"} <= graph["attnkit.training.engine"]
    cycles = _cycles(graph)
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_finds_a_cycle():
    type_only = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n")
    assert not any(
        isinstance(n, ast.Import) and n.names[0].name == "a" for n in _runtime_nodes(type_only)
    )
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
