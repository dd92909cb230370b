"""The files of a Hugging Face model folder that every layer reads: the error for a folder
gone wrong, Git LFS pointers in place of files, and generation_config.json.

Here, below the converters (``attnkit.convert.hf_files`` reads config.json and the
weights), so that the data layer's tokenizers (Marian's) can check their own files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from attnkit.i18n import _

__all__ = [
    "GENERATION_CONFIG",
    "HFSourceError",
    "check_not_lfs_pointer",
    "is_lfs_pointer",
    "read_generation_config",
    "read_json_object",
]

GENERATION_CONFIG = "generation_config.json"
_LFS_HEADER = b"version https://git-lfs.github.com/spec/v1"


class HFSourceError(ValueError):
    """A Hugging Face source that cannot be used: not found, offline, not a model folder, or a
    file in it broken (the message names the file and what to do)."""


def is_lfs_pointer(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a Git LFS pointer (a small text file that stands for the real
    one in a repository cloned without Git LFS)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(_LFS_HEADER)) == _LFS_HEADER
    except OSError:
        return False


def check_not_lfs_pointer(path: str | os.PathLike) -> None:
    """HFSourceError when ``path`` is a Git LFS pointer in place of the file."""
    if is_lfs_pointer(path):
        path = Path(path)
        message = _(
            "{path} is a Git LFS pointer, not the file itself (the repository was cloned "
            "without Git LFS): run `git lfs pull` in {folder}, or download {name} again"
        )
        raise HFSourceError(message.format(path=path, folder=path.parent, name=path.name))


def read_json_object(path: str | os.PathLike) -> dict[str, Any]:
    """A JSON file of a model folder as a dict: HFSourceError when it is an LFS pointer, not
    JSON or not an object (FileNotFoundError when it is not there)."""
    path = Path(path)
    check_not_lfs_pointer(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        message = _("{path!r} is not valid JSON: {error}")
        raise HFSourceError(message.format(path=str(path), error=e)) from None
    if not isinstance(data, dict):
        message = _("{path!r} holds {type}, not a JSON object")
        raise HFSourceError(message.format(path=str(path), type=type(data).__name__))
    return data


def read_generation_config(folder: str | os.PathLike) -> dict[str, Any]:
    """The folder's generation_config.json as a dict; ``{}`` when it has none."""
    path = Path(folder) / GENERATION_CONFIG
    return read_json_object(path) if path.is_file() else {}
