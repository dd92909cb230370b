"""Rebuilding trained models from checkpoint folders: translators and language models.

``load_model(dir)`` rebuilds a translator (``attnkit translate train``, ``attnkit demo``)
through the model registry; ``load_lm_checkpoint(dir)`` a language model (``attnkit lm
train``), also from the folder layout before the one checkpoint format (``model.pt``,
``config.json`` with a ``cell``, ``vocab.json``). Both check the files' sha256, load with
``weights_only`` and return the model in eval mode.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from attnkit.checkpoint import (
    CONFIG_NAME,
    is_legacy_lm_checkpoint,
    load_checkpoint,
    load_model_state,
)
from attnkit.data.text import Vocab
from attnkit.models.registry import build_model
from attnkit.models.rnn import RNNLM, build_lm

__all__ = ["MODEL_KEYS", "load_lm_checkpoint", "load_model"]

# the language-model config keys that define the model (the rest is informational)
MODEL_KEYS = ("cell", "num_hiddens", "num_layers", "bidirectional", "scratch", "reset_after")


def load_model(directory: str | os.PathLike, device: str | torch.device = "cpu"):
    """Rebuild the model of a checkpoint through the registry and load its weights.

    Returns ``(model, config)`` with ``model`` in eval mode on ``device`` and ``config``
    the parsed ``config.json``. Clear errors for an unknown arch or weights that do
    not fit the recorded model config.
    """
    ck = load_checkpoint(directory, map_location=device, trainer=False)
    cfg = ck.config
    for key in ("arch", "model_config", "data"):
        if key not in cfg:
            raise ValueError(f"checkpoint {directory} has no {key!r} in {CONFIG_NAME}")
    data = cfg["data"]
    try:
        sizes = len(data["src_vocab"]["idx_to_token"]), len(data["tgt_vocab"]["idx_to_token"])
    except (KeyError, TypeError):
        raise ValueError(f"checkpoint {directory} has no vocabularies in {CONFIG_NAME}") from None
    model = build_model(cfg["arch"], cfg["model_config"], *sizes)
    load_model_state(model, ck.model_state, directory)
    return model.to(device).eval(), cfg


def load_lm_checkpoint(
    directory: str | os.PathLike, device: torch.device | str = "cpu"
) -> tuple[RNNLM, Vocab, dict[str, Any]]:
    """Rebuild the model of an ``attnkit lm train`` checkpoint and load its weights.

    Returns ``(model, vocab, config)``, the model in eval mode on ``device``. Reads the
    one checkpoint format (sha256-checked, ``weights_only``) and the layout before it
    (``model.pt``, ``config.json`` with a ``cell``, ``vocab.json``).
    """
    directory = Path(directory)
    cfg_path = directory / CONFIG_NAME
    legacy = None
    if cfg_path.is_file():
        try:
            legacy = json.loads(cfg_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            legacy = None  # load_checkpoint names the problem
    if is_legacy_lm_checkpoint(directory, legacy):
        return _load_legacy_lm(directory, legacy, device)
    if not cfg_path.is_file():
        raise FileNotFoundError(
            f"{str(cfg_path)!r} not found: --checkpoint must be a folder written by "
            "`attnkit lm train --out DIR`"
        )
    ck = load_checkpoint(directory, map_location=device, trainer=False, task="lm")
    config = ck.config
    missing = [k for k in (*MODEL_KEYS, "vocab") if k not in config]
    if missing:
        raise ValueError(f"checkpoint {directory} lacks {missing} in {CONFIG_NAME}")
    vocab = Vocab.from_dict(config["vocab"])
    model = _build(config, len(vocab))
    load_model_state(model, ck.model_state, directory)
    return model.to(device).eval(), vocab, config


def _build(config: dict[str, Any], vocab_size: int) -> RNNLM:
    return build_lm(
        config["cell"], vocab_size, config["num_hiddens"], config["num_layers"],
        config["bidirectional"], config["scratch"], reset_after=config["reset_after"],
    )  # fmt: skip


def _load_legacy_lm(directory: Path, config: dict, device) -> tuple[RNNLM, Vocab, dict]:
    """The layout before the one format: model.pt (state_dict), config.json, vocab.json."""
    for name in ("model.pt", "vocab.json"):
        if not (directory / name).is_file():
            raise FileNotFoundError(
                f"{str(directory / name)!r} not found: {directory} is an incomplete language-"
                "model checkpoint of the old layout; train it again with `attnkit lm train`"
            )
    vocab = Vocab.from_dict(json.loads((directory / "vocab.json").read_text(encoding="utf-8")))
    model = _build(config, len(vocab))
    try:
        state = torch.load(directory / "model.pt", map_location=device, weights_only=True)
    except Exception as e:  # unpickling errors of every kind
        raise ValueError(f"could not load {directory / 'model.pt'}: {e}") from None
    load_model_state(model, state, directory)
    return model.to(device).eval(), vocab, config
