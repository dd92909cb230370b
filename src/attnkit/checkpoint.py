"""Checkpoint directories, one format for every task: atomic saves, safe loads.

A checkpoint is a directory::

    config.json              the task ("translation", "lm"), what rebuilds its model and data
                             (arch/model config/vocabularies...), epoch, step, metrics history,
                             and the names + sha256 of the two files below (the commit record)
    model-<tag>.pt           model state_dict (torch.save)
    trainer-<tag>.pt         optimizer state, position in the run, RNG and loader states
    *.png, samples.txt       written by the task (curves)

Saving writes the two tensor files under fresh names (temp file + ``os.replace``),
then replaces ``config.json`` atomically, then deletes files no longer referenced.
``config.json`` is the single commit point: a save that fails at any moment leaves
the previous checkpoint loadable (every file is fsynced before its rename, the folder
after the renames). A save that fails (a full disk, a folder that is not writable, a file
removed under the run) raises one ``CheckpointWriteError`` (an ``OSError``) that names the
folder and the cause, after removing what it wrote: no temporary or orphaned file is left
behind (and the next save sweeps those of a save killed mid-write). ``check_writable`` asks the same of a folder before a run starts. Loading
checks the sha256 of each file and uses ``torch.load(weights_only=True)``, which only
rebuilds tensors and plain containers.

Older formats: version 1 (translators before the task field) loads as a translation
checkpoint. A language-model folder of the layout before this format (``model.pt``,
``vocab.json``, a ``config.json`` with a "cell" and no "format") is not read: it is
refused with one error that names it and says to train again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import random
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnkit.i18n import N_, _

__all__ = [
    "CONFIG_NAME",
    "Checkpoint",
    "CheckpointWriteError",
    "atomic_write",
    "check_writable",
    "get_rng_state",
    "load_checkpoint",
    "load_model_state",
    "read_checkpoint_config",
    "save_checkpoint",
    "set_rng_state",
]

CONFIG_NAME = "config.json"
FORMAT = "attnkit-checkpoint"
VERSION = 2  # 2: a "task" field; 1 (translators only) still loads
TASK_NAMES = {
    "translation": N_("a translator checkpoint (from `attnkit translate train` or `attnkit demo`)"),
    "lm": N_("a language-model checkpoint (from `attnkit lm train`)"),
}


@dataclass
class Checkpoint:
    path: Path
    config: dict[str, Any]  # the parsed config.json
    model_state: dict[str, torch.Tensor]
    trainer_state: dict[str, Any] | None


class CheckpointWriteError(OSError):
    """A checkpoint could not be written; the previous one is as it was (see the module)."""


def _write_error(directory: Path, e: OSError, previous: bool = True) -> CheckpointWriteError:
    cause = e.strerror or str(e)
    what = f" ({Path(e.filename).name})" if getattr(e, "filename", None) else ""
    kept = _("the previous checkpoint there is kept") if previous else _("nothing was written")
    message = _(
        "could not save the checkpoint in {directory}: {cause}{what}; {kept} "
        "(free some space, or choose a writable --out)"
    )
    error = CheckpointWriteError(
        message.format(directory=directory, cause=cause, what=what, kept=kept)
    )
    error.errno = e.errno
    return error


def check_writable(directory: str | os.PathLike) -> Path:
    """Create ``directory`` if need be and write (and remove) a probe file in it; a
    ``CheckpointWriteError`` when that fails (an --out that is not writable)."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".write-check.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        message = _("cannot write checkpoints in {directory}: {reason}; choose a writable --out")
        raise CheckpointWriteError(
            message.format(directory=directory, reason=e.strerror or e)
        ) from None
    return directory


def _fsync_directory(directory: Path) -> None:
    """Make the renames in ``directory`` durable (where the platform allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows: folders cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EBADF):  # not supported for folders here
            raise
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, write: Callable[[str], Any]) -> None:
    """Call ``write(tmp_path)``, fsync, then rename onto ``path`` (same folder, so atomic):
    a crash leaves the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def _torch_bytes(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def save_checkpoint(
    directory: str | os.PathLike,
    config: dict[str, Any],
    model_state: dict[str, torch.Tensor],
    trainer_state: dict[str, Any] | None = None,
) -> Path:
    """Atomically write a checkpoint into ``directory`` (created if needed); return it.

    ``config`` must be JSON-serializable; ``model_state``/``trainer_state`` may hold
    only tensors, numbers, strings, None and lists/tuples/dicts of them.
    """
    if not isinstance(config, dict):
        raise TypeError(_("config must be a dict, got {type}").format(type=type(config).__name__))
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _write_error(directory, e, previous=False) from e
    tag = f"{int(config.get('step', 0)):08d}-{secrets.token_hex(3)}"
    files = {"model": f"model-{tag}.pt"}
    payloads = {"model": _torch_bytes(model_state)}
    if trainer_state is not None:
        files["trainer"] = f"trainer-{tag}.pt"
        payloads["trainer"] = _torch_bytes(trainer_state)
    record = {
        **config,
        "format": FORMAT,
        "version": VERSION,
        "files": files,
        "sha256": {k: hashlib.sha256(b).hexdigest() for k, b in payloads.items()},
    }
    text = json.dumps(record, indent=2, sort_keys=False)  # fails before touching the disk
    previous = (directory / CONFIG_NAME).is_file()
    # the files beside it that the record names (a translator's or a language model's
    # tokenizer, written before the first save): one removed under a running job is an
    # error when it replaces a checkpoint (a first save may come before its tokenizer)
    data = config.get("data")  # a translator's data record; a language model's is not a dict
    tokenizer = (data.get("tokenizer") if isinstance(data, dict) else None) or {}
    lm_tokenizer = config.get("tokenizer_model")
    named = [*tokenizer.get("files", [])]
    if isinstance(lm_tokenizer, dict) and isinstance(lm_tokenizer.get("file"), str):
        named.append(lm_tokenizer["file"])
    missing = [name for name in named if previous and not (directory / name).is_file()]
    if missing:
        message = _(
            "could not save the checkpoint in {directory}: {missing} was removed "
            "under the running job (the checkpoint would not load without it); "
            "nothing was written. Restore the file, or train into a new --out"
        )
        raise CheckpointWriteError(message.format(directory=directory, missing=", ".join(missing)))
    try:
        for key, data in payloads.items():
            _atomic_write_bytes(directory / files[key], data)
        _fsync_directory(directory)
        _atomic_write_bytes(directory / CONFIG_NAME, text.encode())  # the commit point
    except BaseException as e:
        for name in files.values():  # not committed: this save's files go
            (directory / name).unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, CheckpointWriteError):
            raise _write_error(directory, e, previous) from e
        raise
    with contextlib.suppress(OSError):  # committed already: durable or not, it is done
        _fsync_directory(directory)
    # files of the checkpoint this one replaces (an --overwrite run's old tokenizer too)
    keep = {*files.values(), *named}
    for old in [*directory.glob("model-*.pt"), *directory.glob("trainer-*.pt"),
                *directory.glob("tokenizer-*.model")]:  # fmt: skip
        if old.name not in keep:
            old.unlink(missing_ok=True)
    # temporary files of a save killed mid-write (kill -9, power loss): never read, swept
    for stale in [*directory.glob(".model-*.tmp"), *directory.glob(".trainer-*.tmp"),
                  *directory.glob(f".{CONFIG_NAME}.*.tmp"),
                  *directory.glob(".write-check.*.tmp")]:  # fmt: skip
        stale.unlink(missing_ok=True)
    return directory


def read_checkpoint_config(
    directory: str | os.PathLike, task: str | None = "translation"
) -> dict[str, Any]:
    """Parse and check ``config.json`` of a checkpoint directory (no tensors loaded).

    ``task``: the task the caller needs (None: any); another task's checkpoint is a
    ValueError that names both.
    """
    if task is not None and not isinstance(task, str):  # a Task's name: any str
        message = _("task must be a task's name (str) or None, got {type}")
        raise TypeError(message.format(type=type(task).__name__))
    directory = Path(directory)
    if not directory.is_dir():
        message = _("no checkpoint at {directory}: not a directory")
        raise FileNotFoundError(message.format(directory=directory))
    cfg_path = directory / CONFIG_NAME
    if not cfg_path.is_file():
        message = _("no checkpoint at {directory}: {config_name} is missing")
        raise FileNotFoundError(message.format(directory=directory, config_name=CONFIG_NAME))
    try:
        config = json.loads(cfg_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        message = _("checkpoint {cfg_path} is corrupted (not valid JSON: {error})")
        raise ValueError(message.format(cfg_path=cfg_path, error=e)) from None
    if isinstance(config, dict) and config.get("format") is None and "cell" in config:
        message = _(
            "{directory} is a language-model checkpoint of the layout before "
            "attnkit's checkpoint format (model.pt, vocab.json, a config.json "
            'without "format"), which attnkit does not read: train the model '
            "again with `attnkit lm train --out DIR`"
        )
        raise ValueError(message.format(directory=directory))
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        message = _("{cfg_path} is not an attnkit checkpoint (format != {format!r})")
        raise ValueError(message.format(cfg_path=cfg_path, format=FORMAT))
    elif config.get("version") not in (1, VERSION):
        message = _(
            "checkpoint {directory} has format version {version!r}; this attnkit "
            "reads versions 1 and {supported}: use a newer attnkit"
        )
        raise ValueError(
            message.format(directory=directory, version=config.get("version"), supported=VERSION)
        )
    found = config.get("task", "translation")  # version 1 had translators only
    if task is not None and found != task:
        what = _(TASK_NAMES[found]) if found in TASK_NAMES else _("a {task!r} checkpoint")
        needs = _(TASK_NAMES[task]) if task in TASK_NAMES else repr(task)
        message = _("{directory} is {what}; this needs {needs}")
        raise ValueError(
            message.format(directory=directory, what=what.format(task=found), needs=needs)
        )
    files, digests = config.get("files"), config.get("sha256")
    if not isinstance(files, dict) or "model" not in files or not isinstance(digests, dict):
        message = _("checkpoint {cfg_path} is corrupted (no 'files'/'sha256' entries)")
        raise ValueError(message.format(cfg_path=cfg_path))
    for key, name in files.items():
        # plain file names inside the directory only: never a path from config.json
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            message = _("checkpoint {cfg_path} is corrupted (bad file name {name!r})")
            raise ValueError(message.format(cfg_path=cfg_path, name=name))
        if not isinstance(digests.get(key), str):
            message = _("checkpoint {cfg_path} is corrupted (no sha256 for {key!r})")
            raise ValueError(message.format(cfg_path=cfg_path, key=key))
    return config


def _load_file(directory: Path, config: dict, key: str, map_location) -> Any:
    name = config["files"][key]
    path = directory / name
    if not path.is_file():
        message = _("checkpoint {directory} is incomplete: {name} is missing")
        raise FileNotFoundError(message.format(directory=directory, name=name))
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != config["sha256"][key]:
        message = _("checkpoint file {path} is corrupted (sha256 does not match config.json)")
        raise ValueError(message.format(path=path))
    try:
        return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as e:  # unpickling errors of every kind
        message = _("could not load checkpoint file {path}: {error}")
        raise ValueError(message.format(path=path, error=e)) from None


def load_checkpoint(
    directory: str | os.PathLike,
    map_location: str | torch.device = "cpu",
    trainer: bool = True,
    task: str | None = "translation",
) -> Checkpoint:
    """Load a checkpoint written by ``save_checkpoint``; clear errors if missing or corrupted."""
    directory = Path(directory)
    config = read_checkpoint_config(directory, task)
    model_state = _load_file(directory, config, "model", map_location)
    trainer_state = None
    if trainer and "trainer" in config.get("files", {}):
        trainer_state = _load_file(directory, config, "trainer", map_location)
    return Checkpoint(directory, config, model_state, trainer_state)


# ----------------------------------------------------------------------------- RNG states


def get_rng_state() -> dict[str, Any]:
    """torch (CPU + CUDA), Python and NumPy RNG states as weights_only-loadable data."""
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {
            "keys": torch.from_numpy(np_state[1].astype(np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states saved by ``get_rng_state``."""
    torch.set_rng_state(state["torch"].cpu())
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(
        (
            "MT19937",
            n["keys"].numpy().astype(np.uint32),
            n["pos"],
            n["has_gauss"],
            n["cached_gaussian"],
        )
    )
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def load_model_state(
    model: torch.nn.Module, state: dict[str, torch.Tensor], source: Any = "checkpoint"
) -> None:
    """``model.load_state_dict`` with an error that says which checkpoint does not fit."""
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        first = str(e).splitlines()[0:3]
        message = _(
            "weights in {source} do not fit this model ({reason}); was it written "
            "for another arch or model config?"
        )
        raise ValueError(message.format(source=source, reason=" ".join(first))) from None
