"""``attnkit.d2l`` under Chinese prints what d2l-zh's own code prints (its ``d2l/torch.py``),
byte for byte; under English, what it always printed."""

from __future__ import annotations

import hashlib
import re
import urllib.error
import urllib.request

import pytest
import torch
from torch import nn

from attnkit import d2l
from attnkit.d2l.book_output import BOOK_OUTPUT, book_line
from attnkit.data.hub import DatasetUnavailableError
from attnkit.data.lm import LMDataLoader, load_corpus
from attnkit.i18n import use_language

TEXT = ["the time traveller for so it will be convenient to speak of him"] * 10


def _train_ch8_lines(language: str, capsys) -> list[str]:
    torch.manual_seed(0)
    corpus, vocab = load_corpus(TEXT)
    net = d2l.RNNModel(nn.RNN(len(vocab), 16), len(vocab))
    train_iter = LMDataLoader(corpus, 8, 10, seed=0)
    with use_language(language):
        d2l.train_ch8(net, train_iter, vocab, lr=1, num_epochs=2, device="cpu")
    return capsys.readouterr().out.splitlines()


def test_train_ch8_prints_d2l_zhs_line_under_chinese(capsys):
    out = _train_ch8_lines("zh", capsys)
    # d2l-zh: print(f'困惑度 {ppl:.1f}, {speed:.1f} 词元/秒 {str(device)}')
    assert re.fullmatch(r"困惑度 \d+\.\d, \d+\.\d 词元/秒 cpu", out[0]), out[0]
    assert out[1].startswith("time traveller") and len(out[1]) == 14 + 50
    assert out[2].startswith("traveller") and len(out[2]) == 9 + 50


def test_train_ch8_is_unchanged_under_english(capsys):
    out = _train_ch8_lines("en", capsys)
    assert re.fullmatch(r"perplexity \d+\.\d, \d+\.\d tokens/sec on cpu", out[0]), out[0]
    assert "困惑度" not in "\n".join(out)


def test_the_book_lines_render_as_each_edition_prints_them():
    fields = {"ppl": 1.23, "speed": 4567.89, "device": str(torch.device("cpu"))}
    with use_language("zh"):
        assert book_line("train_ch8", **fields) == "困惑度 1.2, 4567.9 词元/秒 cpu"
        # d2l-zh's train_seq2seq line is English, as d2l-zh prints it
        seq = book_line("train_seq2seq", loss=0.12345, speed=99.0, device="cuda:0")
        assert seq == "loss 0.123, 99.0 tokens/sec on cuda:0"
        url, fname = "http://d2l-data.s3-accelerate.amazonaws.com/timemachine.txt", "a/b.txt"
        assert book_line("download", url=url, fname=fname) == f"正在从{url}下载{fname}..."
    with use_language("en"):
        assert book_line("train_ch8", **fields) == "perplexity 1.2, 4567.9 tokens/sec on cpu"
        assert book_line("download", url="u", fname="f") is None  # attnkit downloads quietly
    with use_language("pt"):  # no edition of its own: English
        assert book_line("train_ch8", **fields) == "perplexity 1.2, 4567.9 tokens/sec on cpu"
    assert set(BOOK_OUTPUT["en"]) <= set(BOOK_OUTPUT["zh"])


def test_tokenize_names_an_unknown_token_type_in_d2l_zhs_words():
    with use_language("zh"), pytest.raises(ValueError) as caught:
        d2l.tokenize(["a b"], "subword")
    assert str(caught.value) == "错误：未知词元类型：subword"
    with use_language("en"), pytest.raises(ValueError) as caught:
        d2l.tokenize(["a b"], "subword")
    assert str(caught.value) == "token must be one of 'word', 'char', got 'subword'"
    with use_language("zh"):
        assert d2l.tokenize(["a b"], "char") == [["a", " ", "b"]]
        assert d2l.tokenize(["a b"]) == [["a", "b"]]


@pytest.fixture
def toy_entry(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    url = d2l.DATA_URL + "toy.txt"
    monkeypatch.setitem(d2l.DATA_HUB, "toy", (url, "0" * 40))
    return url, tmp_path


def test_download_is_announced_as_d2l_zh_does_under_chinese_only(toy_entry, capsys):
    url, tmp_path = toy_entry
    with use_language("zh"), pytest.raises(DatasetUnavailableError):
        d2l.download("toy")
    assert capsys.readouterr().out == f"正在从{url}下载{tmp_path / 'cache' / 'toy.txt'}...\n"
    with use_language("zh"), pytest.raises(DatasetUnavailableError):
        d2l.download("toy", cache_dir=str(tmp_path / "mine"))
    assert capsys.readouterr().out == f"正在从{url}下载{tmp_path / 'mine' / 'toy.txt'}...\n"
    with use_language("en"), pytest.raises(DatasetUnavailableError):
        d2l.download("toy")
    assert capsys.readouterr().out == ""


def test_no_announcement_when_a_verified_copy_is_there(toy_entry, monkeypatch, capsys):
    url, tmp_path = toy_entry
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "toy.txt").write_text("x")
    with use_language("zh"), pytest.raises(DatasetUnavailableError):
        d2l.download("toy")  # a copy with another sha1 is downloaded again, as in the book
    assert capsys.readouterr().out == f"正在从{url}下载{tmp_path / 'cache' / 'toy.txt'}...\n"
    monkeypatch.setitem(d2l.DATA_HUB, "toy", (url, hashlib.sha1(b"x").hexdigest()))
    with use_language("zh"):
        assert d2l.download("toy") == str(tmp_path / "cache" / "toy.txt")
    assert capsys.readouterr().out == ""


def _message(language: str, error: type[Exception], call, *args) -> str:
    with use_language(language), pytest.raises(error) as caught:
        call(*args)
    return str(caught.value)


def test_the_book_layers_errors_are_chinese_under_chinese_and_unchanged_in_english():
    from attnkit.d2l import v1

    X = torch.ones(2, 4, 3)  # num_hiddens 3 does not split into 2 heads
    assert _message("zh", ValueError, d2l.transpose_qkv, X, 2) == (
        "transpose_qkv：X.shape[2]（num_hiddens）必须能被num_heads整除，实际为3和num_heads=2"
    )
    assert _message("en", ValueError, d2l.transpose_qkv, X, 2) == (
        "transpose_qkv: X.shape[2] (num_hiddens) must be divisible by num_heads, "
        "got 3 and num_heads=2"
    )
    x, y = torch.ones(3), torch.ones(2)
    call = v1.nadaraya_watson
    assert _message("zh", ValueError, call, x, y, x, v1.gaussian) == (
        "x_train和y_train的长度必须相同，实际为3和2"
    )
    assert _message("en", ValueError, call, x, y, x, v1.gaussian) == (
        "x_train and y_train must have the same length, got 3 and 2"
    )
    fit = v1.Trainer(max_epochs=1).fit
    assert _message("zh", TypeError, fit, "net", None) == "model必须是d2l.Module，实际为str"
    assert _message("en", TypeError, fit, "net", None) == "model must be a d2l.Module, got str"


def test_a_message_built_from_pieces_is_one_sentence_in_each_language():
    # the empty-list case names its own words; the English reads as it always has
    assert _message("zh", TypeError, d2l.show_attention, []) == (
        "attention_weights为列表时，必须每个块一个张量，实际为空列表"
    )
    assert _message("en", TypeError, d2l.show_attention, []) == (
        "attention_weights as a list must hold one tensor per block, got an empty list"
    )
    with use_language("pt"), pytest.raises(ValueError) as caught:  # no pt catalog: English
        d2l.transpose_output(torch.ones(3, 2, 4), 2)
    assert str(caught.value).startswith("transpose_output: X.shape[0] (batch * num_heads)")
