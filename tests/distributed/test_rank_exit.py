"""``python -m attnkit`` in a rank of a multi-process run ends without finalization."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# an atexit handler stands for the finalization a rank skips (where Gloo's worker threads
# could abort the process: src/attnkit/__main__.py); the command itself exits 2
_RUN = (
    "import atexit, runpy, sys; atexit.register(lambda: print('finalized', flush=True)); "
    "sys.argv[1:] = sys.argv[1:] or ['no-such-command']; "
    "runpy.run_module('attnkit', run_name='__main__')"
)


@pytest.mark.parametrize(
    ("world_size", "finalized"), [("2", False), ("1", True), (None, True), ("x", True)]
)
def test_a_rank_keeps_its_exit_code_and_output_but_skips_finalization(world_size, finalized):
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    if world_size is not None:
        env["WORLD_SIZE"] = world_size
    done = subprocess.run(
        [sys.executable, "-c", _RUN], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "no-such-command" in done.stderr  # the usage error, flushed before os._exit
    assert ("finalized" in done.stdout) == finalized


def test_a_ranks_buffered_output_is_flushed_before_it_ends():
    """stdout into a pipe is block-buffered: without the flush, os._exit would drop it."""
    env = {**os.environ, "WORLD_SIZE": "2"}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, "--help"], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "usage: attnkit" in done.stdout and "finalized" not in done.stdout
