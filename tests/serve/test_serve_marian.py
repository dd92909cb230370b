"""The explorer over a MarianMT folder given directly (`attnkit serve --checkpoint FOLDER`):
the translation is the imported translator's greedy output, with its maps."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():  # starlette's notice about httpx versions
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from tests.convert.marian_fixtures import marian_folder

from attnkit.inference.translator import Translator
from attnkit.serve import create_app


def test_the_app_serves_a_marian_folder_as_its_translator():
    folder = marian_folder()
    sentence = "I lost my keys at the station yesterday."
    [expected] = Translator.load(folder).translate([sentence])
    with TestClient(create_app(folder)) as c:
        info = c.get("/api/info").json()
        r = c.post("/api/translate", json={"text": sentence})
    assert info["task"] == "translation" and info["tokenizer"] == "sentencepiece"
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["translation"] == expected.text
    assert len(body["cross"]) == 2  # (L, H, T, S): one map per decoder layer of the tiny model
    assert body["source"][-1] == "</s>"  # the source's eos, by Marian's id
    assert body["finished"] == expected.finished == (body["outputs"][-1] == "</s>")


def test_max_len_caps_the_served_translation_as_hf_max_new_tokens():
    """`attnkit serve --max-len N`: at most N new tokens, the end token included, equal to
    the library's ``max_len`` (which tests/convert checks against HF ``generate``)."""
    folder = marian_folder()
    sentence = "I lost my keys at the station yesterday."
    [expected] = Translator.load(folder).translate([sentence], max_len=3)
    with TestClient(create_app(folder, max_len=3)) as c:
        body = c.post("/api/translate", json={"text": sentence}).json()
    assert body["translation"] == expected.text
    assert len(body["outputs"]) <= 3
