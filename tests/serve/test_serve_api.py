"""The explorer's JSON API: values, validation messages, OpenAPI, static files, start-up."""

from __future__ import annotations

import json
import math
import queue
import re
import subprocess
import sys
import threading
import time
import warnings

import httpx
import pytest

with warnings.catch_warnings():  # starlette's notice about httpx versions
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from attnkit.cli import main
from attnkit.inference.decoding import translate
from attnkit.inference.loading import load_model
from attnkit.serve import CheckpointLoadError, ModelService, create_app

SENTENCES = ["the happy girl watches the cat .", "they are not beautiful .", "THE CAT IS HAPPY."]


def test_translation_equals_translate_and_maps_have_token_shapes(client, checkpoint):
    model, cfg = load_model(checkpoint)
    from attnkit.data.translation import TranslationData

    data = TranslationData.from_dict(cfg["data"])
    expected = [h.text for h in translate(model, data, SENTENCES[:2])]
    for sentence, want in zip(SENTENCES[:2], expected):
        r = client.post("/api/translate", json={"text": sentence})
        assert r.status_code == 200, r.text
        res = r.json()
        assert res["translation"] == want and res["text"] == sentence
        assert res["arch"] == "transformer" and res["beam_size"] == 1
        assert res["seconds"] > 0 and res["unknown_words"] == []
        S, T = len(res["source"]), len(res["outputs"])
        assert res["source"][-1] == "<eos>" and res["decoder_inputs"][0] == "<bos>"
        assert len(res["decoder_inputs"]) == T
        assert res["translation"].split() == [t for t in res["outputs"] if t != "<eos>"]
        shapes = {"encoder_self": (S, S), "decoder_self": (T, T), "cross": (T, S)}
        for key, (rows, cols) in shapes.items():
            maps = res[key]
            assert len(maps) == 2 and all(len(layer) == 2 for layer in maps)  # L, H
            for head in (h for layer in maps for h in layer):
                assert len(head) == rows and all(len(row) == cols for row in head)
                assert all(math.isclose(sum(row), 1.0, abs_tol=1e-4) for row in head)


def test_beam_one_equals_greedy_and_beam_k_works(client):
    for sentence in SENTENCES:
        greedy = client.post("/api/translate", json={"text": sentence}).json()
        beam1 = client.post("/api/translate", json={"text": sentence, "beam_size": 1}).json()
        assert beam1["translation"] == greedy["translation"]
        assert beam1["cross"] == greedy["cross"]
        service = client.app.state.service  # beam search itself with k = 1, not a shortcut
        [best] = service.translator.translate([sentence], beam=1)
        assert " ".join(service.data.tgt_vocab.to_tokens(best.ids)) == greedy["translation"]
    r = client.post("/api/translate", json={"text": SENTENCES[0], "beam_size": 4})
    assert r.status_code == 200 and r.json()["beam_size"] == 4
    res = r.json()
    assert len(res["cross"][0][0]) == len(res["outputs"])


def test_bahdanau_single_alignment(bahdanau_checkpoint):
    service = ModelService.from_checkpoint(bahdanau_checkpoint)
    result = service.translate("the cat is happy .", beam_size=2)
    maps = result.maps
    assert maps["encoder_self"] is None and maps["decoder_self"] is None
    assert len(maps["cross"]) == 1 and len(maps["cross"][0]) == 1
    assert len(maps["cross"][0][0]) == len(maps["outputs"])
    assert all(len(row) == len(maps["source"]) for row in maps["cross"][0][0])


def test_bahdanau_over_http(bahdanau_app):
    with TestClient(bahdanau_app) as c:
        r = c.post("/api/translate", json={"text": "the cat is happy .", "beam_size": 3})
        assert r.status_code == 200, r.text
        res = r.json()
        assert res["arch"] == "bahdanau" and res["beam_size"] == 3
        assert res["encoder_self"] is None and res["decoder_self"] is None
        (alignment,) = (head for layer in res["cross"] for head in layer)  # (1, 1, T, S)
        assert len(alignment) == len(res["outputs"])
        assert all(len(row) == len(res["source"]) for row in alignment)
        assert all(math.isclose(sum(row), 1.0, abs_tol=1e-4) for row in alignment)
        assert c.get("/api/info").json()["arch"] == "bahdanau"


def test_max_chars_is_configurable(checkpoint):
    with TestClient(create_app(checkpoint, max_chars=20)) as c:
        assert c.get("/api/info").json()["max_chars"] == 20
        assert c.post("/api/translate", json={"text": "the cat is happy ."}).status_code == 200
        r = c.post("/api/translate", json={"text": "the cat is very happy ."})
        assert (
            r.status_code == 422
            and "23 characters, more than the limit of 20" in r.json()["detail"]
        )


def test_info(client):
    info = client.get("/api/info").json()
    assert info["arch"] == "transformer" and info["max_chars"] == 200
    assert info["src_vocab_size"] > 10 and info["tgt_vocab_size"] > 10
    assert info["max_beam"] == 10 and info["max_tokens"] >= 2


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"text": ""}, "text", ["empty"]),
        ({"text": "   "}, "text", ["empty"]),
        ({"text": "a" * 201}, "text", ["201 characters", "limit of 200"]),
        ({"text": "the cat " * 20}, "text", ["40 words", "limit of"]),
        ({"text": "the zorglub cat ."}, "text", ["unknown words", "zorglub"]),
        ({"text": "the cat .", "beam_size": 0}, "beam_size", ["between 1 and 10", "got 0"]),
        ({"text": "the cat .", "beam_size": 1000}, "beam_size", ["between 1 and 10", "1000"]),
        ({"text": "the cat .", "beam_size": "2"}, "beam_size", ["valid integer"]),
        ({"text": "the cat .", "beam_size": True}, "beam_size", ["valid integer"]),
        ({"text": 5}, "text", ["valid string"]),
        ({}, "text", ["text", "required"]),
        ({"text": "the cat .", "path": "/etc/passwd"}, "path", ["not permitted"]),
    ],
)
def test_bad_requests_get_422_with_a_clear_message(client, body, field, words):
    r = client.post("/api/translate", json=body)
    assert r.status_code == 422, r.text
    res = r.json()
    assert isinstance(res["detail"], str) and res["field"] == field
    for word in words:
        assert word in res["detail"], res["detail"]


def test_unknown_words_allowed_on_request(client):
    r = client.post("/api/translate", json={"text": "the zorglub cat .", "allow_unknown": True})
    assert r.status_code == 200 and r.json()["unknown_words"] == ["zorglub"]
    assert "<unk>" in r.json()["source"]


@pytest.mark.parametrize("raw", [b"{bad", b'{"text": "a"', b"\xff\xfe"])
def test_malformed_json_is_400_and_the_server_keeps_serving(client, raw):
    r = client.post("/api/translate", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["detail"]
    assert client.post("/api/translate", json={"text": "the cat ."}).status_code == 200


@pytest.mark.parametrize(
    ("raw", "ctype", "status", "words"),
    [
        (b'{"text": "the cat ."}', "text/plain", 415, ["Content-Type: application/json"]),
        (b"text=the+cat", "application/x-www-form-urlencoded", 415, ["got application/x-www"]),
        (b'{"text": "the cat ."}', None, 415, ["got no Content-Type"]),
        (b"", "application/json", 422, ["request body is missing"]),
        (b"[1, 2]", "application/json", 422, ["a JSON object is expected"]),
        (b"null", "application/json", 422, ["a JSON object is expected"]),
    ],
)
def test_wrong_body_gets_4xx_with_a_clear_message(client, raw, ctype, status, words):
    headers = {"content-type": ctype} if ctype else {}
    r = client.post("/api/translate", content=raw, headers=headers)
    assert r.status_code == status, r.text
    for word in words:
        assert word in r.json()["detail"], r.json()["detail"]
    assert client.post("/api/translate", json={"text": "the cat ."}).status_code == 200


def test_nadaraya_watson(client):
    r = client.post("/api/nadaraya-watson", json={"width": 0.5})
    assert r.status_code == 200
    res = r.json()
    assert len(res["attention"]) == len(res["x_test"]) == len(res["y_hat"]) == 50
    assert all(len(row) == len(res["x_train"]) for row in res["attention"])
    assert all(math.isclose(sum(row), 1.0, abs_tol=1e-4) for row in res["attention"])
    assert math.isclose(res["w"], 2.0)
    wide = client.post("/api/nadaraya-watson", json={"width": 50}).json()
    assert max(wide["y_hat"]) - min(wide["y_hat"]) < max(res["y_hat"]) - min(res["y_hat"])
    for body in ({"width": 0}, {"width": -1}, {"width": 1e9}, {"width": "wide"}):
        r = client.post("/api/nadaraya-watson", json=body)
        assert r.status_code == 422 and r.json()["field"] == "width"


def test_openapi_documents_the_api(client):
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    assert "post" in paths["/api/translate"] and "get" in paths["/api/info"]
    assert "post" in paths["/api/nadaraya-watson"]
    props = schema["components"]["schemas"]["TranslateRequest"]["properties"]
    assert {"text", "beam_size", "allow_unknown"} <= set(props)
    assert "/static/{name}" not in paths
    responses = paths["/api/translate"]["post"]["responses"]
    ref = "#/components/schemas/{}"
    ok = responses["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ok == ref.format("TranslateResponse")
    for code in ("400", "415", "422"):
        err = responses[code]["content"]["application/json"]["schema"]["$ref"]
        assert err == ref.format("ErrorResponse")
    out = schema["components"]["schemas"]["TranslateResponse"]["properties"]
    want = {"translation", "seconds", "source", "outputs", "encoder_self", "decoder_self", "cross"}
    assert want <= set(out) and out["cross"]["description"]


@pytest.mark.parametrize(
    ("path", "ctype", "needle"),
    [
        ("/", "text/html", b"<!doctype html>"),
        ("/static/index.html", "text/html", b"heatmaps"),
        ("/static/app.js", "text/javascript", b"function drawMaps"),
        ("/static/heatmap.js", "text/javascript", b"ns.heatmap = function heatmap"),
        ("/static/style.css", "text/css", b"font-family"),
    ],
)
def test_static_assets(client, path, ctype, needle):
    r = client.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith(ctype)
    assert needle in r.content
    assert "default-src 'self'" in r.headers["content-security-policy"]


def test_page_loads_nothing_from_elsewhere(client):
    for path in ("/", "/static/app.js", "/static/heatmap.js", "/static/style.css"):
        text = client.get(path).text
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text and "//cdn" not in text


@pytest.mark.parametrize(
    "path",
    [
        "/static/../../etc/passwd",
        "/static/..%2f..%2fetc%2fpasswd",
        "/static/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%5c..%5cetc%5cpasswd",
        "/static//etc/passwd",
        "/static/app.py",
        "/static/",
        "/../../etc/passwd",
        "/docs",  # Swagger UI would load from a CDN: turned off
    ],
)
def test_no_path_traversal(client, path):
    r = client.get(path)
    assert r.status_code == 404
    assert b"root:" not in r.content


def test_create_app_fails_clearly(tmp_path, checkpoint):
    with pytest.raises(CheckpointLoadError, match=r"config\.json is missing"):
        create_app(tmp_path)
    with pytest.raises(CheckpointLoadError, match="not a directory"):
        create_app(tmp_path / "nope")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with pytest.raises(CheckpointLoadError, match="not valid JSON"):
        create_app(broken)
    with pytest.raises(ValueError, match="max_chars"):
        create_app(checkpoint, max_chars=0)


def test_cli_startup_failure_exit_code(tmp_path, capsys):
    assert main(["serve", "--checkpoint", str(tmp_path / "missing"), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "attnkit serve: error: cannot load checkpoint" in err and "not a directory" in err


def test_cli_subprocess_corrupt_checkpoint(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"format": "attnkit-checkpoint"}))
    proc = subprocess.run(
        [sys.executable, "-m", "attnkit", "serve", "--checkpoint", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "cannot load checkpoint" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_serves_on_localhost_with_its_flags(checkpoint):
    """``attnkit serve --port 0 --max-chars 20`` really serves, on 127.0.0.1 by default."""
    flags = ["--port", "0", "--max-chars", "20", "--max-beam", "3"]
    cmd = [sys.executable, "-m", "attnkit", "serve", "--checkpoint", str(checkpoint), *flags]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()  # stderr, drained by a thread (no blocking reads)
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    try:
        deadline, seen, match = time.monotonic() + 60, [], None
        while match is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                continue
            match = re.search(r"http://127\.0\.0\.1:(\d+)/", seen[-1])
        if match is None:
            pytest.fail(f"attnkit serve did not start: {''.join(seen)}")
        url = f"http://127.0.0.1:{match.group(1)}"
        info = httpx.get(f"{url}/api/info", timeout=30).json()
        assert info["max_chars"] == 20 and info["max_beam"] == 3
        r = httpx.post(f"{url}/api/translate", json={"text": "a" * 21}, timeout=30)
        assert r.status_code == 422 and "limit of 20" in r.json()["detail"]
        r = httpx.post(f"{url}/api/translate", json={"text": "the cat .", "beam_size": 3})
        assert r.status_code == 200, r.text
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _post_raw(client, path: str, raw: bytes):
    return client.post(path, content=raw, headers={"content-type": "application/json"})


@pytest.mark.parametrize(
    ("raw", "position"),
    [
        (b'{"text": "\\ud800"}', 1),
        (b'{"text": "he \\ud800 ."}', 4),
        (b'{"text": "he \\udc00 .", "allow_unknown": true}', 4),
        (b'{"text": "the cat \\ud83d ."}', 9),  # a high surrogate whose pair is missing
    ],
)
def test_lone_surrogate_in_text_is_422_naming_its_position(client, raw, position):
    r = _post_raw(client, "/api/translate", raw)
    assert r.status_code == 422, r.text
    res = r.json()
    assert res["field"] == "text" and "not valid Unicode" in res["detail"]
    assert f"character {position} " in res["detail"] and "lone surrogate" in res["detail"]
    r.content.decode("utf-8")  # the response itself is valid UTF-8
    assert client.post("/api/translate", json={"text": "the cat ."}).status_code == 200


def test_a_surrogate_pair_is_an_ordinary_character(client):
    r = _post_raw(client, "/api/translate", b'{"text": "the cat \\ud83d\\ude00 ."}')
    assert r.status_code == 422 and "\U0001f600" in r.json()["detail"]  # an unknown word


@pytest.mark.parametrize(
    "raw",
    [b'{"text": "a", "\\ud800": 1}', b'{"text": "a", "beam_size": "\\udc00"}'],
)
def test_lone_surrogate_elsewhere_is_4xx_never_500(client, raw):
    r = _post_raw(client, "/api/translate", raw)
    assert r.status_code == 422, r.text
    assert isinstance(r.json()["detail"], str)
    assert client.post("/api/translate", json={"text": "the cat ."}).status_code == 200


@pytest.mark.parametrize(
    ("path", "raw", "field", "words"),
    [
        ("/api/translate", b'{"text": "he is .", "beam_size": 1e309}', "beam_size", ["infinity"]),
        ("/api/translate", b'{"text": "he is .", "beam_size": -1e999}', "beam_size", ["-inf"]),
        ("/api/translate", b'{"text": "he is .", "beam_size": NaN}', "beam_size", ["NaN"]),
        ("/api/nadaraya-watson", b'{"width": 1e309}', "width", ["finite number", "infinity"]),
        ("/api/nadaraya-watson", b'{"width": -1e309}', "width", ["finite number"]),
        ("/api/nadaraya-watson", b'{"width": NaN}', "width", ["finite number", "NaN"]),
        ("/api/nadaraya-watson", b'{"width": Infinity}', "width", ["finite number"]),
        ("/api/nadaraya-watson", b'{"n_train": 1e309}', "n_train", ["infinity"]),
    ],
)
def test_non_finite_numbers_are_422_with_a_clear_message(client, path, raw, field, words):
    r = _post_raw(client, path, raw)
    assert r.status_code == 422, r.text
    res = r.json()
    assert res["field"] == field and "send a finite number" in res["detail"]
    for word in words:
        assert word in res["detail"], res["detail"]
    assert client.post("/api/nadaraya-watson", json={"width": 0.5}).status_code == 200
    assert client.post("/api/translate", json={"text": "the cat ."}).status_code == 200


@pytest.mark.parametrize(
    ("text", "shown", "named"),
    [
        ("the\u200b cat .", "the\\u200b", ["U+200B ZERO WIDTH SPACE"]),
        ("the \u200b cat .", "\\u200b", ["U+200B ZERO WIDTH SPACE"]),
        ("the cat\u00ad\u0007 .", "cat\\u00ad\\u0007", ["U+00AD SOFT HYPHEN", "U+0007"]),
        ("\ufeffthe cat .", "\\ufeffthe", ["U+FEFF ZERO WIDTH NO-BREAK SPACE"]),
    ],
)
def test_invisible_characters_are_shown_escaped(client, text, shown, named):
    r = client.post("/api/translate", json={"text": text})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert f": {shown}" in detail and "invisible or control characters" in detail, detail
    for name in named:
        assert name in detail, detail
    assert detail.isprintable()  # nothing invisible left in the message
    ok = client.post("/api/translate", json={"text": text, "allow_unknown": True})
    assert ok.status_code == 200 and ok.json()["text"] == text
    assert client.post("/api/translate", json={"text": "the cat ."}).status_code == 200


def test_visible_words_stay_as_they_are(client):
    detail = client.post("/api/translate", json={"text": "the café ."}).json()["detail"]
    assert detail.endswith(": café") and "invisible" not in detail


def test_no_response_can_fail_to_encode():
    from attnkit.serve.app import SafeJSONResponse

    body = SafeJSONResponse({"\ud800": ["a\udc00b", float("inf"), -math.inf, math.nan]}).body
    assert json.loads(body.decode("utf-8")) == {"\\ud800": ["a\\udc00b", "inf", "-inf", "nan"]}
    assert SafeJSONResponse({"x": [1.5, "é"]}).body == '{"x":[1.5,"é"]}'.encode()


def test_unparsable_numbers_and_http_errors_get_the_error_body(client):
    raw = b'{"text": "the cat .", "beam_size": 1' + b"1" * 5000 + b"}"
    r = _post_raw(client, "/api/translate", raw)
    assert r.status_code == 400 and r.json()["field"] is None
    assert "more than 4300 digits" in r.json()["detail"]
    r = client.get("/api/translate")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json() == {"detail": "Method Not Allowed", "field": None}
    assert client.post("/api/translate", json={"text": "the cat ."}).status_code == 200
