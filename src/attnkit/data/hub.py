"""Downloading datasets: URL + sha1, cached, verified, with a clear error offline.

The registry mirrors the book's ``DATA_HUB``. Unlike the book, a freshly
downloaded file is verified too, the write is atomic (temp file + rename), and a
failed download says where it looked and how to use a local copy instead.
``download(name, search=(folder, ...))`` checks other folders (the book's ``../data``)
for a verified copy before the cache and the network.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable
from pathlib import Path

from attnkit.i18n import _

__all__ = [
    "DATA_HUB",
    "DATA_URL",
    "DatasetUnavailableError",
    "cache_dir",
    "download",
    "fetch",
    "sha1_of",
]

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


def _place(folder: str | os.PathLike) -> str:
    """``folder`` as written, plus its absolute form when relative (for error messages)."""
    text = os.fspath(folder)
    full = os.path.abspath(text)
    return text if text == full else f"{text} (= {full})"


def _find(filename: str, sha1: str, folders: Iterable[str | os.PathLike], notes: list[str]):
    """First ``folder/filename`` whose sha1 is ``sha1``; appends what was seen to ``notes``."""
    for folder in folders:
        candidate = Path(folder) / filename
        if not candidate.is_file():
            notes.append(
                _("{folder}: no {filename}").format(folder=_place(folder), filename=filename)
            )
            continue
        got = sha1_of(candidate)
        if got == sha1:
            return candidate
        note = _("{folder}: {filename} has sha1 {got}, expected {sha1} (not used)")
        notes.append(note.format(folder=_place(folder), filename=filename, got=got, sha1=sha1))
    return None


def download(
    name: str,
    folder: str | os.PathLike | None = None,
    timeout: float = 30.0,
    *,
    search: Iterable[str | os.PathLike] = (),
) -> Path:
    """Return a verified local path of ``DATA_HUB[name]``, downloading it if needed.

    Looks, in order, in each folder of ``search``, then in ``folder`` (default: attnkit's
    cache, :func:`cache_dir`), for the file named as the URL's last part with the registered
    sha1; the first match is returned as is (nothing is copied). A file with another sha1 is
    skipped. Otherwise the file is downloaded into ``folder``, verified, and returned.
    ``search`` is how :mod:`attnkit.d2l` reads the book's ``../data`` before the cache.

    Raises:
        KeyError: unknown name.
        DatasetUnavailableError: offline, HTTP error, or the sha1 does not match; the
            message lists every place looked at and what was found there.
    """
    if name not in DATA_HUB:
        message = _("unknown dataset {name!r}; known: {known}")
        raise KeyError(message.format(name=name, known=sorted(DATA_HUB)))
    url, sha1 = DATA_HUB[name]
    filename = url.rsplit("/", 1)[-1]
    root = Path(folder) if folder is not None else cache_dir()
    notes: list[str] = []
    found = _find(filename, sha1, [*search, root], notes)
    if found is not None:
        return found
    target = root / filename
    looked = _(
        "Looked for {filename} (sha1 {sha1}) in: {notes}. "
        "Pass a local copy instead (--data FILE), or place it at {target}."
    )
    # i18n: the separator between the places looked at
    separator = _("; ")
    looked = looked.format(filename=filename, sha1=sha1, notes=separator.join(notes), target=target)
    return fetch(url, target, sha1, timeout=timeout, what=repr(name), hint=looked)


def fetch(
    url: str,
    target: str | os.PathLike,
    sha1: str | None = None,
    *,
    timeout: float = 30.0,
    what: str | None = None,
    hint: str = "",
) -> Path:
    """Download ``url`` to ``target`` (via ``target.part``, renamed when complete) and check
    its ``sha1`` when given; a file that does not match is discarded.

    Raises ``DatasetUnavailableError`` offline or on a mismatch, naming ``what`` (default
    the URL) and ending with ``hint`` (where a local copy can go).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    what = what or url
    tmp = target.with_suffix(target.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r, open(tmp, "wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        tmp.unlink(missing_ok=True)
        source = _(" from {url}").format(url=url) if what != url else ""
        message = _("could not download {what}{source} ({error}). Are you offline? {hint}")
        raise DatasetUnavailableError(
            message.format(what=what, source=source, error=e, hint=hint).rstrip()
        ) from e
    if sha1 is not None:
        got = sha1_of(tmp)
        if got != sha1:
            tmp.unlink(missing_ok=True)
            source = _(" from {url}").format(url=url) if what != url else ""
            message = _("{what}{source} has sha1 {got}, expected {sha1}; the file was discarded")
            raise DatasetUnavailableError(
                message.format(what=what, source=source, got=got, sha1=sha1)
            )
    os.replace(tmp, target)
    return target


def download_extract(
    name: str,
    folder: str | os.PathLike | None = None,
    *,
    search: Iterable[str | os.PathLike] = (),
) -> Path:
    """Download a zip from the hub and extract it next to itself; return the folder.

    With ``search``, an already-extracted ``<dir>/<zip stem>`` folder in one of those
    folders is returned first, as is: extracted files cannot be checked against the zip's
    sha1, so such a folder is trusted (the book's ``download_extract`` leaves one there).
    Otherwise the zip is found as :func:`download` finds it (``search``, then ``folder``
    or the cache, then the network) and extracted next to itself unless already done.
    """
    if name not in DATA_HUB:
        message = _("unknown dataset {name!r}; known: {known}")
        raise KeyError(message.format(name=name, known=sorted(DATA_HUB)))
    search = list(search)
    stem = Path(DATA_HUB[name][0].rsplit("/", 1)[-1]).stem
    for base in search:
        if (Path(base) / stem).is_dir():
            return Path(base) / stem
    try:
        path = download(name, folder, search=search)
    except DatasetUnavailableError as e:
        if not search:
            raise
        looked = ", ".join(_place(Path(base) / stem) for base in search)
        message = _("{error} No extracted folder at {looked} either.")
        raise DatasetUnavailableError(message.format(error=e, looked=looked)) from e
    out = path.parent / path.stem
    if not out.exists():
        with zipfile.ZipFile(path) as z:
            z.extractall(path.parent)
    return out
