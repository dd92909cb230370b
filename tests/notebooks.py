"""Executing a notebook the way Jupyter does, for the tests of the project's notebooks:
nbclient with the "python3" kernel (ipykernel's spec for this interpreter, the venv's
python), in a working folder of the test's. A cell that fails is a test failure; a kernel
that cannot start (no ZMQ sockets, no kernelspec, a startup timeout) skips, saying why."""

from __future__ import annotations

from pathlib import Path

import pytest

HINT = "not installed (pip install -e '.[dev]')"


def nbformat_module():
    """nbformat, with nbclient and ipykernel checked too (skips when one is missing)."""
    nbformat = pytest.importorskip("nbformat", reason=f"nbformat {HINT}")
    pytest.importorskip("nbclient", reason=f"nbclient {HINT}")
    pytest.importorskip("ipykernel", reason=f"ipykernel {HINT}")
    return nbformat


def execute(nb, cwd: Path, timeout: int = 120):
    """Run every cell of ``nb`` (an nbformat notebook, filled in place) in folder ``cwd``;
    returns ``nb``."""
    import nbclient
    from nbclient.exceptions import CellExecutionError

    client = nbclient.NotebookClient(nb, timeout=timeout, startup_timeout=60, kernel_name="python3",
                                     resources={"metadata": {"path": str(cwd)}})  # fmt: skip
    try:
        client.execute()
    except CellExecutionError:
        raise  # a cell failed: that is a test failure, not an environment problem
    except Exception as e:
        pytest.skip(f"the Jupyter kernel could not start or run: {type(e).__name__}: {e}")
    return nb
