"""The explorer over GPT-2: a GPT-2 folder (or its imported checkpoint) served, its
continuation HF's greedy text, each new token's attention row the weights of the cached
step that chose it, the tokens labelled with their own text."""

from __future__ import annotations

import warnings

import pytest
import torch

with warnings.catch_warnings():  # starlette's notice about httpx versions
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from tests.convert.gpt2_fixtures import hf_gpt2, hf_tokenizer, tiny_gpt2

from attnkit.convert.gpt2 import import_gpt2
from attnkit.inference.generation import generate_ids
from attnkit.serve import LMService, create_app, create_app_for_service

PROMPT = "The animal didn't cross"


@pytest.fixture(scope="module")
def service():
    return LMService.from_checkpoint(tiny_gpt2(), max_new_tokens=20)


def test_a_gpt2_folder_continues_as_hf_greedy(service):
    tok, hf = hf_tokenizer(), hf_gpt2()
    ids = tok(PROMPT)["input_ids"]
    with torch.no_grad():
        out = hf.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids),
                          dtype=torch.long), do_sample=False, max_new_tokens=8, min_new_tokens=8,
                          pad_token_id=hf.config.eos_token_id)  # fmt: skip
    res = service.generate(PROMPT, 8)
    assert res.text == tok.decode(out[0]) and res.text == PROMPT + res.continuation
    assert res.prompt_tokens == [tok.decode([i]) for i in ids]  # " animal", not "Ġanimal"
    assert len(res.new_tokens) == 8
    info = service.info()
    assert info["tokenizer"] == "gpt2-bpe" and info["context_length"] == 48
    assert info["model_config"]["activation"] == "gelu-tanh"


def test_attention_rows_are_the_cached_steps_and_hfs(service):
    res = service.generate(PROMPT, 5)
    prompt = hf_tokenizer()(PROMPT)["input_ids"]
    [new] = generate_ids(service.model, [prompt], max_new_tokens=5)  # greedy: the same ids
    assert res.new_tokens == [service.tokenizer.label(i) for i in new]
    seq = torch.tensor([[*prompt, *new[:-1]]])
    with torch.no_grad():
        theirs = hf_gpt2()(seq, output_attentions=True).attentions  # L x (1, H, K, K)
    rows = torch.tensor(res.attention)  # (L, H, N, K)
    expected = torch.stack([a[0, :, len(prompt) - 1 :] for a in theirs]).double()
    assert rows.shape == expected.shape and (rows - expected).abs().max().item() < 1e-4


def test_the_app_serves_a_folder_and_an_imported_checkpoint(service, tmp_path):
    out = import_gpt2(tiny_gpt2(), tmp_path / "gpt2")
    body = {"prompt": "Hello world", "max_new_tokens": 6}
    with TestClient(create_app_for_service(service)) as c:
        direct = c.post("/api/generate", json=body).json()
    with TestClient(create_app(out)) as c:
        imported = c.post("/api/generate", json=body).json()
        assert c.get("/api/info").json()["tokenizer"] == "gpt2-bpe"
    with TestClient(create_app(tiny_gpt2())) as c:  # `attnkit serve` on the GPT-2 folder
        folder = c.post("/api/generate", json=body).json()
        assert c.get("/api/info").json()["task"] == "language-model"
    assert imported["text"] == direct["text"] and imported["attention"] == direct["attention"]
    assert folder["text"] == direct["text"] and folder["attention"] == direct["attention"]
    too_long = {"prompt": "Hello world", "max_new_tokens": 47}
    with TestClient(create_app(out, max_new_tokens=100)) as c:
        r = c.post("/api/generate", json=too_long)
    assert r.status_code == 422 and "fit the model's context of 48 tokens" in r.text
