"""Corpora, vocabularies and the two minibatch iterators."""

from __future__ import annotations

import itertools
import random
import urllib.error

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.data import lm
from attnkit.data.hub import DatasetUnavailableError


def test_normalize_line_is_the_books():
    assert lm.normalize_line("The Time Machine, by H. G. Wells [1898]\n") == (
        "the time machine by h g wells"
    )
    assert lm.normalize_line("  ---  ") == ""


def test_load_corpus_char_vocab_order_and_truncation():
    corpus, vocab = lm.load_corpus(["abca", "", "b a"], "char")
    # counts: a 3, b 2, c 1, ' ' 1 -> sorted by count, ties in first-seen order
    assert vocab.idx_to_token == ["<unk>", "a", "b", "c", " "]
    assert corpus == [1, 2, 3, 1, 2, 4, 1]  # lines are concatenated without separator
    short, vocab2 = lm.load_corpus(["abca", "", "b a"], "char", max_tokens=3)
    assert short == [1, 2, 3] and vocab2.idx_to_token == vocab.idx_to_token


def test_load_corpus_word():
    corpus, vocab = lm.load_corpus(["the cat the", "dog"], "word")
    assert vocab.idx_to_token == ["<unk>", "the", "cat", "dog"]
    assert corpus == [1, 2, 1, 3]


def test_empty_corpus_is_a_clear_error():
    with pytest.raises(ValueError, match=r"the corpus is empty: got 2 lines and 0 char tokens"):
        lm.load_corpus(["", ""])
    with pytest.raises(ValueError, match="the corpus is empty"):
        lm.load_corpus([lm.normalize_line("1234 !!")])
    with pytest.raises(ValueError, match="token must be one of 'word', 'char', got 'byte'"):
        lm.load_corpus(["abc"], "byte")
    with pytest.raises(TypeError, match=r"max_tokens must be an int, got 1\.5 \(float\)"):
        lm.load_corpus(["abc"], max_tokens=1.5)
    with pytest.raises(TypeError, match="got one str"):
        lm.load_corpus("abc")


def test_builtin_corpus_is_substantial_english_and_deterministic():
    lines = lm.builtin_corpus_lines()
    corpus, vocab = lm.load_corpus(lines)
    assert len(corpus) > 200_000
    assert len(vocab) == 28  # <unk>, space and the 26 letters, as the time machine
    assert vocab.idx_to_token[1] == " "
    assert set(vocab.idx_to_token[1:]) == set(" abcdefghijklmnopqrstuvwxyz")
    words = lm.load_corpus(lines, "word")[1]
    assert words.idx_to_token[1] == "the"
    assert lm.builtin_corpus_lines() == lines


def _positions(batches):
    xs = torch.cat([X.reshape(-1) for X, _ in batches])
    return xs.tolist()


def _check_epoch(batches, n, B, T):
    assert batches, "at least one minibatch per epoch"
    for X, Y in batches:
        assert X.shape == (B, T) and X.dtype == torch.int64
        assert torch.equal(Y, X + 1)  # corpus[i] == i, so Y is X shifted by one
        assert torch.equal(X - X[:, :1], torch.arange(T).expand(B, T))  # rows are contiguous
    pos = _positions(batches)
    assert len(pos) == len(set(pos)), "no token is used twice in an epoch"
    assert min(pos) >= 0 and max(pos) <= n - 2
    uncovered = n - len(pos)
    assert 1 <= uncovered <= (B + 1) * T, "only an offset and a remainder are left out"


@settings(max_examples=40, deadline=None)
@given(
    B=st.integers(1, 6),
    T=st.integers(1, 9),
    extra=st.integers(0, 120),
    seed=st.integers(0, 2**31),
    use_random=st.booleans(),
)
def test_iterators_cover_the_corpus_once(B, T, extra, seed, use_random):
    n = (B + 1) * T + 1 + extra
    corpus = list(range(n))
    fn = lm.seq_data_iter_random if use_random else lm.seq_data_iter_sequential
    batches = list(fn(corpus, B, T, random.Random(seed)))
    _check_epoch(batches, n, B, T)
    if not use_random:  # sequential: minibatch i+1 continues minibatch i row by row
        for (X0, _), (X1, _) in itertools.pairwise(batches):
            assert torch.equal(X1[:, 0], X0[:, -1] + 1)
        rows = torch.cat([X for X, _ in batches], dim=1)  # (B, steps used per row)
        assert torch.equal(rows - rows[:, :1], torch.arange(rows.shape[1]).expand_as(rows))
        stride = int(rows[1, 0] - rows[0, 0]) if B > 1 else rows.shape[1]
        assert stride >= rows.shape[1]  # rows are consecutive stretches of the text
        assert torch.equal(rows[:, 0], rows[0, 0] + stride * torch.arange(B))
        assert 0 <= int(rows[0, 0]) <= T  # the random offset
    # the same seed gives the same epoch
    again = list(fn(corpus, B, T, random.Random(seed)))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again))


def test_books_sequential_example():
    # the book: corpus range(35), batch 2, 5 steps; with offset 0 the first minibatch is
    # X = [[0..4], [17..21]]
    rng = random.Random()
    rng.randint = lambda a, b: 0  # force offset 0
    (X, Y), *_ = list(lm.seq_data_iter_sequential(list(range(35)), 2, 5, rng))
    assert X.tolist() == [[0, 1, 2, 3, 4], [17, 18, 19, 20, 21]]
    assert Y.tolist() == [[1, 2, 3, 4, 5], [18, 19, 20, 21, 22]]


def test_loader_is_reproducible_across_epochs_and_shards_rows():
    corpus = list(range(500))
    a = lm.LMDataLoader(corpus, 4, 5, use_random_iter=True, seed=3)
    b = lm.LMDataLoader(corpus, 4, 5, use_random_iter=True, seed=3)
    ea = [list(a), list(a)]
    eb = [list(b), list(b)]
    for x, y in zip(ea, eb):
        assert all(torch.equal(p[0], q[0]) for p, q in zip(x, y))
    assert not torch.equal(ea[0][0][0], ea[1][0][0])  # a fresh offset/shuffle per epoch
    full = list(lm.LMDataLoader(corpus, 4, 5, seed=7))
    shard = list(lm.LMDataLoader(corpus, 4, 5, seed=7, rank=1, world_size=2))
    assert all(torch.equal(f[0][1::2], s[0]) for f, s in zip(full, shard))


def test_iterator_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"corpus has 10 tokens, too short .* num_steps=20"):
        list(lm.seq_data_iter_random(list(range(10)), 2, 20))
    with pytest.raises(ValueError, match=r"expected at least \(batch_size \+ 1\) \* num_steps"):
        list(lm.seq_data_iter_sequential(list(range(10)), 2, 20))
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        list(lm.seq_data_iter_sequential(list(range(100)), 0, 5))
    with pytest.raises(TypeError, match=r"num_steps must be a positive int, got 2\.5"):
        lm.LMDataLoader(list(range(100)), 2, 2.5)
    with pytest.raises(
        TypeError, match=r"flat sequence of token indices, got dtype torch\.float32"
    ):
        list(lm.seq_data_iter_random([0.5] * 100, 2, 5))
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, 2\), got 2"):
        lm.LMDataLoader(list(range(100)), 2, 5, rank=2, world_size=2)
    with pytest.raises(TypeError, match=r"rank must be an int in \[0, 2\), got True \(bool\)"):
        lm.LMDataLoader(list(range(100)), 2, 5, rank=True, world_size=2)
    with pytest.raises(ValueError, match="world_size must be a positive int, got 0"):
        lm.LMDataLoader(list(range(100)), 2, 5, world_size=0)


@pytest.mark.parametrize("corpus", [[], (), torch.tensor([], dtype=torch.long)])
def test_empty_corpus_says_empty_not_float(corpus):
    # torch.tensor([]) is float32: the emptiness check comes before the dtype check
    for make in (lm.seq_data_iter_random, lm.seq_data_iter_sequential):
        with pytest.raises(ValueError, match=r"^corpus is empty \(got \w+ of shape \(0,\)\)"):
            list(make(corpus, 2, 5))
    with pytest.raises(ValueError, match="corpus is empty"):
        lm.LMDataLoader(corpus, 2, 5)


def test_missing_data_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.txt' does not exist"):
        lm.read_corpus_lines(tmp_path / "nope.txt")


def test_time_machine_offline_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNKIT_TIMEMACHINE", raising=False)
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    with pytest.raises(
        DatasetUnavailableError, match=r"Are you offline\? .*--data FILE.*ATTNKIT_TIMEMACHINE"
    ):
        lm.read_time_machine()


def test_time_machine_from_env_and_cache(tmp_path, monkeypatch):
    f = tmp_path / "tm.txt"
    f.write_text("The Time Machine!\n\nby H. G. Wells\n", encoding="utf-8")
    monkeypatch.setenv("ATTNKIT_TIMEMACHINE", str(f))
    assert lm.read_time_machine() == ["the time machine", "", "by h g wells"]
    assert lm.read_corpus_lines("time_machine") == lm.read_time_machine()
