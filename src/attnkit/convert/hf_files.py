"""Reading a Hugging Face model folder: config.json and the weights, without transformers.

``resolve_source(source)`` turns a local folder or a hub name (``Helsinki-NLP/opus-mt-en-fr``,
or a legacy bare name such as ``gpt2``, which the hub maps to ``openai-community/gpt2``)
into a local folder: a hub name is fetched with ``huggingface_hub`` when it is installed and
the network answers (cached as the hub caches), otherwise one clear error says which files
to put where. ``read_config`` and ``read_weights`` read the folder; ``is_hf_folder`` tells
such a folder from an attnkit checkpoint (which also has a config.json).

A folder gone wrong in the usual ways is one ``HFSourceError`` (a ValueError) naming the
file and what to do: a Git LFS pointer in place of a file (a clone without ``git lfs
pull``), a truncated or damaged weights file (an interrupted download), a config.json
missing or without ``model_type``, tensors whose shapes are not the config's
(:func:`check_shapes`, in the file's own tensor names).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnkit.data.hf_folder import (
    GENERATION_CONFIG,
    HFSourceError,
    check_not_lfs_pointer,
    is_lfs_pointer,
    read_generation_config,
    read_json_object,
)
from attnkit.i18n import _, ngettext

__all__ = [
    "LEGACY_HUB_NAMES",
    "WEIGHT_FILES",
    "HFSourceError",
    "check_not_lfs_pointer",
    "check_shapes",
    "hf_model_type",
    "hub_repo",
    "is_hf_folder",
    "is_lfs_pointer",
    "read_config",
    "read_generation_config",
    "read_weights",
    "resolve_source",
    "weights_name",
]

# single-file weights, in the order they are preferred (safetensors needs no unpickling)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
# the bare names of models published before the hub had owners, as the hub maps them
# (the GPT-2 family: what attnkit reads of them)
LEGACY_HUB_NAMES = {
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "gpt2-large": "openai-community/gpt2-large",
    "gpt2-xl": "openai-community/gpt2-xl",
    "distilgpt2": "distilbert/distilgpt2",
}

# model types attnkit reads, by the architectures config.json names
_KNOWN_TYPES = {"MarianMTModel": "marian", "MarianModel": "marian", "GPT2LMHeadModel": "gpt2",
                "GPT2Model": "gpt2"}  # fmt: skip


def _has_weights(folder: Path) -> bool:
    return any((folder / name).is_file() for name in (*WEIGHT_FILES, *_INDEX_FILES))


def is_hf_folder(path: str | os.PathLike) -> bool:
    """True for a folder that holds a Hugging Face model, even a broken one: a config.json
    that is not attnkit's (no "format", no "cell") with a "model_type", "architectures" or
    Hugging Face weights beside it; or such weights without a config.json. attnkit's own
    checkpoints (config.json with "format", weights ``model-<tag>.pt``) are not."""
    folder = Path(path)
    if not folder.is_dir():
        return False
    config = folder / "config.json"
    if not config.is_file():
        return _has_weights(folder)
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return _has_weights(folder)
    if not isinstance(data, dict) or "format" in data or "cell" in data:
        return False
    return "model_type" in data or "architectures" in data or _has_weights(folder)


def hub_repo(name: str | os.PathLike) -> str | None:
    """The hub repository ``name`` stands for: ``owner/name`` (``@revision`` allowed) as it
    is, a legacy bare name (``gpt2``) as the hub maps it; None for anything else (a path)."""
    text = os.fspath(name)
    if text in LEGACY_HUB_NAMES:
        return LEGACY_HUB_NAMES[text]
    repo = text.partition("@")[0]
    if repo.count("/") == 1 and not text.startswith((".", "/", "~")) and "\\" not in text:
        owner, _slash, model = repo.partition("/")
        return text if owner and model else None
    return None


def _download_hint(repo: str, files: tuple[str, ...]) -> str:
    listed = ", ".join(["config.json", "model.safetensors (or pytorch_model.bin)", *files])
    folder = repo.rpartition("/")[2]
    hint = _(
        "download {files} from https://huggingface.co/{repo} into a folder (e.g. ./{folder}) "
        "and pass that folder instead"
    )
    return hint.format(files=listed, repo=repo, folder=folder)


def resolve_source(source: str | os.PathLike, *, files: tuple[str, ...] = ()) -> Path:
    """The local folder of ``source``: a folder as it is, or a hub name fetched (cached).

    Args:
        source: a folder path, or a hub name ``owner/name`` (optionally ``owner/name@rev``),
            or a legacy bare name the hub maps (``gpt2`` is ``openai-community/gpt2``).
        files: the files a hub download needs besides config.json and the weights, as
            names or glob patterns (``("*.spm", "vocab.json")`` for Marian).

    Only one set of weights is fetched: model.safetensors (or its shards) when the model
    has them, else pytorch_model.bin; generation_config.json comes along when there is one.

    Raises:
        HFSourceError: a path that is not a folder, or a hub name that cannot be fetched
            (no ``huggingface_hub``, or no network): the message says which files to put
            where.
    """
    text = os.fspath(source)
    folder = Path(text).expanduser()
    if folder.is_dir():
        return folder
    repo_text = hub_repo(text)
    if folder.exists() or repo_text is None:
        message = _("{text!r} is not a folder (give a Hugging Face model folder)")
        raise HFSourceError(message.format(text=text))
    repo, _at, revision = repo_text.partition("@")
    hint = _download_hint(repo, files)
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        message = _(
            "{text!r} is not a local folder, and fetching it needs huggingface_hub "
            "(pip install 'attnkit[hf]'); or {hint}"
        )
        raise HFSourceError(message.format(text=text, hint=hint)) from None
    names = [repo] + ([text] if text in LEGACY_HUB_NAMES else [])  # the old cache's name too
    common = ["config.json", GENERATION_CONFIG, *files]
    first: Exception | None = None
    for name in names:
        try:
            path = Path(snapshot_download(name, revision=revision or None,
                                          allow_patterns=[*common, "*.safetensors",
                                                          _INDEX_FILES[0]]))  # fmt: skip
            if not _has_weights(path):  # no safetensors: the PyTorch weights instead
                path = Path(snapshot_download(name, revision=revision or None,
                                              allow_patterns=[*common, "*.bin", _INDEX_FILES[1]]))  # fmt: skip
            return path
        except Exception as e:  # network, auth, unknown repo: hub errors have many types
            first = first or e
    message = _(
        "could not fetch {repo!r} from the Hugging Face hub ({error_type}: {reason}); "
        "offline, {hint}"
    )
    raise HFSourceError(
        message.format(
            repo=repo,
            error_type=type(first).__name__,
            reason=str(first).splitlines()[0] if str(first) else _("no message"),
            hint=hint,
        )
    ) from None


def read_config(folder: str | os.PathLike) -> dict[str, Any]:
    """The folder's config.json as a dict (HFSourceError when missing or not JSON)."""
    path = Path(folder) / "config.json"
    try:
        return read_json_object(path)
    except FileNotFoundError:
        if _has_weights(Path(folder)):  # the weights without their config
            message = _(
                "{path} is missing: the weights need the config.json that came with them; "
                "download it from the model's page on https://huggingface.co into {folder}"
            )
            raise HFSourceError(message.format(path=path, folder=folder)) from None
        message = _("{path!r} not found: not a Hugging Face model folder")
        raise HFSourceError(message.format(path=str(path))) from None


def hf_model_type(folder: str | os.PathLike, expected: Mapping[str, str] | None = None) -> str:
    """config.json's "model_type" ("marian", "gpt2" ...); with ``expected`` ({type: what
    such a model is, in words}), one of its types.

    A config.json without one is an error that says what to add (the type its
    "architectures" names, when it is one attnkit reads); a type not in ``expected`` is an
    error naming the file and the types read there.
    """
    path = Path(folder) / "config.json"
    config = read_config(folder)
    if "model_type" not in config:
        names = config.get("architectures") or []
        names = [str(n) for n in names] if isinstance(names, list) else [str(names)]
        guess = next((_KNOWN_TYPES[n] for n in names if n in _KNOWN_TYPES), None)
        if guess is not None:
            message = _(
                '{config} has no "model_type": its architectures ({names}) make it '
                '"{guess}"; add "model_type": "{guess}" to it'
            )
            raise HFSourceError(message.format(config=path, names=", ".join(names), guess=guess))
        message = _(
            '{config} has no "model_type": add the model\'s type to it (attnkit reads '
            '"marian", MarianMT translators, and "gpt2", GPT-2 language models)'
        )
        raise HFSourceError(message.format(config=path))
    kind = str(config["model_type"])
    if expected and kind not in expected:
        message = _("{config}: model_type {kind!r} is not read here: attnkit reads {listed}")
        # i18n: one model type read here, e.g. "MarianMT translators (model_type 'marian')"
        each = _("{what} (model_type {kind!r})")
        listed = ", ".join(each.format(what=_(what), kind=k) for k, what in expected.items())
        raise HFSourceError(message.format(config=path, kind=kind, listed=listed))
    return kind


def _safetensors_sizes(path: Path) -> tuple[int, int] | None:
    """(the file's size, the size its header promises), or None when the header itself
    cannot be read."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8:
                return None
            header = json.loads(f.read(n))
        ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
        return size, 8 + n + max(ends, default=0)
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error):
        return None


def _damaged(path: Path, error: Exception) -> HFSourceError:
    sizes = _safetensors_sizes(path) if path.suffix == ".safetensors" else None
    if sizes is not None and sizes[0] < sizes[1]:
        message = _(
            "{path} is truncated: it has {size} bytes, its header says {expected} (an "
            "interrupted download?); download {name} again"
        )
        return HFSourceError(
            message.format(path=path, size=sizes[0], expected=sizes[1], name=path.name)
        )
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    message = _(
        "{path} cannot be read ({error_type}: {reason}): the file is truncated or damaged "
        "(an interrupted download?); download {name} again"
    )
    return HFSourceError(
        message.format(path=path, error_type=type(error).__name__, reason=reason, name=path.name)
    )


def _load_one(path: Path) -> dict[str, Tensor]:
    if not path.is_file():
        message = _("{path} is missing (its index lists it): download it again")
        raise HFSourceError(message.format(path=path))
    check_not_lfs_pointer(path)
    if path.suffix == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError:
            message = _("reading {name} needs the safetensors package (pip install 'attnkit[hf]')")
            raise HFSourceError(message.format(name=path.name)) from None
        try:
            return load_file(str(path), device="cpu")
        except Exception as e:  # SafetensorError (no common base), OSError
            raise _damaged(path, e) from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # RuntimeError, OSError, EOFError, UnpicklingError ...
        raise _damaged(path, e) from None
    if not isinstance(state, dict):
        message = _("{path} does not hold a state dict ({type})")
        raise HFSourceError(message.format(path=path, type=type(state).__name__))
    return state


def _weight_files(folder: Path) -> tuple[list[Path], Path | None]:
    """The weight files to read (one, or the shards an index lists) and the index."""
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            return [folder / name], None
    for name in _INDEX_FILES:
        index = folder / name
        if index.is_file():
            check_not_lfs_pointer(index)
            try:
                weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
            except (ValueError, AttributeError) as e:
                message = _("{path!r} is not valid JSON: {error}")
                raise HFSourceError(message.format(path=str(index), error=e)) from None
            return [folder / shard for shard in sorted(set(weight_map.values()))], index
    message = _("{folder} holds no weights: expected one of {listed}")
    raise HFSourceError(
        message.format(folder=folder, listed=", ".join(WEIGHT_FILES + _INDEX_FILES))
    )


def weights_name(folder: str | os.PathLike) -> str:
    """The path of the folder's weights as messages name them: the file, or the index of
    the shards."""
    files, index = _weight_files(Path(folder))
    return str(index if index is not None else files[0])


def read_weights(folder: str | os.PathLike) -> dict[str, Tensor]:
    """Every tensor of the folder's weights by its Hugging Face name, on the CPU: one
    safetensors or .bin file, or the shards an index file lists."""
    state: dict[str, Tensor] = {}
    for path in _weight_files(Path(folder))[0]:
        state.update(_load_one(path))
    return state


def check_shapes(
    weights: Mapping[str, Tensor], expected: Mapping[str, tuple[int, ...]], where: str
) -> None:
    """HFSourceError when a tensor of ``weights`` (by the file's names) has another shape
    than ``expected`` says (the config's sizes): one line, the first such tensor with both
    shapes and how many more there are."""
    wrong = [(name, tuple(weights[name].shape), tuple(shape)) for name, shape in
             expected.items() if name in weights and tuple(weights[name].shape) != tuple(shape)]  # fmt: skip
    if not wrong:
        return
    name, got, want = wrong[0]
    more = ""
    if len(wrong) > 1:
        n = len(wrong) - 1
        more = ngettext(" (and {n} more tensor)", " (and {n} more tensors)", n).format(n=n)
    message = _(
        "{where}: {name} has shape {got}, but config.json's sizes make it {want}{more}: the "
        "config does not match the weights; use the config.json that came with them"
    )
    raise HFSourceError(message.format(where=where, name=name, got=got, want=want, more=more))
