"""Language-model checkpoints: a folder with weights, config and vocabulary.

Layout of ``DIR``: ``model.pt`` (``state_dict`` only, loaded with
``torch.load(weights_only=True)``, so no pickled code runs), ``config.json`` (what
``build_lm`` needs plus the training settings), ``vocab.json`` (``Vocab.to_dict``).
``attnkit lm train`` adds ``trainer.pt`` (``save_lm_train_state``): everything
``--resume`` needs in one file, written first, so it is consistent on its own: the run's
config, model and optimizer states, epochs done, the batch index within an interrupted
epoch with its partial totals and carried hidden state, the history, and the RNG states
(torch/Python/NumPy and the loader's). It holds only tensors and plain containers and
is read with ``torch.load(weights_only=True)`` as well.
Every file is written to a temporary name in the same folder and renamed, so a crash
never leaves a half-written checkpoint behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from attnkit.data.text import Vocab
from attnkit.models.rnn import RNNLM, build_lm

__all__ = [
    "MODEL_KEYS",
    "TRAIN_STATE_NAME",
    "atomic_write",
    "load_lm_checkpoint",
    "load_lm_train_state",
    "save_lm_checkpoint",
    "save_lm_train_state",
]

TRAIN_STATE_NAME = "trainer.pt"
_TRAIN_STATE_FORMAT = "attnkit-lm-train-state"
_TRAIN_STATE_VERSION = 1

# config keys that define the model (the rest is informational)
MODEL_KEYS = ("cell", "num_hiddens", "num_layers", "bidirectional", "scratch", "reset_after")


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename onto ``path`` (same folder, so atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_text(path: Path, text: str) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    atomic_write(path, write)


def save_lm_checkpoint(
    directory: str | os.PathLike, model: RNNLM, vocab: Vocab, config: dict[str, Any]
) -> Path:
    """Write ``model.pt``, ``config.json`` and ``vocab.json`` into ``directory``."""
    missing = [k for k in MODEL_KEYS if k not in config]
    if missing:
        raise ValueError(f"config lacks the model keys {missing}; expected all of {MODEL_KEYS}")
    directory = Path(directory)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    atomic_write(directory / "model.pt", lambda tmp: torch.save(state, tmp))
    _write_text(
        directory / "config.json", json.dumps({**config, "vocab_size": len(vocab)}, indent=2)
    )
    _write_text(directory / "vocab.json", json.dumps(vocab.to_dict()))
    return directory


def load_lm_checkpoint(
    directory: str | os.PathLike, device: torch.device | str = "cpu"
) -> tuple[RNNLM, Vocab, dict[str, Any]]:
    """Rebuild the model from ``config.json``, load the weights safely, return (model, vocab, config)."""
    directory = Path(directory)
    for name in ("model.pt", "config.json", "vocab.json"):
        if not (directory / name).is_file():
            raise FileNotFoundError(
                f"{str(directory / name)!r} not found: --checkpoint must be a folder written by "
                "`attnkit lm train --out DIR`"
            )
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    vocab = Vocab.from_dict(json.loads((directory / "vocab.json").read_text(encoding="utf-8")))
    model = build_lm(
        config["cell"],
        len(vocab),
        config["num_hiddens"],
        config["num_layers"],
        config["bidirectional"],
        config["scratch"],
        reset_after=config["reset_after"],
    )
    state = torch.load(directory / "model.pt", map_location=device, weights_only=True)
    model.load_state_dict(state)
    return model.to(device).eval(), vocab, config


def save_lm_train_state(directory: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Atomically write ``state`` (tensors, numbers, strings, None, lists/tuples/dicts)
    to ``directory/trainer.pt``, tagged with a format name and version."""
    path = Path(directory) / TRAIN_STATE_NAME
    payload = {**state, "format": _TRAIN_STATE_FORMAT, "version": _TRAIN_STATE_VERSION}
    atomic_write(path, lambda tmp: torch.save(payload, tmp))
    return path


def load_lm_train_state(
    directory: str | os.PathLike, map_location: torch.device | str = "cpu"
) -> dict[str, Any]:
    """Read ``directory/trainer.pt`` (``weights_only=True``); clear errors when it is
    missing, corrupted or not a language-model training state."""
    path = Path(directory) / TRAIN_STATE_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} not found: {directory} holds no resumable language-model run "
            "(checkpoints of `attnkit lm train` before resume support have none)"
        )
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # unpickling errors of every kind
        raise ValueError(f"could not load {path}: {e}") from None
    if not isinstance(state, dict) or state.get("format") != _TRAIN_STATE_FORMAT:
        raise ValueError(f"{path} is not a language-model training state")
    if state.get("version") != _TRAIN_STATE_VERSION:
        raise ValueError(
            f"{path} has format version {state.get('version')!r}; "
            f"this attnkit reads version {_TRAIN_STATE_VERSION}"
        )
    return state
