"""Generation: cached decoding equals full passes for every position scheme and kv-heads
setting, batches (left-padded) equal single prompts, seeds repeat samples, the nucleus is
the smallest set with mass >= p, streaming, the context window, both model kinds."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import POSITIONS
from attnkit.data.text import Vocab
from attnkit.inference.generation import PromptCutWarning, generate, generate_ids
from attnkit.inference.sampling import next_token_probs
from attnkit.models.decoder_lm import DecoderLMConfig
from attnkit.models.rnn import build_lm

VOCAB = Vocab(list("the time traveller was expounding a recondite matter to us"))
V = len(VOCAB)


def _lm(positions="rope", kv=None, context=16, dtype=torch.float64):
    torch.manual_seed(0)
    cfg = DecoderLMConfig(
        vocab_size=V, d_model=16, num_heads=4, num_kv_heads=kv, num_layers=2, ffn_hidden=32,
        dropout=0.0, context_length=context, positions=positions,
    )  # fmt: skip
    model = cfg.build().to(dtype)
    with torch.no_grad():  # weights far from GPT-2's small init: varied, not repeated, tokens
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    return model


def _full_pass(model, prompt: list[int], n: int, seed: int | None = None) -> list[int]:
    """nanoGPT's loop: no cache, the whole sequence (its last context_length tokens) each
    step; greedy, or sampled at temperature 1 from a generator seeded with ``seed``."""
    seq = list(prompt)
    g = None if seed is None else torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _ in range(n):
            logits = model.eval()(torch.tensor([seq[-model.context_length :]]))[:, -1]  # (1, V)
            if g is None:
                seq.append(int(logits.argmax()))
            else:
                seq.append(
                    int(torch.multinomial(torch.softmax(logits.float(), -1), 1, generator=g))
                )
    return seq[len(prompt) :]


@pytest.mark.parametrize("kv", [1, 2, 4])
@pytest.mark.parametrize("positions", POSITIONS)
def test_cached_generation_equals_the_full_pass(positions, kv):
    model = _lm(positions, kv)
    prompt = VOCAB[list("time tra")]
    cached = generate_ids(model, [prompt], max_new_tokens=12)[0]
    assert cached == _full_pass(model, prompt, 12)
    assert cached == generate_ids(model, [prompt], max_new_tokens=12, use_cache=False)[0]
    # sampled: a draw at every step follows the logits, which must agree at every step
    sampled = generate_ids(model, [prompt], max_new_tokens=12, temperature=1.0, seed=5)[0]
    assert len(set(sampled)) >= 5  # varied tokens, not one repeated
    assert sampled == _full_pass(model, prompt, 12, seed=5)


@pytest.mark.parametrize("positions", POSITIONS)
def test_past_the_context_each_token_sees_the_last_window(positions):
    model = _lm(positions, kv=2, context=8)
    prompt = VOCAB[list("the time")]  # 8 tokens: the context is full at once
    got = generate_ids(model, prompt, max_new_tokens=10, temperature=1.0, seed=2)[0]
    assert got == _full_pass(model, prompt, 10, seed=2)
    assert generate_ids(model, prompt, max_new_tokens=10)[0] == _full_pass(model, prompt, 10)


@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "rope", "alibi"])
def test_a_left_padded_batch_equals_each_prompt_alone(positions):
    model = _lm(positions, kv=2)
    prompts = [VOCAB[list(p)] for p in ("time traveller", "a", "matter to")]
    batched = generate_ids(model, prompts, max_new_tokens=8)
    assert batched == [generate_ids(model, [p], max_new_tokens=8)[0] for p in prompts]
    sampled = generate_ids(model, prompts, max_new_tokens=6, temperature=1.0, seed=3)
    assert sampled == generate_ids(model, prompts, max_new_tokens=6, temperature=1.0, seed=3)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_recurrent_models_batch_the_same_way(cell):
    torch.manual_seed(0)
    model = build_lm(cell, V, 16, num_layers=2)
    prompts = ["time traveller", "a", "matter to"]
    batched = generate(model, prompts, vocab=VOCAB, max_new_tokens=8)
    assert batched == [generate(model, p, vocab=VOCAB, max_new_tokens=8) for p in prompts]
    # the book's predict_ch8 is this generation, one prompt
    from attnkit.d2l import predict_ch8

    assert predict_ch8("matter to", 8, model, VOCAB, "cpu") == batched[2]


def test_a_seed_repeats_a_sample_and_the_sample_follows_the_distribution():
    model = _lm("alibi", kv=1, dtype=torch.float32)
    prompt = ["the time", "us"]
    kwargs = {"vocab": VOCAB, "max_new_tokens": 15, "temperature": 1.0}
    a = generate(model, prompt, seed=7, **kwargs)
    assert a == generate(model, prompt, seed=7, **kwargs)
    assert a == generate(model, prompt, generator=torch.Generator().manual_seed(7), **kwargs)
    assert a != generate(model, prompt, seed=8, **kwargs)
    greedy = generate(model, prompt, vocab=VOCAB, max_new_tokens=15)
    assert generate(model, prompt, seed=1, top_k=1, **kwargs) == greedy  # one token left
    cold = {**kwargs, "temperature": 1e-4}
    assert generate(model, prompt, seed=1, **cold) == greedy  # a tiny temperature: the argmax
    # the draws follow next_token_probs: one step, many rows, against the probabilities
    ids = torch.tensor(VOCAB[list("the time")])
    with torch.no_grad():
        probs = next_token_probs(model(ids[None])[0, -1], 1.0, top_k=4, top_p=0.8)
    rows = [ids.tolist()] * 4000
    first = torch.tensor(generate_ids(model, rows, max_new_tokens=1, temperature=1.0, top_k=4,
                                      top_p=0.8, seed=0))[:, 0]  # fmt: skip
    freq = torch.bincount(first, minlength=V).double() / len(rows)
    assert (freq[probs == 0] == 0).all()  # never a token outside the nucleus
    torch.testing.assert_close(freq, probs.double(), rtol=0, atol=0.03)


def test_top_p_keeps_the_smallest_set_with_mass_at_least_p():
    probs = torch.tensor([0.125, 0.5, 0.0625, 0.25, 0.0625])
    logits = probs.log()
    kept = lambda p: (next_token_probs(logits, 1.0, top_p=p) > 0).nonzero().flatten().tolist()  # noqa: E731
    assert kept(0.5) == [1]  # 0.5 alone reaches 0.5
    assert kept(0.51) == [1, 3]  # 0.75
    assert kept(0.75) == [1, 3]
    assert kept(0.76) == [0, 1, 3]  # 0.875
    assert kept(0.9) in ([0, 1, 2, 3], [0, 1, 3, 4])  # 0.9375: one of the two 0.0625 is enough
    assert kept(1.0) == [0, 1, 2, 3, 4]
    torch.testing.assert_close(next_token_probs(logits, 1.0, top_p=0.75),
                               torch.tensor([0, 2 / 3, 0, 1 / 3, 0]))  # fmt: skip
    # top-k first, then the nucleus of what is left (renormalized)
    assert (next_token_probs(logits, 1.0, top_k=2, top_p=0.6) > 0).tolist() == [
        False, True, False, False, False,
    ]  # fmt: skip
    # the temperature reshapes the distribution before the cut
    torch.testing.assert_close(next_token_probs(logits, 2.0), torch.softmax(logits / 2, -1))


@settings(max_examples=60, deadline=None)
@given(
    logits=st.lists(st.floats(-6, 6), min_size=2, max_size=12),
    p=st.floats(0.01, 1.0),
    temperature=st.floats(0.2, 3.0),
)
def test_the_nucleus_is_the_smallest_most_likely_set_reaching_p(logits, p, temperature):
    logits = torch.tensor(logits)
    full = torch.softmax(logits / temperature, -1)
    out = next_token_probs(logits, temperature, top_p=p)
    kept = out > 0
    n = int(kept.sum())
    torch.testing.assert_close(out.sum(), torch.tensor(1.0))
    torch.testing.assert_close(out[kept], full[kept] / full[kept].sum())
    # the kept tokens are the n most likely ones, and n is the smallest count reaching p
    top = full.sort(descending=True).values
    if n < len(full):
        assert float(full[kept].min()) >= float(full[~kept].max())
    mass = top.cumsum(0)
    tolerance = 1e-6
    assert float(mass[n - 1]) >= p - tolerance
    if n > 1:
        assert float(mass[n - 2]) < p + tolerance


def test_streaming_gives_each_token_as_it_comes():
    model = _lm("rope", kv=2)
    pieces: list[tuple[int, str]] = []
    texts = generate(
        model, ["the time", "us"], vocab=VOCAB, max_new_tokens=6,
        stream=lambda row, piece: pieces.append((row, piece)),
    )  # fmt: skip
    assert [row for row, _ in pieces] == [0, 1] * 6  # one step at a time, every row
    for row, prompt in enumerate(["the time", "us"]):
        assert texts[row] == prompt + "".join(p for r, p in pieces if r == row)
    ids: list[tuple[int, int]] = []
    new = generate_ids(model, [[1, 2]], max_new_tokens=4, stream=lambda r, t: ids.append(t))
    assert ids == new[0]


def test_word_models_and_any_tokenizer():
    words = Vocab(
        ["the", "time", "traveller", "was", "expounding", "a", "recondite", "matter", "to", "us"]
    )
    torch.manual_seed(0)
    model = build_lm("gru", len(words), 8)
    out = generate(model, "the  time", vocab=words, token="word", max_new_tokens=3)
    tokens = out.split(" ")
    assert tokens[:2] == ["the", "time"] and len(tokens) == 5

    class Bytes:  # a tokenizer of its own: UTF-8 bytes mod the vocabulary
        def encode(self, text):
            return [b % V for b in text.encode()]

        def decode(self, ids):
            return "".join(chr(97 + i) for i in ids)

    lm = _lm("none")
    got = generate(lm, "hi", tokenizer=Bytes(), max_new_tokens=4)
    assert got.startswith(Bytes().decode(Bytes().encode("hi"))) and len(got) == 6


@pytest.mark.parametrize("positions", ["rope", "alibi", "none"])
def test_a_long_prompt_is_cut_and_said_so_where_positions_extrapolate(positions):
    model = _lm(positions, context=8)
    long = VOCAB[list("the time traveller")]  # 18 tokens
    with pytest.warns(PromptCutWarning, match="cut to its last 8 tokens"):
        got = generate_ids(model, [long], max_new_tokens=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert got == generate_ids(model, [long[-8:]], max_new_tokens=5)


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_a_long_prompt_is_an_error_where_positions_stop(positions):
    model = _lm(positions, context=8)
    with pytest.raises(ValueError, match=r"a prompt of 18 tokens is longer than the model's "
                                         r"context_length 8 .*shorten the prompt"):  # fmt: skip
        generate(model, "the time traveller", vocab=VOCAB, max_new_tokens=5)
    fits = VOCAB[list("the time")]  # 8 tokens, then 12 more past the context: a window
    assert len(generate_ids(model, fits, max_new_tokens=12)[0]) == 12


def test_training_mode_is_restored_and_nothing_is_learned():
    model = _lm("rope").float().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    generate(model, "the", vocab=VOCAB, max_new_tokens=3, temperature=0.7, seed=0)
    assert model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert generate_ids(model, [[1]], max_new_tokens=0) == [[]]
