"""Rebuilding trained models from checkpoint folders: translators and language models.

``load_model(dir)`` rebuilds a translator (``attnkit translate train``, ``attnkit demo``)
through the model registry; ``load_lm_checkpoint(dir)`` a language model (``attnkit lm
train``) of either arch: its config.json's "arch" ("rnn" when absent, as in checkpoints
written before the Transformer LM) names the config class (``models.registry.LM_ARCHS``).
Both read the one checkpoint format (``attnkit.checkpoint``), check the files' sha256,
load with ``weights_only`` and return the model in eval mode, its linear layers
``PrepackedLinear`` on the CPU (``prepack=True``: the same parameters, laid out once for
oneDNN, which decodes faster; see ``attnkit.inference.prepacked``). ``load_lm_tokenizer`` gives
a subword language model's tokenizer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from attnkit._validate import boolean
from attnkit.checkpoint import CONFIG_NAME, load_checkpoint, load_model_state
from attnkit.data.lm_subword import LMSubwordTokenizer
from attnkit.data.text import Vocab
from attnkit.inference.prepacked import prepack_linears
from attnkit.models.registry import build_model, lm_arch, lm_config, lm_model_keys

__all__ = ["MODEL_KEYS", "load_lm_checkpoint", "load_lm_tokenizer", "load_model"]

# the config keys that define a recurrent language model (the rest is informational);
# a Transformer LM's: lm_model_keys("transformer")
MODEL_KEYS = lm_model_keys("rnn")


def load_model(
    directory: str | os.PathLike, device: str | torch.device = "cpu", *, prepack: bool = True
):
    """Rebuild the model of a translator checkpoint through the registry, load its weights.

    Args:
        directory: a checkpoint folder of ``attnkit translate train`` or ``attnkit demo``.
        device: where the model goes.
        prepack: on the CPU, make the linear layers ``PrepackedLinear`` (inference; they
            train as plain ``nn.Linear``).

    Returns:
        ``(model, config)``: the model in eval mode on ``device``, and the parsed
        ``config.json``. Clear errors for an unknown arch, weights that do not fit the
        recorded model config, or another task's checkpoint.
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
    return _for_inference(model.to(device), prepack), cfg


def load_lm_checkpoint(
    directory: str | os.PathLike, device: torch.device | str = "cpu", *, prepack: bool = True
) -> tuple[Any, Vocab, dict[str, Any]]:
    """Rebuild the model of an ``attnkit lm train`` checkpoint and load its weights.

    Args:
        directory: a checkpoint folder written by ``attnkit lm train --out DIR``.
        device: where the model goes.
        prepack: as :func:`load_model`'s.

    Returns:
        ``(model, vocab, config)``: the model (an ``RNNLM`` or a ``DecoderLM``) in eval
        mode on ``device``, its vocabulary (a subword model's: its pieces), and the parsed
        ``config.json``.

    Raises:
        FileNotFoundError: no ``config.json`` in ``directory``.
        ValueError: a damaged checkpoint, another task's, or a folder of the layout before
            the one format (``model.pt``, ``vocab.json``), which is not read: train again.
    """
    directory = Path(directory)
    cfg_path = directory / CONFIG_NAME
    if not cfg_path.is_file():
        raise FileNotFoundError(
            f"{str(cfg_path)!r} not found: --checkpoint must be a folder written by "
            "`attnkit lm train --out DIR`"
        )
    ck = load_checkpoint(directory, map_location=device, trainer=False, task="lm")
    config = ck.config
    arch = lm_arch(config)
    keys = lm_model_keys(arch)
    missing = [k for k in (*keys, "vocab") if k not in config]
    if missing:
        raise ValueError(f"checkpoint {directory} lacks {missing} in {CONFIG_NAME}")
    vocab = Vocab.from_dict(config["vocab"])
    model = lm_config(arch, {k: config[k] for k in keys}).build(len(vocab))
    load_model_state(model, ck.model_state, directory)
    return _for_inference(model.to(device), prepack), vocab, config


def _for_inference(model, prepack: bool):
    """The model in eval mode, its linear layers prepacked when asked and on the CPU."""
    if boolean("prepack", prepack) and next(model.parameters()).device.type == "cpu":
        prepack_linears(model)
    return model.eval()


def load_lm_tokenizer(
    directory: str | os.PathLike, config: dict[str, Any]
) -> LMSubwordTokenizer | None:
    """The SentencePiece tokenizer of a language-model checkpoint trained with
    ``--tokenizer sentencepiece`` (its file beside config.json, sha256-checked), or None
    for a character or word model (their vocabulary is the checkpoint's "vocab")."""
    if config.get("tokenizer", "book") != "sentencepiece":
        return None
    return LMSubwordTokenizer.load(directory, config.get("tokenizer_model"))
