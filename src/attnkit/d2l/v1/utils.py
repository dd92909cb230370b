"""d2l 1.0's file helpers: ``download(url, folder='../data', sha1_hash=None)`` and
``extract(filename, folder=None)``; ``Timer`` and ``plot`` are the 0.17 layer's (same API).

Unlike the book, a fresh download is verified against ``sha1_hash`` too, written
atomically, and a failure (offline) raises ``DatasetUnavailableError`` saying where it
looked and how to place a local copy.
"""

from __future__ import annotations

import os
import tarfile
import zipfile
from pathlib import Path

from attnkit.d2l.utils import Timer, plot
from attnkit.data.hub import DATA_URL, DatasetUnavailableError, fetch, sha1_of
from attnkit.i18n import _

__all__ = ["DATA_URL", "DatasetUnavailableError", "Timer", "download", "extract", "plot"]


def download(url, folder="../data", sha1_hash=None):
    """``folder/<url's file name>``, downloaded unless a copy with ``sha1_hash`` is there
    (any copy when ``sha1_hash`` is None). Returns the path as a str, as the book.

    An archive (``.zip``, ``.tar``, ``.tar.gz``) that is absent but already extracted
    (``folder/fra-eng/`` for ``fra-eng.zip``) is not downloaded: its path is returned and
    :func:`extract` leaves the folder as it is.
    """
    if not isinstance(url, str):
        message = _("url must be a URL string, got {value!r} ({type})")
        raise TypeError(message.format(value=url, type=type(url).__name__))
    if "/" not in url:
        raise ValueError(_("url must be a URL string, got {value!r}").format(value=url))
    if sha1_hash is not None and not isinstance(sha1_hash, str):
        message = _("sha1_hash must be 40 hex digits or None, got {value!r} ({type})")
        raise TypeError(message.format(value=sha1_hash, type=type(sha1_hash).__name__))
    if sha1_hash is not None and len(sha1_hash) != 40:
        message = _("sha1_hash must be 40 hex digits or None, got {value!r}")
        raise ValueError(message.format(value=sha1_hash))
    os.makedirs(folder, exist_ok=True)
    fname = Path(folder) / url.split("/")[-1]
    if fname.is_file() and (sha1_hash is None or sha1_of(fname) == sha1_hash):
        return str(fname)
    if not fname.is_file() and _extracted_folder(fname).is_dir():
        return str(fname)  # already extracted (the book's ../data/fra-eng): extract() skips
    if fname.is_file():
        seen = _("a copy with sha1 {sha1}").format(sha1=sha1_of(fname))
    else:
        seen = _("no copy")
    if sha1_hash is None:
        hint = _("Found {seen} at {path}; place the file there to use it offline.")
    else:
        hint = _(
            "Found {seen} at {path} (expected sha1 {sha1}); place the file there to use it offline."
        )
    hint = hint.format(seen=seen, path=fname, sha1=sha1_hash)
    fetch(url, fname, sha1_hash, hint=hint)
    return str(fname)


def _extracted_folder(archive: Path) -> Path:
    """Where ``archive`` unpacks by the book's convention: ``fra-eng.zip`` -> ``fra-eng/``."""
    name = archive.name
    for suffix in (".tar.gz", ".tgz", ".zip", ".tar", ".gz"):
        if name.endswith(suffix):
            return archive.with_name(name[: -len(suffix)])
    return archive.with_name(name + ".d")  # not an archive name: never a folder


def extract(filename, folder=None):
    """Extract a zip or tar(.gz) archive into ``folder`` (default: the archive's folder).

    An archive that is absent but already extracted next to itself (``../data/fra-eng/``
    for ``../data/fra-eng.zip``, as a reader who ran the book before has it) is left as
    is: the folder's files cannot be checked against the archive's sha1.
    """
    filename = Path(filename)
    base_dir = filename.parent if folder is None else Path(folder)
    if not filename.is_file() and folder is None and _extracted_folder(filename).is_dir():
        return
    if not filename.is_file():
        message = _("extract: {path!r} is not a file")
        raise FileNotFoundError(message.format(path=str(filename)))
    if zipfile.is_zipfile(filename):
        with zipfile.ZipFile(filename) as fp:
            fp.extractall(base_dir)
    elif filename.suffix in (".tar", ".gz", ".tgz"):
        with tarfile.open(filename) as fp:
            fp.extractall(base_dir, filter="data")
    else:
        message = _("extract: only zip/tar files can be extracted, got {path!r}")
        raise ValueError(message.format(path=str(filename)))
