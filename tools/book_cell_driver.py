"""Runs one section's cells in this fresh interpreter (started by ``book_conformance.py``).

    python book_cell_driver.py SPEC.json RESULT.json

SPEC: ``cells`` (sources), ``book_import`` (the line to replace) and ``import_line``,
``epochs`` (cap, or null for the book's counts), ``threads``, ``seed``. Cells run in one
namespace, in order, as a notebook runs them: the network is blocked, the seed is set
once at the top, a cell whose last statement is an expression shows its ``repr``.
RESULT: per cell, its status, what it printed, what it showed, and the error if it failed
(the run stops at the first failing cell, as a reader's would).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import socket
import sys
import time
import traceback


def block_network() -> None:
    """Internet connections leave with OSError, as on a machine that is offline.

    Local (AF_UNIX) sockets still work: DataLoader workers pass tensors through them.
    """
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex
    internet = (socket.AF_INET, socket.AF_INET6)

    def refuse(*args, **kwargs):
        raise OSError("network is blocked in the book conformance run (offline)")

    def guarded(original):
        def method(self, *args, **kwargs):
            if self.family in internet:
                refuse()
            return original(self, *args, **kwargs)

        return method

    socket.socket.connect = guarded(connect)  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded(connect_ex)  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]
    socket.getaddrinfo = refuse  # type: ignore[assignment]


class Tab:
    """The 1.0 notebooks' ``tab`` object: PyTorch is the selected framework."""

    def interact_select(self, *args, **kwargs) -> None:
        return None

    def selected(self, *names) -> bool:
        flat = [n for name in names for n in ([name] if isinstance(name, str) else name)]
        return "pytorch" in flat


class CapEpochs(ast.NodeTransformer):
    """``num_epochs = N`` (also inside tuple assignments) and ``max_epochs=N`` -> ``min(N, cap)``."""

    def __init__(self, cap: int):
        self.cap = cap
        self.changed = False

    def _capped(self, value: ast.expr) -> ast.expr:
        self.changed = True
        call = ast.Call(ast.Name("min", ast.Load()), [value, ast.Constant(self.cap)], [])
        return ast.copy_location(call, value)

    def visit_Assign(self, node: ast.Assign) -> ast.Assign:
        self.generic_visit(node)
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == "num_epochs":
                node.value = self._capped(node.value)
            elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                for i, element in enumerate(target.elts):
                    if isinstance(element, ast.Name) and element.id == "num_epochs":
                        node.value.elts[i] = self._capped(node.value.elts[i])
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        for keyword in node.keywords:
            if keyword.arg in ("max_epochs", "num_epochs"):
                keyword.value = self._capped(keyword.value)
        return node


def shown(value) -> str | None:
    """What a notebook shows for a cell's last expression (None: nothing)."""
    if value is None:
        return None
    items = value if isinstance(value, list | tuple) else [value]
    if items and all(type(v).__module__.startswith("matplotlib") for v in items):
        return None  # a plot's handles: the notebook shows the figure, not text
    return repr(value)


def prepare(source: str, book_import: str, import_line: str, cap: int | None) -> tuple:
    """The cell as run: the import replaced, epochs capped; returns (body, last expression)."""
    source = source.replace(book_import, import_line)
    tree = ast.parse(source)
    if cap is not None:
        tree = ast.fix_missing_locations(CapEpochs(cap).visit(tree))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    return tree, last


def main(spec_path: str, result_path: str) -> int:
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    block_network()
    import random

    import numpy as np
    import torch

    torch.set_num_threads(int(spec["threads"]))
    random.seed(spec["seed"])
    np.random.seed(spec["seed"])
    torch.manual_seed(spec["seed"])
    namespace: dict = {"__name__": "__main__", "tab": Tab()}
    outputs = []
    for index, source in enumerate(spec["cells"]):
        printed = io.StringIO()
        record = {"cell": index, "status": "ok", "stdout": "", "shown": None, "seconds": 0.0}
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(printed):
                body, last = prepare(
                    source, spec["book_import"], spec["import_line"], spec["epochs"]
                )
                exec(compile(body, f"<cell {index}>", "exec"), namespace)
                if last is not None:
                    record["shown"] = shown(
                        eval(compile(last, f"<cell {index}>", "eval"), namespace)
                    )
        except BaseException as error:  # the report says which cell stopped and why
            record["status"] = "error"
            record["error"] = f"{type(error).__name__}: {error}".splitlines()[0][:300]
            record["traceback"] = traceback.format_exc()[-3000:]
        record["seconds"] = time.perf_counter() - start
        record["stdout"] = printed.getvalue()
        outputs.append(record)
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
        if record["status"] == "error":
            break
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump({"outputs": outputs}, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
