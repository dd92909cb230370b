"""``attnkit.d2l`` reads the book's ``../data`` first, offline (no network, no real data).

Each test runs in ``tmp_path/work`` with the book's data folder at ``tmp_path/data``
(``../data`` from there), attnkit's cache at ``tmp_path/cache``, and ``urlopen`` refusing.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
import torch

from attnkit import d2l
from attnkit.data import hub

TIME_MACHINE = (
    "The Time Machine, by H. G. Wells [1898]\n"
    "\n"
    "I\n"
    "The Time Traveller (for so it will be convenient to speak of him)\n"
)
TIME_MACHINE_LINES = [
    "the time machine by h g wells",
    "",
    "i",
    "the time traveller for so it will be convenient to speak of him",
]
FRA = "Go.\tVa !\nHi.\tSalut !\nRun!\tCours\u202f!\nRun!\tCourez\u202f!\nWho?\tQui ?\nWow!\tÇa alors\u202f!\n"


def _sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


@pytest.fixture
def book(tmp_path, monkeypatch):
    """``tmp_path/work`` as the working directory, ``tmp_path/data`` as its ``../data``."""
    (tmp_path / "work").mkdir()
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTNKIT_TIMEMACHINE", raising=False)
    monkeypatch.delenv("ATTNKIT_FRA", raising=False)
    calls: list[str] = []

    def refuse(url, *args, **kwargs):
        calls.append(url)
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    return {"data": tmp_path / "data", "cache": tmp_path / "cache", "urlopen_calls": calls}


def _time_machine_in_book_data(book, monkeypatch) -> Path:
    path = book["data"] / "timemachine.txt"
    path.write_text(TIME_MACHINE, encoding="utf-8")
    url = d2l.DATA_HUB["time_machine"][0]
    monkeypatch.setitem(d2l.DATA_HUB, "time_machine", (url, _sha1(path)))
    return path


# ---------------------------------------------------------------- The Time Machine


def test_read_time_machine_reads_book_data(book, monkeypatch):
    _time_machine_in_book_data(book, monkeypatch)
    assert d2l.read_time_machine() == TIME_MACHINE_LINES
    assert book["urlopen_calls"] == []
    assert not book["cache"].exists()  # used in place: nothing copied into the cache


def test_load_data_time_machine_from_book_data(book, monkeypatch):
    _time_machine_in_book_data(book, monkeypatch)
    corpus, vocab = d2l.load_corpus_time_machine()
    text = "".join(TIME_MACHINE_LINES)
    assert len(corpus) == len(text) == 93
    assert vocab.to_tokens(corpus) == list(text)
    # The book's order: <unk>, then by decreasing frequency (ties: first seen).
    assert vocab.idx_to_token[:5] == ["<unk>", " ", "e", "t", "i"]

    train_iter, vocab2 = d2l.load_data_time_machine(batch_size=2, num_steps=5, max_tokens=40)
    assert vocab2.idx_to_token == vocab.idx_to_token
    assert train_iter.corpus.tolist() == corpus[:40]
    batches = list(train_iter)
    assert batches
    for X, Y in batches:
        assert X.shape == Y.shape == (2, 5)
        # Y is X shifted by one position in the corpus.
        for x, y in zip(X.tolist(), Y.tolist()):
            start = next(i for i in range(40) if corpus[i : i + 5] == x)
            assert y == corpus[start + 1 : start + 6]
    assert book["urlopen_calls"] == []


def test_wrong_sha1_in_book_data_is_not_used(book):
    path = book["data"] / "timemachine.txt"
    path.write_text(TIME_MACHINE, encoding="utf-8")  # not the hub's file: sha1 differs
    expected = d2l.DATA_HUB["time_machine"][1]
    with pytest.raises(hub.DatasetUnavailableError) as info:
        d2l.read_time_machine()
    msg = str(info.value)
    assert "Are you offline?" in msg
    assert f"timemachine.txt has sha1 {_sha1(path)}, expected {expected} (not used)" in msg
    assert os.path.abspath(os.path.join("..", "data")) in msg
    assert f"{book['cache']}: no timemachine.txt" in msg
    assert "ATTNKIT_TIMEMACHINE" in msg
    assert book["urlopen_calls"] == [d2l.DATA_HUB["time_machine"][0]]


def test_wrong_sha1_in_book_data_falls_through_to_the_cache(book, monkeypatch):
    _time_machine_in_book_data(book, monkeypatch)
    (book["data"] / "timemachine.txt").write_text("Not the book\n", encoding="utf-8")
    book["cache"].mkdir()
    (book["cache"] / "timemachine.txt").write_text(TIME_MACHINE, encoding="utf-8")
    assert d2l.read_time_machine() == TIME_MACHINE_LINES
    assert book["urlopen_calls"] == []


def test_env_var_wins_over_book_data(book, monkeypatch, tmp_path):
    _time_machine_in_book_data(book, monkeypatch)
    other = tmp_path / "mine.txt"
    other.write_text("Another Story\n", encoding="utf-8")
    monkeypatch.setenv("ATTNKIT_TIMEMACHINE", str(other))
    assert d2l.read_time_machine() == ["another story"]

    (book["data"] / "fra-eng").mkdir()
    (book["data"] / "fra-eng" / "fra.txt").write_text(FRA, encoding="utf-8")
    mine = tmp_path / "fra-mine.txt"
    mine.write_text("Hello.\tBonjour.\n", encoding="utf-8")
    monkeypatch.setenv("ATTNKIT_FRA", str(mine))
    assert d2l.read_data_nmt() == "Hello.\tBonjour.\n"
    assert book["urlopen_calls"] == []


def test_read_time_machine_offline_without_any_copy(book):
    with pytest.raises(hub.DatasetUnavailableError) as info:
        d2l.read_time_machine()
    msg = str(info.value)
    assert f"../data (= {os.path.abspath(os.path.join('..', 'data'))}): no timemachine.txt" in msg
    assert f"{book['cache']}: no timemachine.txt" in msg
    assert "ATTNKIT_TIMEMACHINE" in msg and "Are you offline?" in msg


# ---------------------------------------------------------------- fra-eng


def _fra_in_book_data(book) -> Path:
    (book["data"] / "fra-eng").mkdir()
    path = book["data"] / "fra-eng" / "fra.txt"
    path.write_text(FRA, encoding="utf-8")
    return path


def test_read_data_nmt_reads_the_extracted_book_folder(book):
    _fra_in_book_data(book)  # no sha1 to check: the hub registers the zip's only
    assert d2l.read_data_nmt() == FRA
    assert d2l.download_extract("fra-eng") == os.path.join("..", "data", "fra-eng")
    assert book["urlopen_calls"] == []


def test_load_data_nmt_from_book_data(book):
    _fra_in_book_data(book)
    data_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(batch_size=2, num_steps=4, num_examples=3)
    assert src_vocab.idx_to_token == ["<unk>", "<pad>", "<bos>", "<eos>", ".", "run", "!"]
    assert tgt_vocab.idx_to_token == ["<unk>", "<pad>", "<bos>", "<eos>", "!"]
    X, X_valid_len, Y, Y_valid_len = data_iter.dataset.tensors  # lines 0..3 (book off-by-one)
    assert X.tolist() == [[0, 4, 3, 1], [0, 4, 3, 1], [5, 6, 3, 1], [5, 6, 3, 1]]
    assert Y.tolist() == [[0, 4, 3, 1]] * 4  # va/salut/cours/courez are rare: <unk> !
    assert X_valid_len.tolist() == Y_valid_len.tolist() == [3, 3, 3, 3]
    batches = list(data_iter)
    assert [b[0].shape for b in batches] == [torch.Size([2, 4])] * 2
    rows = sorted(tuple(r) for b in batches for r in b[0].tolist())
    assert rows == sorted(tuple(r) for r in X.tolist())
    assert book["urlopen_calls"] == []


def test_read_data_nmt_offline_without_any_copy(book):
    with pytest.raises(hub.DatasetUnavailableError) as info:
        d2l.read_data_nmt()
    msg = str(info.value)
    data = os.path.abspath(os.path.join("..", "data"))
    assert f"../data (= {data}): no fra-eng.zip" in msg
    assert f"{book['cache']}: no fra-eng.zip" in msg
    assert f"No extracted folder at ../data/fra-eng (= {data}/fra-eng) either" in msg
    assert "ATTNKIT_FRA=FILE" in msg


# ---------------------------------------------------------------- download / download_extract


def _register(monkeypatch, name: str, filename: str, path: Path) -> None:
    monkeypatch.setitem(d2l.DATA_HUB, name, (d2l.DATA_URL + filename, _sha1(path)))


def test_download_finds_book_data_first(book, monkeypatch):
    (book["data"] / "toy.txt").write_text("toy data\n", encoding="utf-8")
    _register(monkeypatch, "toy", "toy.txt", book["data"] / "toy.txt")
    book["cache"].mkdir()
    (book["cache"] / "toy.txt").write_text("toy data\n", encoding="utf-8")  # also cached
    got = d2l.download("toy")
    assert got == os.path.join("..", "data", "toy.txt")
    assert Path(got).read_text(encoding="utf-8") == "toy data\n"
    # An explicit cache_dir is the only folder looked at, as before.
    assert d2l.download("toy", cache_dir=str(book["cache"])) == str(book["cache"] / "toy.txt")
    assert book["urlopen_calls"] == []


def test_download_explicit_cache_dir_does_not_look_in_book_data(book, monkeypatch, tmp_path):
    (book["data"] / "toy.txt").write_text("toy data\n", encoding="utf-8")
    _register(monkeypatch, "toy", "toy.txt", book["data"] / "toy.txt")
    elsewhere = tmp_path / "elsewhere"
    with pytest.raises(hub.DatasetUnavailableError, match="Are you offline") as info:
        d2l.download("toy", cache_dir=elsewhere)
    assert (
        f"Looked for toy.txt (sha1 {_sha1(book['data'] / 'toy.txt')}) in: {elsewhere}: no toy.txt."
        in str(info.value)
    )
    assert "../data" not in str(info.value)


def test_download_offline_names_the_places_looked(book, monkeypatch):
    monkeypatch.setitem(d2l.DATA_HUB, "toy", (d2l.DATA_URL + "toy.txt", "0" * 40))
    with pytest.raises(hub.DatasetUnavailableError) as info:
        d2l.download("toy")
    data = os.path.abspath(os.path.join("..", "data"))
    assert str(info.value).startswith(
        f"could not download 'toy' from {d2l.DATA_URL}toy.txt (<urlopen error network disabled "
        f"in tests>). Are you offline? Looked for toy.txt (sha1 {'0' * 40}) in: "
        f"../data (= {data}): no toy.txt; {book['cache']}: no toy.txt. "
    )
    assert book["urlopen_calls"] == [d2l.DATA_URL + "toy.txt"]
    assert list(book["cache"].iterdir()) == []  # no partial file left


def test_download_extract_of_a_zip_in_book_data_extracts_there(book, monkeypatch):
    with zipfile.ZipFile(book["data"] / "toy-set.zip", "w") as z:
        z.writestr("toy-set/fra.txt", "Go.\tVa !\n")
    _register(monkeypatch, "toy-set", "toy-set.zip", book["data"] / "toy-set.zip")
    got = d2l.download_extract("toy-set")
    assert got == os.path.join("..", "data", "toy-set")  # as the book: next to the zip
    assert (book["data"] / "toy-set" / "fra.txt").read_text(encoding="utf-8") == "Go.\tVa !\n"
    assert d2l.download_extract("toy-set", "toy-set") == got
    assert book["urlopen_calls"] == []
    assert not book["cache"].exists()


def test_download_extract_prefers_an_extracted_book_folder(book, monkeypatch):
    (book["data"] / "toy-set").mkdir()
    (book["data"] / "toy-set" / "fra.txt").write_text("Hi.\tSalut !\n", encoding="utf-8")
    monkeypatch.setitem(d2l.DATA_HUB, "toy-set", (d2l.DATA_URL + "toy-set.zip", "0" * 40))
    got = d2l.download_extract("toy-set")
    assert got == os.path.join("..", "data", "toy-set")
    assert Path(got, "fra.txt").read_text(encoding="utf-8") == "Hi.\tSalut !\n"
    assert book["urlopen_calls"] == []
