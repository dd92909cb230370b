"""Data of d2l 1.0: the alphabetical Vocab, TimeMachine, MTFraEng, and where files are found."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from attnkit.d2l import v1 as d2l
from attnkit.data.hub import DatasetUnavailableError

REAL_FRA = Path(__file__).resolve().parents[4] / "shared" / "data" / "fra-eng" / "fra.txt"


def test_vocab_is_alphabetical_and_flattens():
    vocab = d2l.Vocab([["b", "a", "c"], ["a", "b"], ["a"]], reserved_tokens=["<pad>"])
    assert vocab.idx_to_token == ["<pad>", "<unk>", "a", "b", "c"]
    assert vocab.token_freqs == [("a", 3), ("b", 2), ("c", 1)]
    assert vocab["a"] == 2 and vocab["zzz"] == vocab.unk == 1
    assert vocab[["c", ["a"]][0]] == 4
    assert vocab.to_tokens([2, 3]) == ["a", "b"]
    assert vocab.to_tokens(torch.tensor([4, 0])) == ["c", "<pad>"]
    assert vocab.to_tokens(3) == "b" and vocab.to_tokens([3]) == "b"
    assert d2l.Vocab(["a", "a", "b"], min_freq=2).idx_to_token == ["<unk>", "a"]
    assert len(d2l.Vocab()) == 1


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: d2l.Vocab("abc"), TypeError, "tokens must be a list of tokens"),
        (lambda: d2l.Vocab(["a"], min_freq="2"), TypeError,
         r"min_freq must be a finite number, got '2' \(str\)"),
        (lambda: d2l.Vocab(["a"], min_freq=float("nan")), ValueError,
         "min_freq must be a finite number, got nan"),
        (lambda: d2l.Vocab(["a"]).to_tokens(7), ValueError,
         r"token index must be an int in \[0, 2\), got 7"),
        (lambda: d2l.Vocab(["a"]).to_tokens(1.0), TypeError,
         r"token index must be an int in \[0, 2\), got 1\.0 \(float\)"),
    ],
)  # fmt: skip
def test_vocab_errors(call, error, match):
    # the book raises IndexError for an index out of range; ours is a ValueError naming it
    with pytest.raises(error, match=match):
        call()


def test_time_machine_from_env_ids_as_the_book(monkeypatch, timemachine_file):
    monkeypatch.setenv("ATTNKIT_TIMEMACHINE", str(timemachine_file))
    data = d2l.TimeMachine(batch_size=2, num_steps=5, num_train=20, num_val=10)
    text = re.sub("[^A-Za-z]+", " ", timemachine_file.read_text()).lower()
    # the book's printed indices of 'the time m' (alphabetical: ' ' 0, '<unk>' 1, 'a' 2...)
    assert data.vocab[list("the time m")] == [21, 9, 6, 0, 21, 10, 14, 6, 0, 14]
    assert len(data.vocab) == 28
    corpus = data.vocab[list(text)]
    assert data.X.shape == (len(corpus) - 5, 5)
    assert data.X[3].tolist() == corpus[3:8] and data.Y[3].tolist() == corpus[4:9]
    X, Y = next(iter(data.train_dataloader()))
    assert X.shape == Y.shape == (2, 5)
    assert len(data.val_dataloader().dataset) == 10 and len(data.train_dataloader()) == 10


def test_time_machine_in_root_needs_the_hub_sha1(tmp_path, timemachine_file):
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(timemachine_file, root / "timemachine.txt")  # not the book's file: wrong sha1
    with pytest.raises(DatasetUnavailableError) as e:
        d2l.TimeMachine(2, 5, root=str(root))
    msg = str(e.value)
    assert "timemachine.txt has sha1" in msg and "(not used)" in msg
    assert "ATTNKIT_TIMEMACHINE" in msg


def test_time_machine_errors(monkeypatch, tmp_path, timemachine_file):
    monkeypatch.setenv("ATTNKIT_TIMEMACHINE", str(timemachine_file))
    with pytest.raises(ValueError, match=r"num_train \+ num_val = 15000 windows"):
        d2l.TimeMachine(2, 5)
    with pytest.raises(ValueError, match="num_steps must be a positive int, got 0"):
        d2l.TimeMachine(2, 0)
    with pytest.raises(TypeError, match=r"batch_size must be a positive int, got 2\.0 \(float\)"):
        d2l.TimeMachine(2.0, 5)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    monkeypatch.setenv("ATTNKIT_TIMEMACHINE", str(empty))
    with pytest.raises(ValueError, match="is empty"):
        d2l.TimeMachine(2, 5, num_train=1, num_val=1)


def test_mtfraeng_tokens_as_the_book(fra_root):
    data = d2l.MTFraEng(batch_size=2, num_steps=4, num_train=4, num_val=2, root=str(fra_root))
    src, tgt = data._tokenize(data._preprocess(data._download()))
    # the book prints these for the first six lines of fra.txt
    assert src[:6] == [["go", ".", "<eos>"], ["hi", ".", "<eos>"], ["run", "!", "<eos>"],
                       ["run", "!", "<eos>"], ["who", "?", "<eos>"], ["wow", "!", "<eos>"]]  # fmt: skip
    assert tgt[:6] == [["va", "!", "<eos>"], ["salut", "!", "<eos>"], ["cours", "!", "<eos>"],
                       ["courez", "!", "<eos>"], ["qui", "?", "<eos>"],
                       ["ça", "alors", "!", "<eos>"]]  # fmt: skip
    assert len(src) == len(tgt) == 25  # the malformed line is skipped


def test_mtfraeng_arrays_vocab_and_splits(fra_root):
    data = d2l.MTFraEng(batch_size=2, num_steps=4, num_train=4, num_val=2, root=str(fra_root))
    # lines 0..6 (num_train + num_val + 1, the book's off-by-one), min_freq=2, alphabetical
    assert data.src_vocab.idx_to_token == ["!", ".", "<eos>", "<pad>", "<unk>", "run"]
    assert data.tgt_vocab.idx_to_token == ["!", "<bos>", "<eos>", "<pad>", "<unk>"]
    src, tgt_in, src_valid_len, label = data.arrays
    assert src.shape == tgt_in.shape == label.shape == (7, 4)
    assert src[0].tolist() == [4, 1, 2, 3] and src[2].tolist() == [5, 0, 2, 3]
    assert src_valid_len.tolist() == [3] * 7
    assert tgt_in[0].tolist() == [1, 4, 0, 2] and label[0].tolist() == [4, 0, 2, 3]
    assert tgt_in[5].tolist() == [1, 4, 4, 0] and label[5].tolist() == [4, 4, 0, 2]
    assert len(data.train_dataloader().dataset) == 4
    assert len(data.val_dataloader().dataset) == 3  # num_val + 1, as the book
    built = data.build(["run !", "go ."], ["va !", "qui ?"])
    assert built[0].tolist() == [[5, 0, 2, 3], [4, 1, 2, 3]]
    assert built[1][:, 0].tolist() == [1, 1] and built[2].tolist() == [3, 3]


def test_mtfraeng_accepts_fra_txt_in_root_and_the_env(tmp_path, fra_root, monkeypatch):
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(fra_root / "fra-eng" / "fra.txt", flat / "fra.txt")
    a = d2l.MTFraEng(2, 4, 4, 2, root=str(flat))
    monkeypatch.setenv("ATTNKIT_FRA", str(flat / "fra.txt"))
    b = d2l.MTFraEng(2, 4, 4, 2, root=str(tmp_path / "nowhere"))
    for x, y in zip(a.arrays, b.arrays):
        assert torch.equal(x, y)


def test_mtfraeng_offline_without_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetUnavailableError) as e:
        d2l.MTFraEng(batch_size=128)  # root '../data', as the book
    msg = str(e.value)
    assert "Are you offline?" in msg and "ATTNKIT_FRA" in msg and "../data" in msg
    assert "MTFraEng also reads ../data/fra-eng/fra.txt or ../data/fra.txt" in msg


def test_mtfraeng_errors(fra_root, tmp_path):
    with pytest.raises(ValueError, match=r"num_train \+ num_val = 512 \+ 128 = 640 sentence"):
        d2l.MTFraEng(batch_size=4, root=str(fra_root))
    with pytest.raises(ValueError, match="num_steps must be a positive int, got -1"):
        d2l.MTFraEng(4, num_steps=-1, root=str(fra_root))
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "fra.txt").write_text("  \n")
    with pytest.raises(ValueError, match="is empty"):
        d2l.MTFraEng(4, root=str(tmp_path / "e"))
    data = d2l.MTFraEng(2, 4, 4, 2, root=str(fra_root))
    with pytest.raises(ValueError, match="same length, got 2 and 1"):
        data.build(["go .", "hi ."], ["va !"])


@pytest.mark.parametrize("cls", [d2l.TimeMachine, d2l.MTFraEng])
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"batch_size": 0}, ValueError, "batch_size must be a positive int, got 0"),
        ({"batch_size": "2"}, TypeError, r"batch_size must be a positive int, got '2' \(str\)"),
        ({"num_steps": -1}, ValueError, "num_steps must be a positive int, got -1"),
        ({"num_steps": 4.0}, TypeError, r"num_steps must be a positive int, got 4\.0 \(float\)"),
        ({"num_train": 0}, ValueError, "num_train must be a positive int, got 0"),
        ({"num_train": True}, TypeError, r"num_train must be a positive int, got True \(bool\)"),
        ({"num_val": -1}, ValueError, "num_val must be a non-negative int, got -1"),
        ({"num_val": None}, TypeError, r"num_val must be a non-negative int, got None \(NoneType\)"),
    ],
)  # fmt: skip
def test_data_counts_are_checked_before_any_file_is_read(tmp_path, cls, kwargs, error, match):
    args = {"batch_size": 2, "num_steps": 4, "num_train": 4, "num_val": 2, **kwargs}
    with pytest.raises(error, match=match):
        cls(**args, root=str(tmp_path / "nothing-here"))


@pytest.mark.skipif(not REAL_FRA.is_file(), reason=f"no real fra.txt at {REAL_FRA}")
def test_mtfraeng_real_data_build_as_printed_in_the_book(monkeypatch):
    monkeypatch.setenv("ATTNKIT_FRA", str(REAL_FRA))
    data = d2l.MTFraEng(batch_size=3)
    src, tgt, _, _ = data.build(["hi ."], ["salut ."])
    assert data.src_vocab.to_tokens(src[0].type(torch.int32)) == [
        "hi", ".", "<eos>", "<pad>", "<pad>", "<pad>", "<pad>", "<pad>", "<pad>"
    ]  # fmt: skip
    assert data.tgt_vocab.to_tokens(tgt[0].type(torch.int32)) == [
        "<bos>", "salut", ".", "<eos>", "<pad>", "<pad>", "<pad>", "<pad>", "<pad>"
    ]  # fmt: skip
    assert (len(data.src_vocab), len(data.tgt_vocab)) == (194, 214)
