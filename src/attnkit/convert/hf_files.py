"""Reading a Hugging Face model folder: config.json and the weights, without transformers.

``resolve_source(source)`` turns a local folder or a hub name (``Helsinki-NLP/opus-mt-en-fr``)
into a local folder: a hub name is fetched with ``huggingface_hub`` when it is installed and
the network answers (cached as the hub caches), otherwise one clear error says where to put
the files. ``read_config`` and ``read_weights`` read the folder; ``is_hf_folder`` tells such a
folder from an attnkit checkpoint (which also has a config.json).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnkit.i18n import _

__all__ = [
    "WEIGHT_FILES",
    "HFSourceError",
    "hf_model_type",
    "is_hf_folder",
    "read_config",
    "read_weights",
    "resolve_source",
]

# single-file weights, in the order they are preferred (safetensors needs no unpickling)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


class HFSourceError(ValueError):
    """A Hugging Face source that cannot be used: not found, offline, or not a model folder."""


def _has_weights(folder: Path) -> bool:
    return any((folder / name).is_file() for name in (*WEIGHT_FILES, *_INDEX_FILES))


def is_hf_folder(path: str | os.PathLike) -> bool:
    """True for a folder holding a Hugging Face model: config.json with a "model_type" and
    weights. attnkit's own checkpoints (config.json with "format" / "arch") are not."""
    folder = Path(path)
    config = folder / "config.json"
    if not (folder.is_dir() and config.is_file() and _has_weights(folder)):
        return False
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "model_type" in data


def resolve_source(source: str | os.PathLike, *, files: tuple[str, ...] = ()) -> Path:
    """The local folder of ``source``: a folder as it is, or a hub name fetched (cached).

    Args:
        source: a folder path, or a hub name ``owner/name`` (optionally ``owner/name@rev``).
        files: glob patterns of the files a hub download needs besides config.json and the
            weights (``("*.spm", "vocab.json")`` for Marian).

    Raises:
        HFSourceError: a path that is not a folder, or a hub name that cannot be fetched
            (no ``huggingface_hub``, or no network): the message says where to put the files.
    """
    text = os.fspath(source)
    folder = Path(text).expanduser()
    if folder.is_dir():
        return folder
    looks_like_hub = text.count("/") == 1 and not text.startswith((".", "/", "~"))
    if folder.exists() or not looks_like_hub:
        message = _("{text!r} is not a folder (give a Hugging Face model folder)")
        raise HFSourceError(message.format(text=text))
    repo, _at, revision = text.partition("@")
    hint = (
        f"download the model's files (config.json, model.safetensors or pytorch_model.bin"
        f"{', ' + ', '.join(files) if files else ''}) from https://huggingface.co/{repo} "
        "into a folder and pass that folder instead"
    )
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        message = _(
            "{text!r} is not a local folder, and fetching it needs huggingface_hub "
            "(pip install 'attnkit[hf]'); or {hint}"
        )
        raise HFSourceError(message.format(text=text, hint=hint)) from None
    patterns = ["config.json", *WEIGHT_FILES, *_INDEX_FILES, "*.safetensors", *files]
    try:
        path = snapshot_download(repo, revision=revision or None, allow_patterns=patterns)
    except Exception as e:  # network, auth, unknown repo: hub errors have many types
        message = _(
            "could not fetch {repo!r} from the Hugging Face hub ({error_type}: "
            "{reason}); offline, {hint}"
        )
        raise HFSourceError(
            message.format(
                repo=repo,
                error_type=type(e).__name__,
                reason=str(e).splitlines()[0] if str(e) else _("no message"),
                hint=hint,
            )
        ) from None
    return Path(path)


def read_config(folder: str | os.PathLike) -> dict[str, Any]:
    """The folder's config.json as a dict (HFSourceError when missing or not JSON)."""
    path = Path(folder) / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        message = _("{path!r} not found: not a Hugging Face model folder")
        raise HFSourceError(message.format(path=str(path))) from None
    except ValueError as e:
        message = _("{path!r} is not valid JSON: {error}")
        raise HFSourceError(message.format(path=str(path), error=e)) from None
    if not isinstance(data, dict):
        message = _("{path!r} holds {type}, not a JSON object")
        raise HFSourceError(message.format(path=str(path), type=type(data).__name__))
    return data


def hf_model_type(folder: str | os.PathLike) -> str:
    """config.json's "model_type" ("marian", "gpt2" ...)."""
    config = read_config(folder)
    if "model_type" not in config:
        message = _("{config} has no 'model_type'")
        raise HFSourceError(message.format(config=Path(folder) / "config.json"))
    return str(config["model_type"])


def _load_one(path: Path) -> dict[str, Tensor]:
    if path.suffix == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError:
            message = _("reading {name} needs the safetensors package (pip install 'attnkit[hf]')")
            raise HFSourceError(message.format(name=path.name)) from None
        return load_file(str(path), device="cpu")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        message = _("{path} does not hold a state dict ({type})")
        raise HFSourceError(message.format(path=path, type=type(state).__name__))
    return state


def read_weights(folder: str | os.PathLike) -> dict[str, Tensor]:
    """Every tensor of the folder's weights by its Hugging Face name, on the CPU: one
    safetensors or .bin file, or the shards an index file lists."""
    folder = Path(folder)
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            return _load_one(folder / name)
    for name in _INDEX_FILES:
        index = folder / name
        if index.is_file():
            weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
            state: dict[str, Tensor] = {}
            for shard in sorted(set(weight_map.values())):
                state.update(_load_one(folder / shard))
            return state
    message = _("{folder} holds no weights: expected one of {listed}")
    raise HFSourceError(
        message.format(folder=folder, listed=", ".join(WEIGHT_FILES + _INDEX_FILES))
    )
