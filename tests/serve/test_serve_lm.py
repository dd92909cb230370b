"""The explorer over a language model: /api/generate's text equals the library's, each new
token's attention row equals the weights the cached decoding computed when it chose that
token, and every refused request names its field."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

with warnings.catch_warnings():  # starlette's notice about httpx versions
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from attnkit.inference.generation import generate
from attnkit.inference.loading import load_lm_checkpoint, load_lm_tokenizer
from attnkit.serve import CheckpointLoadError, LMService, ModelService, create_app


@pytest.fixture(scope="module")
def lm_client(lm_app):
    with TestClient(lm_app) as c:
        yield c


def _cached_rows(model, prompt_ids: list[int], new_ids: list[int]) -> list[torch.Tensor]:
    """Row j: the attention (L, H, P + j) of the cached step that chose new token j."""
    cache, rows = model.new_cache(), []
    with torch.no_grad():
        step = torch.tensor([prompt_ids])
        for nxt in [*new_ids[:-1], None]:
            _, weights = model(step, cache=cache, return_attention=True)
            rows.append(torch.stack([w[0, :, -1] for w in weights]).double())  # (L, H, K_j)
            if nxt is not None:
                step = torch.tensor([[nxt]])
    return rows


def test_greedy_text_equals_generate_and_rows_are_the_cached_steps_attention(
    lm_client, lm_checkpoint
):
    model, vocab, _ = load_lm_checkpoint(lm_checkpoint)
    prompt, N = "the time", 12
    r = lm_client.post("/api/generate", json={"prompt": prompt, "max_new_tokens": N})
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["text"] == generate(model, prompt, vocab=vocab, max_new_tokens=N)
    assert res["prompt"] == prompt and res["text"] == prompt + res["continuation"]
    assert (
        res["prompt_tokens"] == list(prompt) and "".join(res["new_tokens"]) == res["continuation"]
    )
    assert res["arch"] == "transformer" and res["seconds"] > 0
    P, K = len(prompt), len(prompt) + N - 1
    att = torch.tensor(res["attention"], dtype=torch.float64)
    assert att.shape == (2, 2, N, K)  # (L, H, N, K)
    rows = _cached_rows(model, vocab[list(prompt)], vocab[res["new_tokens"]])
    for j, row in enumerate(rows):  # new token j saw the P + j positions up to its chooser
        assert row.shape[-1] == P + j
        torch.testing.assert_close(att[:, :, j, : P + j], row, atol=6e-6, rtol=0)
        assert att[:, :, j, P + j :].abs().sum() == 0  # nothing after it (causal)
    sums = att.sum(-1)
    assert (sums - 1).abs().max() < K * 5e-6  # probabilities, up to the 5 decimals sent


def test_a_seed_repeats_a_sample_as_the_library_draws_it(lm_client, lm_checkpoint):
    model, vocab, _ = load_lm_checkpoint(lm_checkpoint)
    body = {"prompt": "time", "max_new_tokens": 20, "temperature": 1.5, "top_k": 10,
            "top_p": 0.95, "seed": 7}  # fmt: skip
    first = lm_client.post("/api/generate", json=body).json()
    assert lm_client.post("/api/generate", json=body).json()["text"] == first["text"]
    library = generate(model, "time", vocab=vocab, max_new_tokens=20, temperature=1.5,
                       top_k=10, top_p=0.95, seed=7)  # fmt: skip
    assert first["text"] == library
    greedy = lm_client.post("/api/generate", json={"prompt": "time", "max_new_tokens": 20})
    assert greedy.json()["text"] != first["text"]  # a flat random model: greedy repeats itself


def test_prompts_are_normalized_and_the_default_length_fits_the_context(lm_client):
    res = lm_client.post("/api/generate", json={"prompt": "The  TIME, machine!"}).json()
    assert res["prompt"] == "the time machine"
    assert res["prompt_tokens"] == list("the time machine")
    # no max_new_tokens: 50, within the limit (30) and the context (32 - 16 prompt tokens)
    assert len(res["new_tokens"]) == 16
    res = lm_client.post("/api/generate", json={"prompt": "time"}).json()
    assert len(res["new_tokens"]) == 28  # the context's room (32 - 4), below the limit


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"prompt": ""}, "prompt", "nothing to continue"),
        ({"prompt": "1984 !!"}, "prompt", "letters and spaces only"),
        ({"prompt": "x" * 201}, "prompt", "201 characters; at most 200"),
        ({"prompt": "the", "max_new_tokens": 0}, "max_new_tokens", "between 1 and 30, got 0"),
        ({"prompt": "the", "max_new_tokens": 31}, "max_new_tokens", "between 1 and 30, got 31"),
        ({"prompt": "the time machine by", "max_new_tokens": 20}, "max_new_tokens",
         "context of 32 tokens: at most 13 new tokens"),
        ({"prompt": "the time machine by h g wells the", "max_new_tokens": 1}, "prompt",
         "shorten the prompt"),
        ({"prompt": "the", "temperature": -1}, "temperature", ">= 0"),
        ({"prompt": "the", "temperature": 1, "top_p": 0}, "top_p", "(0, 1]"),
        ({"prompt": "the", "temperature": 1, "top_p": 1.5}, "top_p", "(0, 1]"),
        ({"prompt": "the", "temperature": 1, "top_k": 0}, "top_k", "a positive int, got 0"),
        ({"prompt": "the", "seed": -1}, "seed", "greater than or equal to 0"),
        ({"prompt": "the", "max_new_tokens": "5"}, "max_new_tokens", "valid integer"),
        ({"prompt": "the", "beam_size": 2}, "beam_size", "Extra inputs"),
    ],
)  # fmt: skip
def test_refused_requests_name_their_field(lm_client, body, field, words):
    r = lm_client.post("/api/generate", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and words in r.json()["detail"], r.json()


def test_info_and_the_other_tasks_endpoint(lm_client, client, lm_checkpoint):
    info = lm_client.get("/api/info").json()
    assert info == {
        "task": "language-model", "arch": "transformer", "tokenizer": "char",
        "model_config": {"d_model": 16, "num_heads": 2, "num_layers": 2, "ffn_hidden": 32,
                         "dropout": 0.0, "context_length": 32, "positions": "rope",
                         "bias": False, "activation": "gelu", "norm_eps": 1e-5},
        "vocab_size": info["vocab_size"], "context_length": 32, "max_chars": 200,
        "max_new_tokens": 30, "device": "cpu",
    }  # fmt: skip
    assert info["vocab_size"] == len(load_lm_checkpoint(lm_checkpoint)[1]) > 10
    r = lm_client.post("/api/translate", json={"text": "the cat ."})
    assert r.status_code == 404 and "use /api/generate" in r.json()["detail"]
    assert "holds a language model" in r.json()["detail"]
    r = client.post("/api/generate", json={"prompt": "the"})
    assert r.status_code == 404 and "use /api/translate" in r.json()["detail"]
    assert client.get("/api/info").json()["task"] == "translation"
    paths = lm_client.get("/openapi.json").json()["paths"]
    assert "post" in paths["/api/generate"]


def test_a_recurrent_model_continues_without_maps(tmp_path, make_lm):
    directory = make_lm(tmp_path / "gru", arch="rnn")
    model, vocab, _ = load_lm_checkpoint(directory)
    with TestClient(create_app(directory)) as c:
        res = c.post("/api/generate", json={"prompt": "the time", "max_new_tokens": 15}).json()
        assert res["attention"] is None and res["arch"] == "rnn"
        assert res["text"] == generate(model, "the time", vocab=vocab, max_new_tokens=15)
        info = c.get("/api/info").json()
        assert "context_length" not in info  # null fields are left out of /api/info
        assert info["model_config"]["cell"] == "gru" and info["max_new_tokens"] == 200
        # no context: only the request limit bounds the new tokens
        assert (
            c.post("/api/generate", json={"prompt": "t", "max_new_tokens": 200}).status_code == 200
        )


def test_a_subword_model_labels_its_pieces_and_decodes_the_text(tmp_path, make_lm):
    from attnkit.data.lm_subword import LMSubwordTokenizer

    lines = [
        "The Time Traveller (for so it will be convenient to speak of him) was expounding",
        "a recondite matter to us. His grey eyes shone and twinkled, and his usually pale",
        "face was flushed and animated. The fire burned brightly, and the soft radiance",
    ] * 20
    tok = LMSubwordTokenizer.train(lines, vocab_size=300)
    directory = make_lm(tmp_path / "sp", tokenizer=tok)
    model, _, config = load_lm_checkpoint(directory)
    assert load_lm_tokenizer(directory, config).proto == tok.proto
    service = LMService.from_checkpoint(directory, max_new_tokens=10)
    out = service.generate("His Grey eyes", 6)
    ids = tok.encode("His Grey eyes")  # the text as it is: case kept
    assert out.prompt == "His Grey eyes" and out.prompt_tokens == tok.vocab.to_tokens(ids)
    assert out.text == generate(model, "His Grey eyes", tokenizer=tok, max_new_tokens=6)
    assert out.text.startswith("His Grey eyes") and out.text == "His Grey eyes" + out.continuation
    assert len(out.new_tokens) == 6 and len(out.attention[0][0]) == 6
    assert service.info()["tokenizer"] == "sentencepiece"


def test_loading_errors_and_a_translator_only_service(tmp_path, lm_checkpoint):
    with pytest.raises(CheckpointLoadError, match=r"cannot load checkpoint .*nowhere"):
        create_app(tmp_path / "nowhere")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"format": "nope"}))
    with pytest.raises(CheckpointLoadError, match="not an attnkit checkpoint"):
        create_app(broken)
    with pytest.raises(CheckpointLoadError) as refused:
        ModelService.from_checkpoint(lm_checkpoint)  # the translator service alone refuses it
    message = str(refused.value)
    assert "language-model checkpoint" in message and "attnkit lm train" in message
    assert "attnkit translate train" in message and "attnkit demo" in message
    with pytest.raises(TypeError, match="service must be a ModelService or an LMService"):
        from attnkit.serve import create_app_for_service

        create_app_for_service(object())
    with pytest.raises(TypeError, match=r"model must be a language model .*got Linear"):
        LMService(torch.nn.Linear(2, 2), None, {})
