"""d2l 1.0's file helpers: ``download(url, folder='../data', sha1_hash=None)`` and
``extract(filename, folder=None)``; ``Timer`` and ``plot`` are the 0.17 layer's (same API).

Unlike the book, a fresh download is verified against ``sha1_hash`` too, written
atomically, and a failure (offline) raises ``DatasetUnavailableError`` saying where it
looked and how to place a local copy.
"""

from __future__ import annotations

import os
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from attnkit.d2l.utils import Timer, plot
from attnkit.data.hub import DATA_URL, DatasetUnavailableError, sha1_of

__all__ = ["DATA_URL", "DatasetUnavailableError", "Timer", "download", "extract", "plot"]


def download(url, folder="../data", sha1_hash=None):
    """``folder/<url's file name>``, downloaded unless a copy with ``sha1_hash`` is there
    (any copy when ``sha1_hash`` is None). Returns the path as a str, as the book."""
    if not isinstance(url, str) or "/" not in url:
        raise ValueError(f"url must be a URL string, got {url!r}")
    if sha1_hash is not None and (not isinstance(sha1_hash, str) or len(sha1_hash) != 40):
        raise ValueError(f"sha1_hash must be 40 hex digits or None, got {sha1_hash!r}")
    os.makedirs(folder, exist_ok=True)
    fname = Path(folder) / url.split("/")[-1]
    if fname.is_file() and (sha1_hash is None or sha1_of(fname) == sha1_hash):
        return str(fname)
    seen = "no copy" if not fname.is_file() else f"a copy with sha1 {sha1_of(fname)}"
    tmp = fname.with_suffix(fname.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=30) as r, open(tmp, "wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        tmp.unlink(missing_ok=True)
        raise DatasetUnavailableError(
            f"could not download {url} ({e}). Are you offline? Found {seen} at {fname}"
            f"{'' if sha1_hash is None else f' (expected sha1 {sha1_hash})'}; place the "
            f"file there to use it offline."
        ) from e
    if sha1_hash is not None and sha1_of(tmp) != sha1_hash:
        got = sha1_of(tmp)
        tmp.unlink(missing_ok=True)
        raise DatasetUnavailableError(f"{url} has sha1 {got}, expected {sha1_hash}; discarded")
    os.replace(tmp, fname)
    return str(fname)


def extract(filename, folder=None):
    """Extract a zip or tar(.gz) archive into ``folder`` (default: the archive's folder)."""
    filename = Path(filename)
    base_dir = filename.parent if folder is None else Path(folder)
    if not filename.is_file():
        raise FileNotFoundError(f"extract: {str(filename)!r} is not a file")
    if zipfile.is_zipfile(filename):
        with zipfile.ZipFile(filename) as fp:
            fp.extractall(base_dir)
    elif filename.suffix in (".tar", ".gz", ".tgz"):
        with tarfile.open(filename) as fp:
            fp.extractall(base_dir, filter="data")
    else:
        raise ValueError(f"extract: only zip/tar files can be extracted, got {str(filename)!r}")
