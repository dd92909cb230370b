"""Beam search: beam 1 == greedy, hypotheses' scores are the model's real log-probabilities."""

from __future__ import annotations

import pytest
import torch

from attnkit.inference.beam_search import BeamSearch
from attnkit.inference.decoding import greedy_decode
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


@torch.no_grad()
def brute_force_best(model, src, src_len, max_len):
    """max over every hypothesis of <= max_len tokens of its log-probability (exhaustive)."""
    V = model.decoder.dense.out_features
    others = torch.tensor([t for t in range(V) if t != EOS])
    Y = torch.cartesian_prod(*[others] * max_len).reshape(-1, max_len)  # (M, L), no <eos>
    X = torch.cat([torch.full((len(Y), 1), BOS), Y[:, :-1]], dim=1)
    logits, _ = model(src[None].expand(len(Y), -1), X, src_len.expand(len(Y)))
    logp = torch.log_softmax(logits.double(), -1)  # (M, L, V)
    step = logp.gather(2, Y[..., None])[..., 0]  # (M, L)
    prefix = torch.cat([torch.zeros(len(Y), 1, dtype=torch.float64), step.cumsum(1)], dim=1)
    finished = prefix[:, :max_len] + logp[:, :, EOS]  # l tokens, then <eos>
    return max(float(prefix[:, -1].max()), float(finished.max()))


@pytest.mark.parametrize("seed", [0, 1])
def test_a_beam_wide_enough_to_keep_every_prefix_finds_the_exact_best(seed):
    model, src, src_len = model_and_src(seed)
    L = 3
    V = model.decoder.dense.out_features
    for n in (0, 3):
        best = brute_force_best(model, src[n], src_len[n], L)
        exhaustive = BeamSearch((V - 1) ** L, L, BOS, EOS)(
            model, src[n : n + 1], src_len[n : n + 1]
        )
        assert abs(exhaustive[0][0].log_prob - best) < 1e-4
        narrow = BeamSearch(2, L, BOS, EOS)(model, src[n : n + 1], src_len[n : n + 1])
        assert narrow[0][0].log_prob <= best + 1e-4  # a narrow beam can only do worse


def test_beam_search_runs_in_eval_mode_and_restores_the_mode():
    model, src, src_len = model_and_src(0)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.5
    model.train()
    runs = [BeamSearch(3, 6, BOS, EOS)(model, src, src_len) for _ in range(2)]
    assert [[h.tokens for h in r] for r in runs[0]] == [[h.tokens for h in r] for r in runs[1]]
    assert model.training


def test_inputs_are_checked():
    model, src, src_len = model_and_src(0)
    with pytest.raises(ValueError, match=r"src_len must have shape \(B,\) = \(5,\)"):
        BeamSearch(2, 4, BOS, EOS)(model, src, src_len[:2])
    with pytest.raises(TypeError, match=r"src must be a \(B, S\) long tensor, got dtype"):
        BeamSearch(2, 4, BOS, EOS)(model, src.float(), src_len)
    with pytest.raises(TypeError, match=r"src_len must be a \(B,\) tensor, got list"):
        BeamSearch(2, 4, BOS, EOS)(model, src, [6, 5, 3, 2, 1])


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0, 5), {}, ValueError, "beam_size must be a positive int, got 0"),
        ((2, 0), {}, ValueError, "max_len must be a positive int, got 0"),
        ((2.0, 5), {}, TypeError, r"beam_size must be a positive int, got 2\.0 \(float\)"),
        ((True, 5), {}, TypeError, r"beam_size must be a positive int, got True \(bool\)"),
        ((2, "5"), {}, TypeError, r"max_len must be a positive int, got '5' \(str\)"),
        ((2, 3), {"length_penalty": -1}, ValueError, "length_penalty must be a finite number >= 0"),
        ((2, 3), {"length_penalty": float("nan")}, ValueError, "length_penalty must be a finite"),
        ((2, 3), {"length_penalty": "0.6"}, TypeError, "length_penalty must be a finite number"),
    ],
)
def test_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        BeamSearch(*args, bos=BOS, eos=EOS, **kwargs)


@pytest.mark.parametrize("seed", [0, 1])
def test_keeping_the_encoder_side_changes_no_hypothesis(seed, monkeypatch):
    """Beam search keeps the encoder side of the state when every row still decodes its
    sentence (same_sources); the hypotheses equal those of the copying call, and the
    keeping call is made (most steps of a batch that has not finished)."""
    model, src, src_len = model_and_src(seed)
    decoder_type = type(model.decoder)
    calls = []
    real = decoder_type.reorder_state

    def spy(self, state, index, *, same_sources=False):
        calls.append(same_sources)
        return real(self, state, index, same_sources=same_sources)

    monkeypatch.setattr(decoder_type, "reorder_state", spy)
    kept = BeamSearch(3, 8, BOS, EOS)(model, src, src_len)
    assert any(calls) and not all(calls)  # the first step grows 1 row into 3: a copy

    def copying(self, state, index):  # a decoder written without same_sources
        calls.append("plain")
        return real(self, state, index)

    monkeypatch.setattr(decoder_type, "reorder_state", copying)
    copied = BeamSearch(3, 8, BOS, EOS)(model, src, src_len)
    assert "plain" in calls
    for a, b in zip(kept, copied, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.log_prob for h in a] == pytest.approx([h.log_prob for h in b], abs=1e-5)
