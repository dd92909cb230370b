"""The vocabulary shortlist: what it learns, which words a batch keeps, and decoding over
them, held against decoding with every other word's logit at -inf."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from attnkit.cli import main
from attnkit.inference import int8
from attnkit.inference.beam_search import BeamSearch
from attnkit.inference.decoding import greedy_decode
from attnkit.inference.int8 import quantize_int8
from attnkit.inference.shortlist import OutputColumns, Shortlist, restricted_output
from attnkit.inference.translator import Translator


def test_learn_ranks_each_source_words_targets_by_dice():
    """Three pairs, counted once per pair: c(s=5) = 2, c(t=7) = 2, c(5, 7) = 2 -> Dice 1;
    c(t=8) = 3, c(5, 8) = 2 -> 0.8; c(t=9) = 1 (below min_count 2 with 5)."""
    sources = [[5, 5, 6], [5, 4], [6]]
    targets = [[7, 8], [7, 8, 9], [8]]
    sl = Shortlist.learn(sources, targets, 10, 12, per_source=3, frequent=1, min_count=2)
    assert sl.table[5].tolist() == [7, 8, -1]  # Dice 1.0, then 0.8; 9 met once
    # c(6) = 2, c(6, 8) = 2: 2*2/(2+3) = 0.8; c(6, 7) = 1 < min_count
    assert sl.table[6].tolist() == [8, -1, -1]
    assert sl.table[4].tolist() == [-1, -1, -1]  # met every target once only
    assert sl.frequent.tolist() == [8]  # in all three target sentences
    loose = Shortlist.learn(sources, targets, 10, 12, per_source=2, frequent=0, min_count=1)
    assert loose.table[4].tolist() == [9, 7]  # 2/(1+1) = 1, then 2/(1+2); ties by id
    assert loose.frequent.numel() == 0


def test_a_batch_keeps_its_source_words_lists_the_frequent_words_and_eos():
    table = torch.full((6, 2), -1, dtype=torch.long)
    table[1], table[2], table[3] = (
        torch.tensor([10, 11]),
        torch.tensor([12, -1]),
        torch.tensor([13, 14]),
    )
    sl = Shortlist(table, torch.tensor([0, 1]), 20)
    src = torch.tensor([[1, 2, 3], [2, 5, 5]])
    src_len = torch.tensor([2, 1])  # id 3 and the 5s are padding
    assert sl.words(src, src_len, keep=(19,)).tolist() == [0, 1, 10, 11, 12, 19]
    # sentence words {0, 1, 10, 11} and {0, 1, 12, 13, 14}; together 7; 10, 12, 14, 1 inside
    assert sl.coverage([[1], [2, 3]], [[10, 5], [12, 14, 1]]) == (4.5, 7.0, 0.8)
    assert sl.coverage([[1], [2, 3]], [[10, 5], [12, 14, 1]], batch=1) == (4.5, 4.5, 0.8)
    with pytest.raises(
        ValueError, match=r"src holds ids in \[1, 6\], outside the shortlist's \[0, 6\)"
    ):
        sl.words(torch.tensor([[1, 6]]), torch.tensor([2]))


def test_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(
        ValueError, match=r"table must hold target ids in \[0, 5\) \(or -1\), got \[-1, 7\]"
    ):
        Shortlist(torch.tensor([[7, -1]]), torch.tensor([1]), 5)
    with pytest.raises(TypeError, match=r"frequent must be a 1-D long tensor"):
        Shortlist(torch.tensor([[1]]), torch.tensor([[1]]), 5)
    with pytest.raises(
        ValueError, match=r"sources and targets must be equal, non-empty lists, got 1 and 2"
    ):
        Shortlist.learn([[1]], [[1], [2]], 3, 3)
    with pytest.raises(TypeError, match=r"targets must be a list of id lists, got str"):
        Shortlist.learn([[1]], "abc", 3, 3)
    sl = Shortlist(torch.tensor([[1]]), torch.tensor([0]), 5)
    with pytest.raises(TypeError, match=r"src must be a \(B, S\) long tensor, got list"):
        sl.words([[0]], torch.tensor([1]))
    with pytest.raises(ValueError, match=r"src_len must have shape \(B,\) = \(1,\), got \(2,\)"):
        sl.words(torch.tensor([[0]]), torch.tensor([1, 1]))
    decoder = nn.Module()
    decoder.dense = nn.Linear(4, 6)
    rows = r"ids must be output rows in \[0, 6\), got ids in \[2, 6\]"
    with pytest.raises(ValueError, match=rows), restricted_output(decoder, torch.tensor([2, 6])):
        pass
    with pytest.raises(ValueError, match=r"pair 0 holds ids outside the vocabularies \(3, 3\)"):
        Shortlist.learn([[1, 3]], [[1]], 3, 3)
    with pytest.raises(ValueError, match="no shortlist file at"):
        Shortlist.load(tmp_path / "none.pt")
    (tmp_path / "junk.pt").write_text("not a shortlist")
    with pytest.raises(ValueError, match=r"junk\.pt is not a shortlist file"):
        Shortlist.load(tmp_path / "junk.pt")
    needs = r"a shortlist needs a decoder whose output layer \.dense is linear, got NoneType"
    with pytest.raises(TypeError, match=needs), restricted_output(nn.Module(), torch.tensor([0])):
        pass
    with pytest.raises(TypeError, match="shortlist must be a Shortlist or None, got str"):
        BeamSearch(2, 5, 0, 1, shortlist="words.pt")


def test_save_and_load_give_the_same_shortlist(tmp_path):
    sl = Shortlist.learn([[1, 2], [2]], [[3, 4], [4]], 3, 5, per_source=2, frequent=1, min_count=1)
    sl.save(tmp_path / "s.pt")
    back = Shortlist.load(tmp_path / "s.pt")
    assert torch.equal(back.table, sl.table) and torch.equal(back.frequent, sl.frequent)
    assert back.tgt_vocab_size == 5 and "per_source=2" in repr(back)


def test_the_output_layer_is_restored_even_after_an_error():
    decoder = nn.Module()
    decoder.dense = dense = nn.Linear(4, 6)
    with pytest.raises(RuntimeError), restricted_output(decoder, torch.tensor([4, 1])):
        x = torch.randn(2, 4)
        torch.testing.assert_close(decoder.dense(x), dense(x)[:, [4, 1]])
        raise RuntimeError
    assert decoder.dense is dense
    assert OutputColumns(torch.tensor([2, 5, 9])).positions((9, 3, 2)) == (2, 0)


@pytest.fixture(scope="module")
def translator(subword_checkpoint) -> Translator:
    return Translator.load(subword_checkpoint)


@pytest.fixture(scope="module")
def learned(subword_checkpoint, tmp_path_factory) -> Shortlist:
    """``translate shortlist`` on the checkpoint's training pairs: 3 words per source
    word, the 5 most frequent."""
    out = tmp_path_factory.mktemp("shortlist") / "words.pt"
    argv = ["translate", "shortlist", "--checkpoint", str(subword_checkpoint),
            "--per-source", "3", "--frequent", "5", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    return Shortlist.load(out)


def _masked(model: nn.Module, words: torch.Tensor) -> nn.Module:
    """The reference: a copy whose output bias is -inf outside ``words``, so a softmax
    over every id is the softmax over ``words`` (exp(-inf) = 0)."""
    other = copy.deepcopy(model)
    dense = other.decoder.dense
    outside = torch.ones(dense.out_features, dtype=torch.bool)
    outside[words] = False
    bias = torch.zeros(dense.out_features) if dense.bias is None else dense.bias.detach().clone()
    bias[outside] = float("-inf")
    if isinstance(dense, int8.Int8Linear):
        dense.bias = bias
    else:
        dense.bias = nn.Parameter(bias, requires_grad=False)
    return other


@pytest.mark.parametrize("quantized", [False, True])
def test_decoding_over_the_shortlist_is_decoding_with_the_other_words_at_minus_inf(
    translator, learned, real_format_file, quantized
):
    """Greedy and beam 3 over the batch's words W equal the search over every id with the
    logits outside W at -inf (the same renormalized softmax), in float32 and int8; a
    shortlist of every id changes nothing."""
    if quantized and not int8.available():
        pytest.skip("this PyTorch has no oneDNN int8 linear operators")
    data = translator.data
    model = copy.deepcopy(translator.model)
    if quantized:
        quantize_int8(model)
    V, sl, dense = model.decoder.dense.out_features, learned, model.decoder.dense
    lines = real_format_file(300, seed=1).read_text(encoding="utf-8").splitlines()
    src, src_len = data.encode_source([line.split("\t")[0] for line in lines[:24]])
    ids = data.special_ids
    words = sl.words(src, src_len, keep=(ids["eos"],))
    assert 0 < len(words) < V
    reference = _masked(model, words)
    kw = dict(bos_id=ids["bos"], eos_id=ids["eos"], max_len=12)
    got = greedy_decode(model, src, src_len, shortlist=sl, **kw)
    want = greedy_decode(reference, src, src_len, **kw)
    assert got.tokens == want.tokens and got.finished == want.finished
    assert all(set(t) <= set(words.tolist()) for t in got.tokens)
    full = greedy_decode(model, src, src_len, **kw)
    assert sum(a != b for a, b in zip(got.tokens, full.tokens)) > 0  # the words W lacks
    beam = BeamSearch(3, 12, ids["bos"], ids["eos"], 0.6, shortlist=sl)
    plain = BeamSearch(3, 12, ids["bos"], ids["eos"], 0.6)
    for g, w in zip(beam(model, src, src_len), plain(reference, src, src_len), strict=True):
        assert [h.tokens for h in g] == [h.tokens for h in w]
        for a, b in zip(g, w, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)
    everything = Shortlist(torch.full((len(data.src_vocab), 1), -1), torch.arange(V), V)
    assert greedy_decode(model, src, src_len, shortlist=everything, **kw).tokens == full.tokens
    assert model.decoder.dense is dense  # every call gave the output layer back


def test_the_commands_learn_and_use_a_shortlist(subword_checkpoint, learned, tmp_path, capsys):
    """``translate shortlist`` reports what it keeps; ``run`` and ``eval`` take
    ``--shortlist`` (eval says so in its line)."""
    out = tmp_path / "s.pt"
    argv = ["translate", "shortlist", "--checkpoint", str(subword_checkpoint), "--out", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"learned from 270 training pairs: {out}" in text
    assert "target words per sentence" in text and "of the references' words inside" in text
    ckpt = str(subword_checkpoint)
    assert (
        main(["translate", "run", "--checkpoint", ckpt, "--shortlist", str(out), "i lost ."]) == 0
    )
    assert capsys.readouterr().out.strip()
    assert main(["translate", "eval", "--checkpoint", ckpt, "--shortlist", str(out),
                 "--limit", "5", "--examples", "0"]) == 0  # fmt: skip
    assert "greedy, shortlist)" in capsys.readouterr().out
    assert main(["translate", "shortlist", "--checkpoint", ckpt, "--per-source", "0"]) == 1
    assert "--per-source must be at least 1, got 0" in capsys.readouterr().err
