"""d2l chapter 9 data names: read_data_nmt ... load_data_nmt, as the book."""

from __future__ import annotations

import pytest
import torch

from attnkit import d2l
from attnkit.data import hub
from attnkit.data.text import Vocab

SMALL = "Go.\tVa !\nHi.\tSalut !\nRun!\tCours\u202f!\nRun!\tCourez\u202f!\nWho?\tQui ?\nWow!\tÇa alors\u202f!\n"


@pytest.fixture
def small_fra(tmp_path, monkeypatch):
    path = tmp_path / "fra.txt"
    path.write_text(SMALL, encoding="utf-8")
    monkeypatch.setenv("ATTNKIT_FRA", str(path))
    return path


def test_names_exist():
    for name in ("read_data_nmt", "preprocess_nmt", "tokenize_nmt", "truncate_pad",
                 "build_array_nmt", "load_data_nmt", "load_array"):  # fmt: skip
        assert callable(getattr(d2l, name)), name


def test_read_data_nmt_reads_attnkit_fra(small_fra):
    assert d2l.read_data_nmt() == SMALL
    text = d2l.preprocess_nmt(d2l.read_data_nmt())
    assert text.split("\n")[:3] == ["go .\tva !", "hi .\tsalut !", "run !\tcours !"]


def test_load_data_nmt_on_a_small_file(small_fra):
    data_iter, src_vocab, _ = d2l.load_data_nmt(batch_size=2, num_steps=4, num_examples=3)
    assert len(data_iter.dataset) == 4  # lines 0..3: the book's off-by-one
    assert src_vocab.idx_to_token == ["<unk>", "<pad>", "<bos>", "<eos>", ".", "run", "!"]
    seen = 0
    for X, X_valid_len, Y, Y_valid_len in data_iter:
        assert X.shape[1] == Y.shape[1] == 4 and X.dtype == torch.long
        assert (X_valid_len == (X != 1).sum(1)).all() and (Y_valid_len == (Y != 1).sum(1)).all()
        seen += X.shape[0]
    assert seen == 4
    assert isinstance(data_iter, torch.utils.data.DataLoader)


def test_load_array_shuffles_only_when_training():
    arrays = (torch.arange(10), torch.arange(10) * 2)
    loader = d2l.load_array(arrays, 4, is_train=False)
    assert [x.tolist() for x, _ in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    torch.manual_seed(0)
    shuffled = torch.cat([x for x, _ in d2l.load_array(arrays, 4)])
    assert sorted(shuffled.tolist()) == list(range(10)) and shuffled.tolist() != list(range(10))


def test_read_data_nmt_offline_error(monkeypatch):
    monkeypatch.delenv("ATTNKIT_FRA", raising=False)

    def offline(name, folder=None, **kwargs):
        raise hub.DatasetUnavailableError("could not download 'fra-eng' (offline)")

    monkeypatch.setattr(hub, "download_extract", offline)
    with pytest.raises(hub.DatasetUnavailableError, match=r"--data FILE, or ATTNKIT_FRA=FILE"):
        d2l.read_data_nmt()


def test_book_numbers_on_the_real_file(fra_file):
    data_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(batch_size=2, num_steps=8)
    assert len(data_iter.dataset) == 601
    assert (len(src_vocab), len(tgt_vocab)) == (184, 201)
    X, X_valid_len, Y, _ = next(iter(data_iter))
    assert X.shape == Y.shape == (2, 8)
    assert X_valid_len.dtype == (X != 1).type(torch.int32).sum(1).dtype

    raw = d2l.read_data_nmt()
    assert raw[:75].startswith("Go.\tVa !\nHi.\tSalut !\nRun!\tCours\u202f!\n")
    source, target = d2l.tokenize_nmt(d2l.preprocess_nmt(raw))
    assert len(source) == len(target) == 167130
    assert source[:3] == [["go", "."], ["hi", "."], ["run", "!"]]
    assert len(Vocab(source, min_freq=2, reserved_tokens=["<pad>", "<bos>", "<eos>"])) == 10012
