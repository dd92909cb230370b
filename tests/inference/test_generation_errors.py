"""Generation refuses bad input with errors that name the argument, what came and what was
expected: empty prompts, unknown characters, temperature, top-k, top-p, seeds, the call."""

from __future__ import annotations

import pytest
import torch

from attnkit.data.text import Vocab
from attnkit.inference.generation import generate, generate_ids
from attnkit.inference.sampling import next_token_probs
from attnkit.models.decoder_lm import DecoderLMConfig
from attnkit.models.rnn import build_lm

VOCAB = Vocab(list("the time traveller"))


@pytest.fixture(params=["transformer", "rnn"])
def model(request):
    torch.manual_seed(0)
    if request.param == "rnn":
        return build_lm("gru", len(VOCAB), 8)
    return DecoderLMConfig(d_model=8, num_heads=2, num_layers=1, ffn_hidden=8).build(len(VOCAB))


BAD = [
    ({"prompts": ""}, ValueError, "prompt must contain at least one char token, got ''"),
    ({"prompts": ["the", ""]}, ValueError, r"prompts\[1\] must contain at least one char token"),
    ({"prompts": []}, TypeError, "prompts must be a str or a non-empty list of str"),
    ({"prompts": 3}, TypeError, "prompts must be a str or a non-empty list of str, got 3"),
    ({"prompts": "The time!"}, ValueError,
     r"prompt 'The time!' has tokens outside the vocabulary: \['!', 'T'\]; expected tokens"),
    ({"temperature": -0.5}, ValueError, r"temperature must be >= 0 \(0 = greedy\), got -0.5"),
    ({"temperature": float("nan")}, ValueError, "temperature must be >= 0"),
    ({"temperature": "hot"}, TypeError, r"temperature must be >= 0 \(0 = greedy\), got 'hot'"),
    ({"top_p": 0.0}, ValueError, r"top_p must be a number in \(0, 1\] \(the nucleus.*got 0.0"),
    ({"top_p": 1.5}, ValueError, r"top_p must be a number in \(0, 1\].*got 1.5"),
    ({"top_k": 0}, ValueError, "top_k must be a positive int, got 0"),
    ({"top_k": True}, TypeError, r"top_k must be a positive int, got True \(bool\)"),
    ({"max_new_tokens": -1}, ValueError, "max_new_tokens must be a non-negative int, got -1"),
    ({"seed": -3}, ValueError, "seed must be a non-negative int, got -3"),
    ({"seed": 1, "generator": torch.Generator()}, ValueError, "give seed or generator, not both"),
    ({"generator": 5}, TypeError, "generator must be a torch.Generator, got int"),
    ({"stream": "print"}, TypeError, "stream must be callable or None, got str"),
    ({"vocab": None}, TypeError, r"generate needs the vocab=\.\.\. of the model's data"),
    ({"token": "piece"}, ValueError, "token must be one of 'char', 'word', got 'piece'"),
    ({"unknown": "skip"}, ValueError, "unknown must be one of 'error', 'unk', got 'skip'"),
    ({"beam": 4}, TypeError, "unexpected keyword argument 'beam'"),
]  # fmt: skip


@pytest.mark.parametrize("change,error,message", BAD)
def test_bad_arguments_are_clear_errors(model, change, error, message):
    kwargs = {"prompts": "the", "vocab": VOCAB, "max_new_tokens": 3, **change}
    prompts = kwargs.pop("prompts")
    with pytest.raises(error, match=message):
        generate(model, prompts, **kwargs)


def test_unknown_tokens_may_map_to_unk(model):
    out = generate(model, "The", vocab=VOCAB, max_new_tokens=2, unknown="unk")
    assert out.startswith("The") and len(out.replace("<unk>", "?")) == 5


def test_id_prompts_and_the_call_itself(model):
    with pytest.raises(ValueError, match=r"prompts\[1\] is empty: a prompt needs at least one"):
        generate_ids(model, [[1, 2], []], max_new_tokens=2)
    with pytest.raises(TypeError, match="prompts must be integer ids"):
        generate_ids(model, torch.zeros(2, 3), max_new_tokens=2)
    with pytest.raises(ValueError, match=r"prompts\[0\] token must be a non-negative int, got -1"):
        generate_ids(model, [-1, 2], max_new_tokens=2)
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 positional"):
        generate(model, "the", 5, vocab=VOCAB)
    with pytest.raises(TypeError, match="takes 2 positional arguments but 4 were given"):
        generate(model, VOCAB, "the", 5)  # the book's order is predict_ch8's, not generate's
    with pytest.raises(TypeError, match=r"model must be a DecoderLM .* or a recurrent LM"):
        generate_ids(torch.nn.Linear(2, 2), [[1]], max_new_tokens=1)
    assert generate_ids(model, torch.tensor([1, 2]), max_new_tokens=1)[0][0] >= 0  # one (P,)


def test_next_token_probs_checks_its_arguments():
    logits = torch.zeros(4)
    with pytest.raises(ValueError, match="temperature must be a finite number > 0, got 0"):
        next_token_probs(logits, 0)
    with pytest.raises(ValueError, match=r"top_p must be a number in \(0, 1\]"):
        next_token_probs(logits, top_p=-0.1)
    with pytest.raises(ValueError, match="top_k must be a positive int, got 0"):
        next_token_probs(logits, top_k=0)
    torch.testing.assert_close(next_token_probs(logits, top_k=9), torch.full((4,), 0.25))
