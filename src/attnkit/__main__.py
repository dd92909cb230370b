"""``python -m attnkit`` runs the command line (torchrun's ranks included).

A rank of a multi-process run (``WORLD_SIZE`` > 1) ends with ``os._exit`` after flushing
its output, skipping the interpreter's finalization. A rank that ran Gloo collectives can
still have a Gloo worker thread releasing the last collective's tensors at that point;
releasing a tensor takes the GIL, which a finalizing interpreter refuses by ending the
thread, and a C++ thread ended that way aborts the process (SIGABRT, "terminate called
without an active exception": 1 run in 4 of a 2-process CPU training, 2026-12-07, torch
2.13, the backtrace in ``c10d::ProcessGroupGloo::runLoop`` destroying an
``AsyncAllreduceWork``). By then the rank has written all it writes: checkpoints are closed
files and the process group is destroyed (``distributed.cleanup``).
"""

import contextlib
import os
import sys


def _is_rank() -> bool:
    """Whether torchrun (or ``--nproc``) started this process as one of several ranks."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def _end(code: object) -> None:
    """Exit as ``sys.exit(code)`` does (None: 0; a message: printed, 1), without
    finalization in a rank."""
    if not _is_rank():
        sys.exit(code)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, broken pipe: nothing to save
            stream.flush()
    os._exit(0 if code is None else code)


if __name__ == "__main__":
    from attnkit.cli import main

    try:
        code = main()
    except SystemExit as stop:  # argparse's usage errors, --help
        code = stop.code
    _end(code)
