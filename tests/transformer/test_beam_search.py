"""Beam search: beam 1 == greedy, hypotheses' scores are the model's real log-probabilities."""

from __future__ import annotations

import pytest
import torch

from attnkit.beam_search import BeamSearch
from attnkit.decoding import greedy_decode
from attnkit.models.transformer import TransformerConfig, build_transformer

BOS, EOS = 2, 3


def model_and_src(seed=0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.0)
    model = build_transformer(cfg, 11, 9).eval()
    # make <eos> likely enough that some hypotheses finish early
    with torch.no_grad():
        model.decoder.dense.bias[EOS] += 1.5
    src = torch.randint(4, 11, (5, 6))
    src_len = torch.tensor([6, 5, 3, 2, 1])
    return model, src, src_len


@torch.no_grad()
def sequence_log_prob(model, src, src_len, tokens, finished):
    """Teacher-forced log p(tokens (+ <eos>)) for one sentence, float64 sum."""
    y = tokens + ([EOS] if finished else [])
    X = torch.tensor([[BOS, *y[:-1]]])
    logits, _ = model(src[None], X, src_len[None])
    logp = torch.log_softmax(logits[0].double(), -1)
    return float(logp[torch.arange(len(y)), torch.tensor(y)].sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_equals_greedy(seed):
    model, src, src_len = model_and_src(seed)
    greedy = greedy_decode(model, src, src_len, bos_id=BOS, eos_id=EOS, max_len=8)
    beam = BeamSearch(1, 8, BOS, EOS)(model, src, src_len)
    assert [h[0].tokens for h in beam] == greedy.tokens
    assert [h[0].finished for h in beam] == greedy.finished


def test_hypotheses_carry_true_log_probs_and_are_sorted():
    model, src, src_len = model_and_src(0)
    results = BeamSearch(4, 8, BOS, EOS, length_penalty=0.6)(model, src, src_len)
    assert len(results) == 5
    for n, hyps in enumerate(results):
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({(*tuple(h.tokens), h.finished) for h in hyps}) == 4  # distinct beams
        for h in hyps:
            ref = sequence_log_prob(model, src[n], src_len[n], h.tokens, h.finished)
            assert abs(ref - h.log_prob) < 1e-4
            length = len(h.tokens) + int(h.finished)
            assert abs(h.score - h.log_prob / ((5 + length) / 6) ** 0.6) < 1e-4


def test_wider_beam_never_ranks_worse_than_its_own_narrower_hypothesis_set():
    model, src, src_len = model_and_src(1)
    b1 = BeamSearch(1, 6, BOS, EOS)(model, src, src_len)
    b5 = BeamSearch(5, 6, BOS, EOS)(model, src, src_len)
    # with no length penalty, a 5-wide beam's best finished log-prob is at least greedy's
    # whenever both finished: greedy's path is explored unless beaten by 5 better prefixes
    for g, w in zip(b1, b5):
        if g[0].finished and w[0].finished:
            assert w[0].log_prob >= g[0].log_prob - 1e-6


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0, 5), "beam_size must be an int >= 1, got 0"),
        ((2, 0), "max_len must be an int >= 1, got 0"),
    ],
)
def test_errors(args, match):
    with pytest.raises(ValueError, match=match):
        BeamSearch(*args, bos=BOS, eos=EOS)
    with pytest.raises(ValueError, match="length_penalty must be >= 0"):
        BeamSearch(2, 3, BOS, EOS, length_penalty=-1)
