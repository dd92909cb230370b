"""Downloading datasets: URL + sha1, cached, verified, with a clear error offline.

The registry mirrors the book's ``DATA_HUB``. Unlike the book, a freshly
downloaded file is verified too, the write is atomic (temp file + rename), and a
failed download says how to use a local copy instead.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

__all__ = ["DATA_HUB", "DATA_URL", "DatasetUnavailableError", "cache_dir", "download", "sha1_of"]

DATA_URL = "http://d2l-data.s3-accelerate.amazonaws.com/"
DATA_HUB: dict[str, tuple[str, str]] = {
    "time_machine": (DATA_URL + "timemachine.txt", "090b5e7e70c295757f55df93cb0a180b9691891a"),
    "fra-eng": (DATA_URL + "fra-eng.zip", "94646ad1522d915e7b0f9296181140edcf86a4f5"),
}


class DatasetUnavailableError(RuntimeError):
    """A dataset is neither cached nor downloadable (offline, wrong checksum...)."""


def cache_dir() -> Path:
    """``$ATTNKIT_CACHE`` or ``~/.cache/attnkit``."""
    return Path(os.environ.get("ATTNKIT_CACHE", Path.home() / ".cache" / "attnkit"))


def sha1_of(path: str | os.PathLike) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(name: str, folder: str | os.PathLike | None = None, timeout: float = 30.0) -> Path:
    """Return the cached path of ``DATA_HUB[name]``, downloading it if needed.

    Raises:
        KeyError: unknown name.
        DatasetUnavailableError: offline, HTTP error, or the sha1 does not match.
    """
    if name not in DATA_HUB:
        raise KeyError(f"unknown dataset {name!r}; known: {sorted(DATA_HUB)}")
    url, sha1 = DATA_HUB[name]
    root = Path(folder) if folder is not None else cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = root / url.rsplit("/", 1)[-1]
    if target.exists() and sha1_of(target) == sha1:
        return target
    tmp = target.with_suffix(target.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r, open(tmp, "wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        tmp.unlink(missing_ok=True)
        raise DatasetUnavailableError(
            f"could not download {name!r} from {url} ({e}). Are you offline? "
            f"Pass a local copy instead (--data FILE), or place it at {target}."
        ) from e
    got = sha1_of(tmp)
    if got != sha1:
        tmp.unlink(missing_ok=True)
        raise DatasetUnavailableError(
            f"{name!r} from {url} has sha1 {got}, expected {sha1}; the file was discarded"
        )
    os.replace(tmp, target)
    return target


def download_extract(name: str, folder: str | os.PathLike | None = None) -> Path:
    """Download a zip from the hub and extract it next to itself; return the folder."""
    path = download(name, folder)
    out = path.parent / path.stem
    if not out.exists():
        with zipfile.ZipFile(path) as z:
            z.extractall(path.parent)
    return out
