"""Weights-only snapshots of a training run, for checkpoint averaging.

The engine writes them into ``<out_dir>/snapshots/`` (rank 0 only)::

    step-00001234.pt     the model's state_dict (torch.save, written atomically)
    index.json           {"format": "attnkit-snapshots", "version": 1, "snapshots": [
                            {"file", "step", "epoch", "batch_in_epoch", "train_seconds",
                             "sha256"}, ...]}  (oldest first)

``epoch`` is the 1-based epoch the step belongs to, ``batch_in_epoch`` the batches of it
done, ``train_seconds`` the training wall time up to the snapshot, counted over resumed
runs too. ``attnkit.training.averaging`` reads them back (checking each sha256).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path
from typing import Any

import torch

from attnkit.checkpoint import atomic_write
from attnkit.i18n import _

__all__ = ["INDEX_NAME", "SNAPSHOT_DIR", "Snapshots", "read_index"]

SNAPSHOT_DIR = "snapshots"
INDEX_NAME = "index.json"
FORMAT = "attnkit-snapshots"


def read_index(directory: str | Path) -> list[dict[str, Any]]:
    """The entries of ``directory/index.json`` (oldest first); [] when there is no index.

    A damaged index is a ValueError naming it. The files themselves are not checked.
    """
    path = Path(directory) / INDEX_NAME
    if not path.exists():
        return []
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        message = _("snapshot index {path} is damaged (not valid JSON: {error})")
        raise ValueError(message.format(path=path, error=e)) from None
    entries = record.get("snapshots") if isinstance(record, dict) else None
    if (
        not isinstance(record, dict)
        or record.get("format") != FORMAT
        or not isinstance(entries, list)
    ):
        message = _("{path} is not an attnkit snapshot index (format != {format!r})")
        raise ValueError(message.format(path=path, format=FORMAT))
    for entry in entries:
        name = entry.get("file") if isinstance(entry, dict) else None
        # plain file names inside the folder only: never a path from the index
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            message = _("snapshot index {path} is damaged (bad entry {entry!r})")
            raise ValueError(message.format(path=path, entry=entry))
        if not isinstance(entry.get("step"), int) or not isinstance(entry.get("sha256"), str):
            message = _("snapshot index {path} is damaged (bad entry {entry!r})")
            raise ValueError(message.format(path=path, entry=entry))
    return entries


def _write_index(directory: Path, entries: list[dict[str, Any]]) -> None:
    text = json.dumps({"format": FORMAT, "version": 1, "snapshots": entries}, indent=2)
    atomic_write(directory / INDEX_NAME, lambda tmp: Path(tmp).write_text(text))


class Snapshots:
    """Writes the snapshots of one ``fit`` (see the module docstring).

    ``every_steps``: after each optimizer step that is a multiple of it; ``every_s``: after
    the first step past each multiple of it in training seconds (``seconds_before`` = the
    seconds of earlier runs); ``keep``: the newest N are kept (0 = all). ``fresh``: the run
    starts from step 0, so the first write drops the entries of an earlier run. A write
    also drops entries at its step or later (left by a run that went on past the
    checkpoint this one resumed from).
    """

    def __init__(
        self,
        out_dir: str | Path,
        every_steps: int,
        every_s: float,
        keep: int,
        seconds_before: float = 0.0,
        fresh: bool = False,
    ) -> None:
        self.directory = Path(out_dir) / SNAPSHOT_DIR
        self.every_steps, self.every_s, self.keep = every_steps, every_s, keep
        self._last_seconds = seconds_before
        self._fresh = fresh

    def due(self, step: int, seconds: float) -> bool:
        by_steps = bool(self.every_steps) and step % self.every_steps == 0
        by_time = bool(self.every_s) and math.floor(seconds / self.every_s) > math.floor(
            self._last_seconds / self.every_s
        )
        self._last_seconds = seconds
        return by_steps or by_time

    def write(
        self, state_dict: dict[str, torch.Tensor], step: int, epoch: int, batch: int, seconds: float
    ) -> Path:
        """Save ``state_dict`` as the snapshot of ``step`` and update the index."""
        buf = io.BytesIO()
        torch.save({k: v.detach().cpu() for k, v in state_dict.items()}, buf)
        data = buf.getvalue()
        name = f"step-{step:08d}.pt"
        atomic_write(self.directory / name, lambda tmp: Path(tmp).write_bytes(data))
        old = [] if self._fresh else read_index(self.directory)
        if self._fresh:  # an earlier run's snapshots, whatever is left of them
            old = [{"file": p.name} for p in self.directory.glob("step-*.pt") if p.name != name]
        self._fresh = False
        entries = [e for e in old if "step" in e and e["step"] < step]
        entries.append({
            "file": name, "step": step, "epoch": epoch, "batch_in_epoch": batch,
            "train_seconds": round(seconds, 3), "sha256": hashlib.sha256(data).hexdigest(),
        })  # fmt: skip
        if self.keep:
            entries = entries[-self.keep :]
        _write_index(self.directory, entries)  # the index first: it never names a lost file
        kept = {e["file"] for e in entries}
        for entry in old:
            if entry["file"] not in kept:
                (self.directory / entry["file"]).unlink(missing_ok=True)
        return self.directory / name
