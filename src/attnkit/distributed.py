"""Multi-process training on ``torch.distributed``: process-group set-up and launching.

``torchrun --nproc_per_node=N -m attnkit translate train ...`` starts N processes with
``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT`` set;
``init_from_env`` turns that into a process group (NCCL when each process has a GPU,
Gloo on CPU) with a timeout, so a rank that dies makes the others fail instead of
hanging. ``launch`` is what ``--nproc N`` on the plain CLI runs: the same as torchrun.
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
import threading

import torch
import torch.distributed as dist

from attnkit._validate import positive_int
from attnkit.i18n import _

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "cleanup",
    "init_from_env",
    "launch",
    "without_nproc",
    "world_from_env",
]

DEFAULT_TIMEOUT_S = 300.0


def world_from_env() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's environment; (0, 1, 0) without it."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError as e:
        message = _("malformed torchrun environment (RANK/WORLD_SIZE/LOCAL_RANK): {error}")
        raise ValueError(message.format(error=e)) from None
    if world < 1 or not 0 <= rank < world:
        message = _("RANK={rank} and WORLD_SIZE={world} are inconsistent")
        raise ValueError(message.format(rank=rank, world=world))
    return rank, world, local


def init_from_env(
    device: str = "cpu", timeout_s: float | None = None, backend: str | None = None
) -> tuple[int, int]:
    """Initialize the default process group when launched with WORLD_SIZE > 1.

    Args:
        device: "cpu" -> Gloo; "cuda" -> NCCL, one GPU per local rank
            (``torch.cuda.set_device(LOCAL_RANK)``).
        timeout_s: collective timeout (default ``$ATTNKIT_DIST_TIMEOUT`` or 300 s).
        backend: override the backend choice.

    Returns:
        (rank, world_size); (0, 1) when not launched by torchrun.
    """
    rank, world, local = world_from_env()
    if world == 1 or (dist.is_available() and dist.is_initialized()):
        return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    if not dist.is_available():
        raise RuntimeError(_("torch.distributed is not available in this PyTorch build"))
    if timeout_s is None:
        timeout_s = float(os.environ.get("ATTNKIT_DIST_TIMEOUT", DEFAULT_TIMEOUT_S))
    if backend is None:
        backend = "nccl" if str(device).startswith("cuda") else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local)
    dist.init_process_group(
        backend=backend,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return rank, world


def cleanup() -> None:
    """Destroy the process group if one was set up (safe to call always)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def launch(nproc: int, argv: list[str], module: str | None = "attnkit", nnodes: int = 1) -> int:
    """Run ``python -m MODULE ARGV`` (or the script ``argv[0]`` when ``module`` is None)
    in ``nproc`` processes on this machine, as torchrun does.

    Returns the exit code: 0 when every rank succeeded; when a rank fails, the others
    are stopped, torchrun's error (naming the failed rank) is printed and 1 returned.
    """
    positive_int("--nproc", nproc)
    from torch.distributed.run import get_args_parser, run

    args = get_args_parser().parse_args(
        [
            f"--nnodes={nnodes}",
            f"--nproc_per_node={nproc}",
            "--standalone",
            "--max_restarts=0",
            *(["-m", module] if module else []),
            *argv,
        ]
    )
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        run(args)
    except Exception as e:  # torch.distributed.elastic ChildFailedError and friends
        print(_("attnkit: distributed run failed: {error}").format(error=e), file=sys.stderr)
        return 1
    finally:  # torchrun's agent installs its own handlers and leaves them behind
        if threading.current_thread() is threading.main_thread():
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
    return 0


def without_nproc(argv: list[str]) -> list[str]:
    """The command line minus its ``--nproc N`` / ``--nproc=N`` (what each rank runs)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            out.append(arg)
    return out
