"""Checkpoint averaging: the mean of the weights of a run's last N snapshots.

The engine writes weights-only snapshots into ``<out_dir>/snapshots/`` when
``snapshot_every_steps``/``snapshot_every_s`` is set (``attnkit.training.snapshots``);
``average_checkpoint(out_dir, last=5, out="avg")`` writes a new checkpoint folder with
their mean, the source's config.json fields and an ``"averaged"`` record::

    "averaged": {"snapshots": [1000, 1200, ...], "source": "runs/x"}

It has no trainer state, so ``Engine.resume`` refuses it; ``load_model`` (translators)
and ``load_checkpoint`` load it like any checkpoint.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from attnkit._validate import positive_int
from attnkit.checkpoint import atomic_write, read_checkpoint_config, save_checkpoint
from attnkit.i18n import _
from attnkit.training.snapshots import INDEX_NAME, SNAPSHOT_DIR, read_index

__all__ = ["average_checkpoint", "average_state_dicts", "list_snapshots"]

CARRIED_FILES = "tokenizer-*"  # files beside the weights that a checkpoint needs (subwords)
# written by save_checkpoint itself
_RECORD_KEYS = ("format", "version", "files", "sha256")


def average_state_dicts(state_dicts) -> dict[str, torch.Tensor]:
    """The elementwise mean of ``state_dicts`` (computed in float64, cast back to each
    tensor's dtype); integer and bool tensors (counters) are the last one's.

    Every state dict must have the same keys and shapes: a ValueError names the key.
    """
    state_dicts = list(state_dicts)
    if not state_dicts:
        raise ValueError(_("average_state_dicts needs at least one state dict, got none"))
    first = state_dicts[0]
    for i, sd in enumerate(state_dicts[1:], 1):
        if sd.keys() != first.keys():
            diff = sorted(set(sd.keys()) ^ set(first.keys()))
            message = _(
                "state dict {i} does not have the keys of state dict 0: key {key!r} is "
                "in one only ({count} differ)"
            )
            raise ValueError(message.format(i=i, key=diff[0], count=len(diff)))
    averaged = {}
    for key, value in first.items():
        tensors = [sd[key] for sd in state_dicts]
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor):
                message = _("key {key!r} of state dict {i} is not a tensor: {type}")
                raise ValueError(message.format(key=key, i=i, type=type(t)))
            if t.shape != value.shape:
                message = _(
                    "key {key!r} has shape {shape} in state dict {i} but {shape0} in state dict 0"
                )
                raise ValueError(
                    message.format(key=key, shape=tuple(t.shape), i=i, shape0=tuple(value.shape))
                )
        last = tensors[-1]
        if not (last.is_floating_point() or last.is_complex()):
            averaged[key] = last.clone()
            continue
        wide = torch.complex128 if last.is_complex() else torch.float64
        total = torch.zeros(last.shape, dtype=wide, device=last.device)
        for t in tensors:
            total += t.to(device=last.device, dtype=wide)
        averaged[key] = (total / len(tensors)).to(last.dtype)
    return averaged


def _snapshot_folder(directory: str | os.PathLike) -> Path:
    """``directory/snapshots`` of a run, or ``directory`` itself when it holds the index."""
    directory = Path(directory)
    if (directory / INDEX_NAME).exists():
        return directory
    return directory / SNAPSHOT_DIR


def list_snapshots(directory: str | os.PathLike, check: bool = True) -> list[dict[str, Any]]:
    """The snapshots of a run (its out_dir, or the snapshots folder), oldest first.

    Each entry is the index's (file, step, epoch, batch_in_epoch, train_seconds, sha256)
    plus ``path``. ``check``: every file is checked: a missing one is a FileNotFoundError
    and a damaged one (sha256 differs from the index) a ValueError, both naming the file.
    """
    folder = _snapshot_folder(directory)
    if not (folder / INDEX_NAME).is_file():
        message = _("no snapshots in {directory}: {index} is missing")
        raise FileNotFoundError(message.format(directory=directory, index=folder / INDEX_NAME))
    entries = [{**entry, "path": folder / entry["file"]} for entry in read_index(folder)]
    for entry in entries if check else ():
        _check_file(entry)
    return entries


def _check_file(entry: dict[str, Any]) -> bytes:
    path = entry["path"]
    if not path.is_file():
        message = _("snapshot {path} is missing (listed in {index})")
        raise FileNotFoundError(message.format(path=path, index=INDEX_NAME))
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        message = _("snapshot {path} is damaged (sha256 does not match {index})")
        raise ValueError(message.format(path=path, index=INDEX_NAME))
    return data


def _load_snapshot(entry: dict[str, Any]) -> dict[str, torch.Tensor]:
    data, path = _check_file(entry), entry["path"]
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # unpickling errors of every kind
        message = _("could not load snapshot {path}: {error}")
        raise ValueError(message.format(path=path, error=e)) from None
    if not isinstance(state, dict):
        raise ValueError(_("snapshot {path} is not a state dict").format(path=path))
    return state


def average_checkpoint(directory: str | os.PathLike, last: int, out: str | os.PathLike) -> Path:
    """Write a new checkpoint folder ``out``: the weights averaged over the last ``last``
    snapshots of the run in ``directory`` (its checkpoint folder = out_dir).

    config.json keeps the source checkpoint's fields and adds ``"averaged":
    {"snapshots": [steps], "source": directory}``; there is no trainer state (it cannot
    be resumed). The files a checkpoint carries beside its weights (``tokenizer-*``: the
    subword models) are copied. ``out`` must not exist yet (or be an empty folder).
    """
    positive_int("last", last)
    directory, out = Path(directory), Path(out)
    config = read_checkpoint_config(directory, task=None)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        message = _("{out} exists and is not an empty folder: choose a new one")
        raise FileExistsError(message.format(out=out))
    snapshots = list_snapshots(directory, check=False)  # the chosen ones are checked
    if len(snapshots) < last:
        message = _("averaging the last {last} snapshots needs {last}, but {directory} has {found}")
        raise ValueError(message.format(last=last, directory=directory, found=len(snapshots)))
    chosen = snapshots[-last:]
    state = average_state_dicts(_load_snapshot(s) for s in chosen)
    record = {k: v for k, v in config.items() if k not in _RECORD_KEYS}
    record["averaged"] = {"snapshots": [s["step"] for s in chosen], "source": str(directory)}
    out.mkdir(parents=True, exist_ok=True)
    for extra in sorted(directory.glob(CARRIED_FILES)):  # config.json names them by sha256
        atomic_write(out / extra.name, lambda tmp, src=extra: shutil.copyfile(src, tmp))
    return save_checkpoint(out, record, state)
