"""Rebuilding trained models from checkpoint folders: translators and language models.

``load_model(dir)`` rebuilds a translator (``attnkit translate train``, ``attnkit demo``)
through the model registry; ``load_lm_checkpoint(dir)`` a language model (``attnkit lm
train``) of either arch: its config.json's "arch" ("rnn" when absent, as in checkpoints
written before the Transformer LM) names the config class (``models.registry.LM_ARCHS``).
Both read the one checkpoint format (``attnkit.checkpoint``), check the files' sha256,
load with ``weights_only`` and return the model in eval mode, its linear layers
``PrepackedLinear`` on the CPU (``prepack=True``: the same parameters, laid out once for
oneDNN, which decodes faster; see ``attnkit.inference.prepacked``). ``load_lm_tokenizer`` gives
a subword language model's tokenizer. ``load_lm_checkpoint`` also takes a Hugging Face GPT-2
folder or hub name (``attnkit.convert.gpt2``).
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
from attnkit.i18n import N_, _
from attnkit.inference.prepacked import prepack_linears
from attnkit.models.registry import build_model, lm_arch, lm_config, lm_model_keys

__all__ = ["MODEL_KEYS", "lm_eos_id", "load_lm_checkpoint", "load_lm_tokenizer", "load_model"]

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

    A Hugging Face MarianMT folder (config.json, weights, source.spm, target.spm,
    vocab.json), or a hub name fetched when online, loads as well, mapped onto attnkit's
    Transformer (``attnkit.convert.marian``); its config is the checkpoint config an import
    writes, plus ``"folder"``: where its tokenizer record's files are.
    """
    hf = _hf_translator_folder(directory)
    if hf is not None:
        from attnkit.convert.hf_files import hf_model_type
        from attnkit.convert.marian import load_marian

        hf_model_type(hf, {"marian": N_("MarianMT translators")})
        model, _tokenizer, cfg = load_marian(hf)
        cfg["folder"] = str(hf)
        return _for_inference(model.to(device), prepack), cfg
    ck = load_checkpoint(directory, map_location=device, trainer=False)
    cfg = ck.config
    for key in ("arch", "model_config", "data"):
        if key not in cfg:
            message = _("checkpoint {directory} has no {key!r} in {config_name}")
            raise ValueError(message.format(directory=directory, key=key, config_name=CONFIG_NAME))
    data = cfg["data"]
    try:
        sizes = len(data["src_vocab"]["idx_to_token"]), len(data["tgt_vocab"]["idx_to_token"])
    except (KeyError, TypeError):
        message = _("checkpoint {directory} has no vocabularies in {config_name}")
        raise ValueError(message.format(directory=directory, config_name=CONFIG_NAME)) from None
    model = build_model(cfg["arch"], cfg["model_config"], *sizes)
    load_model_state(model, ck.model_state, directory)
    return _for_inference(model.to(device), prepack), cfg


def _hf_translator_folder(source: str | os.PathLike) -> Path | None:
    """The local folder of a MarianMT ``source`` (a folder, or a hub name ``owner/name``
    that is no local path: fetched, or an error saying where to put the files), else None
    (an attnkit checkpoint, or nothing there: ``load_checkpoint`` says so)."""
    from attnkit.convert.hf_files import HFSourceError, hub_repo, is_hf_folder, resolve_source
    from attnkit.convert.marian import MARIAN_FILES

    path = Path(source)
    if path.exists():
        return path if is_hf_folder(path) else None
    text = os.fspath(source)
    if text.count("/") != 1 or hub_repo(text) is None:  # legacy bare names are GPT-2s
        return None
    try:
        return resolve_source(text, files=("*.spm", *MARIAN_FILES[2:]))
    except HFSourceError as e:  # a mistyped checkpoint path, most likely: say both
        message = _("no checkpoint at {text}: no such folder; as a Hugging Face hub name: {error}")
        raise FileNotFoundError(message.format(text=text, error=e)) from None


def load_lm_checkpoint(
    directory: str | os.PathLike, device: torch.device | str = "cpu", *, prepack: bool = True
) -> tuple[Any, Vocab, dict[str, Any]]:
    """Rebuild the model of an ``attnkit lm train`` checkpoint and load its weights.

    Args:
        directory: a checkpoint folder written by ``attnkit lm train --out DIR``.
        device: where the model goes.
        prepack: as :func:`load_model`'s.

    Also a Hugging Face GPT-2 folder (config.json with ``"model_type": "gpt2"``, its
    weights and tokenizer files) or hub name (fetched when online): the model is
    attnkit's ``DecoderLM`` with its weights (``attnkit.convert.gpt2``), the vocabulary its
    byte-level BPE's pieces, the config what ``attnkit lm import`` records.

    Returns:
        ``(model, vocab, config)``: the model (an ``RNNLM`` or a ``DecoderLM``) in eval
        mode on ``device``, its vocabulary (a subword model's: its pieces), and the parsed
        ``config.json``.

    Raises:
        FileNotFoundError: no ``config.json`` in ``directory``.
        ValueError: a damaged checkpoint, another task's, or a folder of the layout before
            the one format (``model.pt``, ``vocab.json``), which is not read: train again.
            A GPT-2 folder whose options do not map (the reason is said).
    """
    hf = _hf_lm_folder(directory)
    if hf is not None:
        return _load_gpt2_folder(hf, device, prepack)
    directory = Path(directory)
    cfg_path = directory / CONFIG_NAME
    if not cfg_path.is_file():
        message = _(
            "{path!r} not found: --checkpoint must be a folder written by `attnkit "
            "lm train --out DIR` or `attnkit lm import`, or a GPT-2 folder"
        )
        raise FileNotFoundError(message.format(path=str(cfg_path)))
    ck = load_checkpoint(directory, map_location=device, trainer=False, task="lm")
    config = ck.config
    arch = lm_arch(config)
    keys = lm_model_keys(arch)
    bpe = config.get("tokenizer") == "gpt2-bpe"  # its vocabulary: the tokenizer's pieces
    needed = [k for k in keys if k not in _LM_KEYS_ADDED_LATER] + ([] if bpe else ["vocab"])
    missing = [k for k in needed if k not in config]
    if missing:
        message = _("checkpoint {directory} lacks {missing} in {config_name}")
        raise ValueError(
            message.format(directory=directory, missing=missing, config_name=CONFIG_NAME)
        )
    model_config = lm_config(arch, {k: config[k] for k in keys if k in config})
    if bpe:
        vocab = _padded_vocab(load_lm_tokenizer(directory, config).vocab, config["vocab_size"])
    else:
        vocab = Vocab.from_dict(config["vocab"])
    model = model_config.build(len(vocab))
    load_model_state(model, ck.model_state, directory)
    return _for_inference(model.to(device), prepack), vocab, config


# model keys a checkpoint written before them lacks: their defaults (today's model) apply
_LM_KEYS_ADDED_LATER = frozenset({"activation", "norm_eps"})


def _hf_lm_folder(source: str | os.PathLike) -> Path | None:
    """The local folder of ``source`` when it is a Hugging Face model (a folder, or a hub
    name ``owner/name`` that is not a local path), else None (an attnkit checkpoint)."""
    from attnkit.convert.gpt2 import GPT2_TOKENIZER_FILES
    from attnkit.convert.hf_files import HFSourceError, hub_repo, is_hf_folder, resolve_source

    path = Path(source)
    if path.exists():
        return path if is_hf_folder(path) else None
    text = os.fspath(source)
    if hub_repo(text) is None:  # owner/name, or a legacy bare name (gpt2, distilgpt2 ...)
        return None
    try:
        return resolve_source(text, files=GPT2_TOKENIZER_FILES)
    except HFSourceError as e:
        message = _(
            "{text!r} is not a folder: --checkpoint must be a folder written by "
            "`attnkit lm train --out DIR` or `attnkit lm import`, a GPT-2 folder, "
            "or a hub name ({error})"
        )
        raise FileNotFoundError(message.format(text=text, error=e)) from None


def _load_gpt2_folder(folder: Path, device, prepack: bool):
    """A GPT-2 folder as ``load_lm_checkpoint`` returns a checkpoint."""
    from attnkit.convert.gpt2 import gpt2_eos_id, lm_record, load_gpt2
    from attnkit.convert.hf_files import hf_model_type

    hf_model_type(folder, {"gpt2": N_("GPT-2 language models")})
    model, tokenizer, _found = load_gpt2(folder, device=device)
    meta = {**tokenizer.meta(), "folder": str(folder)}
    config = lm_record(model, meta, str(folder), gpt2_eos_id(folder, tokenizer))
    vocab = _padded_vocab(tokenizer.vocab, model.vocab_size)
    return _for_inference(model, prepack), vocab, config


def _padded_vocab(vocab: Vocab, size: int) -> Vocab:
    """``vocab`` with placeholder names up to the model's ``size`` rows (a model may have
    more output rows than its tokenizer has pieces)."""
    if len(vocab) >= size:
        return vocab
    extra = [f"<unused {i}>" for i in range(len(vocab), size)]
    return Vocab.from_dict({"idx_to_token": [*vocab.idx_to_token, *extra]})


def _for_inference(model, prepack: bool):
    """The model in eval mode, its linear layers prepacked when asked and on the CPU."""
    if boolean("prepack", prepack) and next(model.parameters()).device.type == "cpu":
        prepack_linears(model)
    return model.eval()


def load_lm_tokenizer(directory: str | os.PathLike, config: dict[str, Any]):
    """The subword tokenizer of a language-model checkpoint: SentencePiece (trained with
    ``--tokenizer sentencepiece``) or GPT-2's byte-level BPE (``attnkit lm import``; a
    GPT-2 folder's own files), its file beside config.json, sha256-checked; None for a
    character or word model (their vocabulary is the checkpoint's "vocab")."""
    kind = config.get("tokenizer", "book")
    if kind == "gpt2-bpe":
        from attnkit.convert.gpt2_tokenizer import GPT2BPETokenizer

        meta = config.get("tokenizer_model")
        if isinstance(meta, dict) and "folder" in meta:  # a GPT-2 folder loaded directly
            return GPT2BPETokenizer.from_folder(meta["folder"])
        return GPT2BPETokenizer.load(directory, meta)
    if kind != "sentencepiece":
        return None
    return LMSubwordTokenizer.load(directory, config.get("tokenizer_model"))


def lm_eos_id(config: dict[str, Any], tokenizer: Any = None) -> Any:
    """The end-of-text id(s) a language model's generation stops at: what its config
    records (a GPT-2's ``eos_token_id``, ``attnkit.convert.gpt2.gpt2_eos_id``), else its
    GPT-2 tokenizer's ``<|endoftext|>`` (a checkpoint imported before the record); None
    for the book's character and word models and SentencePiece models (none is known)."""
    if config.get("eos_token_id") is not None:
        return config["eos_token_id"]
    if config.get("tokenizer") == "gpt2-bpe":
        return getattr(tokenizer, "eos_id", None)
    return None
