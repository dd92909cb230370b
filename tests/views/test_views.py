"""attnkit.views without a browser: the embedded data equals the maps, the static picture
equals them, inputs are checked at the boundary, files are written valid."""

from __future__ import annotations

import base64
import json
import re
import struct
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
import torch

import attnkit
from attnkit import AttentionMaps
from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig
from attnkit.views import MAX_WEIGHTS, LMMaps, lm_maps, show_attention
from attnkit.views import view as view_module
from attnkit.views.encode import decode_panel, quantize

SVG = "{http://www.w3.org/2000/svg}"


def softmax_maps(*shape, seed=0, causal=False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(*shape, generator=g) * 2
    if causal:
        logits = logits.masked_fill(torch.ones(shape[-2:], dtype=torch.bool).triu(1), -torch.inf)
    return torch.softmax(logits, -1)


def translator_maps() -> AttentionMaps:
    source, dec_in = ["the", "cat", "sleeps", ".", "<eos>"], ["<bos>", "le", "chat", "dort", "."]
    return AttentionMaps(
        source=source, decoder_inputs=dec_in, outputs=[*dec_in[1:], "<eos>"],
        translation="le chat dort .",
        encoder_self=softmax_maps(2, 3, 5, 5, seed=1),
        decoder_self=softmax_maps(2, 3, 5, 5, seed=2, causal=True),
        cross=softmax_maps(2, 3, 5, 5, seed=3),
    )  # fmt: skip


def embedded(view) -> dict:
    html = view.to_html()
    found = re.search(r'<script type="application/json" class="attnkit-data">(.*?)</script>', html)
    return json.loads(found.group(1))


def picture_in(html: str) -> str:
    """The static picture an output carries: the SVG of its ``<img>``'s data URI."""
    found = re.search(
        r'<img class="attnkit-picture" src="data:image/svg\+xml;base64,([^"]+)"', html
    )
    assert found, "no <img> of the static picture"
    return base64.b64decode(found.group(1)).decode("utf-8")


def assert_quantized_equal(spec: dict, weights: torch.Tensor) -> None:
    """Equal within half a quantization step: scale / 510 of each map."""
    got = decode_panel(spec)
    step = weights.double().amax(dim=(2, 3), keepdim=True) / 255
    assert got.shape == weights.shape
    assert ((got - weights.double()).abs() <= step / 2 + 1e-7).all()


def test_translator_maps_are_embedded_per_kind_with_their_tokens():
    maps = translator_maps()
    view = show_attention(maps)
    spec = embedded(view)
    assert [p["key"] for p in spec["panels"]] == ["encoder_self", "decoder_self", "cross"]
    enc, dec, cross = spec["panels"]
    assert enc["queries"] == enc["keys"] == maps.source
    assert dec["queries"] == dec["keys"] == maps.decoder_inputs
    assert cross["queries"] == maps.outputs and cross["keys"] == maps.source
    for p, w in zip(spec["panels"], (maps.encoder_self, maps.decoder_self, maps.cross)):
        assert_quantized_equal(p, w)
    assert view.title == "the cat sleeps . <eos>  →  le chat dort ."
    assert (spec["view"], spec["layer"], spec["head"]) == ("head", 1, "all")


def test_quantization_is_exact_at_each_maps_largest_weight_and_zero():
    w = torch.tensor([[[[0.0, 0.25, 0.5], [1.0, 0.0, 0.0]]]])
    codes, scales = quantize(w)
    assert codes.tolist() == [[[[0, 64, 128], [255, 0, 0]]]]
    assert scales.tolist() == [[1.0]]
    codes, scales = quantize(torch.zeros(1, 2, 2, 2))  # a map of zeros: scale 1, codes 0
    assert scales.tolist() == [[1.0, 1.0]] and int(codes.sum()) == 0


def test_tensor_inputs_of_two_three_and_four_dims():
    w = softmax_maps(4, 6, seed=4)  # (Q, K): queries and keys differ
    spec = embedded(show_attention(w, list("abcdef"), ["q1", "q2", "q3", "q4"]))
    [p] = spec["panels"]
    assert (p["layers"], p["heads"], p["queries"], p["keys"]) == (
        1,
        1,
        ["q1", "q2", "q3", "q4"],
        list("abcdef"),
    )
    assert_quantized_equal(p, w[None, None])
    w3 = softmax_maps(3, 4, 4, seed=5)  # (H, Q, Q): query tokens default to the key tokens
    [p] = embedded(show_attention(w3, list("wxyz")))["panels"]
    assert p["queries"] == p["keys"] == list("wxyz") and p["heads"] == 3
    assert_quantized_equal(p, w3[None])
    [p] = embedded(show_attention(w3))["panels"]  # no tokens: positions
    assert p["keys"] == ["0", "1", "2", "3"]
    import numpy as np  # an array works as a tensor

    [p] = embedded(show_attention(w3.numpy().astype(np.float64), list("wxyz")))["panels"]
    assert_quantized_equal(p, w3[None])


def test_language_model_maps_from_a_decoder_lm_and_from_a_generation_result():
    torch.manual_seed(0)
    cfg = DecoderLMConfig(vocab_size=11, d_model=16, num_heads=2, num_layers=2, ffn_hidden=32,
                          context_length=16, dropout=0.0)  # fmt: skip
    model = DecoderLM(cfg)
    ids = [1, 4, 2, 7, 3, 9]
    maps = lm_maps(model, ids, list("abcdef"), prompt_length=2)
    assert maps.attention.shape == (2, 2, 6, 6) and maps.prompt_length == 2
    assert float(maps.attention.triu(1).abs().max()) == 0.0  # causal
    torch.testing.assert_close(maps.attention.sum(-1), torch.ones(2, 2, 6))
    [p] = embedded(show_attention(maps))["panels"]
    assert p["key"] == "lm" and p["queries"] == p["keys"] == list("abcdef")
    assert p["title"] == "causal self-attention (prompt: the first 2 tokens)"
    assert_quantized_equal(p, maps.attention)
    # the explorer's continuation: row j chose new token j, over prompt + new[:-1]
    att = maps.attention[:, :, 1:, :]  # (L, H, N=5, K=6): prompt "a", new "bcdef"
    result = SimpleNamespace(prompt_tokens=["a", "b"], new_tokens=[*"cdef", "g"],
                             attention=att.tolist())  # fmt: skip
    [p] = embedded(show_attention(result))["panels"]
    assert p["queries"] == list("cdefg") and p["keys"] == list("abcdef")
    assert_quantized_equal(p, att)
    with pytest.raises(TypeError, match="model must be a decoder-only"):
        lm_maps(torch.nn.Linear(2, 2), ids)
    with pytest.raises(ValueError, match="prompt_length must be <= len"):
        lm_maps(model, ids, prompt_length=7)


def test_static_svg_is_each_kinds_last_layer_mean_of_heads():
    maps = translator_maps()
    view = show_attention(maps)
    assert view._repr_svg_() == view.to_svg() == picture_in(view.to_html())
    root = ET.fromstring(view.to_svg())
    panels = root.findall(f"{SVG}g[@class='panel']")
    assert [g.get("data-kind") for g in panels] == ["encoder_self", "decoder_self", "cross"]
    for g, w in zip(panels, (maps.encoder_self, maps.decoder_self, maps.cross)):
        cells = g.findall(f"{SVG}rect[@class='cell']")
        got = torch.zeros(w.shape[2:])
        for c in cells:
            got[int(c.get("data-row")), int(c.get("data-col"))] = float(c.get("data-weight"))
        torch.testing.assert_close(got, w[-1].mean(0), atol=1e-6, rtol=0)
        labels = [t.text for t in g.findall(f"{SVG}text[@class='row-label']")]
        assert labels == (maps.outputs if g.get("data-kind") == "cross" else
                          maps.source if g.get("data-kind") == "encoder_self" else maps.decoder_inputs)  # fmt: skip
    one = ET.fromstring(show_attention(maps, layer=0, head=2).to_svg())
    cell = one.find(f"{SVG}g[@data-kind='cross']/{SVG}rect[@data-row='1'][@data-col='3']")
    assert float(cell.get("data-weight")) == pytest.approx(float(maps.cross[0, 2, 1, 3]), abs=1e-6)


def test_long_maps_are_drawn_as_block_means_in_the_static_picture():
    w = softmax_maps(1, 2, 130, 130, seed=6)
    g = ET.fromstring(show_attention(w).to_svg()).find(f"{SVG}g[@class='panel']")
    assert (g.get("data-rows"), g.get("data-block")) == ("44", "3")  # ceil(130 / 3)
    cell = g.find(f"{SVG}rect[@data-row='2'][@data-col='5']")
    expected = w[0].mean(0)[6:9, 15:18].mean()
    assert float(cell.get("data-weight")) == pytest.approx(float(expected), abs=1e-6)
    assert "shown as means of 3 x 3 blocks" in show_attention(w).to_svg()


def test_tokens_that_would_end_the_script_or_break_xml_are_escaped():
    toks = ["</script><b>", "a&b", "\x00", "\u200b"]
    view = show_attention(softmax_maps(4, 4, seed=7), toks)
    html = view.to_html()
    assert html.count("</script>") == 3  # the ends of the data, its words and the drawing code
    assert embedded(view)["panels"][0]["keys"] == toks
    ET.fromstring(view.to_svg())  # parses: "\x00" written as \u0000 text
    assert "\\u0000" in view.to_svg()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: show_attention(softmax_maps(2, 3, 3), list("ab")), ValueError,
         "tokens has 2 tokens but the maps have 3 keys"),
        (lambda: show_attention(softmax_maps(2, 3, 4), list("abcd")), ValueError,
         "pass query_tokens"),
        (lambda: show_attention(softmax_maps(3, 4), list("abcd"), ["x"]), ValueError,
         "query_tokens has 1 tokens but the maps have 3 queries"),
        (lambda: show_attention(softmax_maps(3, 3), ["a", 2, "c"]), TypeError,
         "tokens must be a list of strings; item 1 is int"),
        (lambda: show_attention(softmax_maps(3, 3), "abc"), TypeError,
         "tokens must be a list of strings, got str"),
        (lambda: show_attention(torch.tensor([[0.5, float("nan")], [1.0, 0.0]])), ValueError,
         "maps holds 1 non-finite weights .* query 0, key 1"),
        (lambda: show_attention(torch.zeros(2, 0, 3)), ValueError, "maps is empty"),
        (lambda: show_attention(torch.ones(5)), ValueError, "2 to 4 dims, got shape \\(5,\\)"),
        (lambda: show_attention(torch.ones(1, 1, 1, 2, 2)), ValueError, "2 to 4 dims"),
        (lambda: show_attention(-softmax_maps(2, 2)), ValueError, "negative weights"),
        (lambda: show_attention("weights"), TypeError, "maps must be a tensor"),
        (lambda: show_attention(torch.ones(2, 2, dtype=torch.bool)), TypeError, "real numbers"),
        (lambda: show_attention(softmax_maps(2, 2), view="graph"), ValueError, "view must be one of"),
        (lambda: show_attention(softmax_maps(3, 2, 2), layer=3), ValueError, "layer must be an int in"),
        (lambda: show_attention(softmax_maps(3, 2, 2), head=3), ValueError, "head must be"),
        (lambda: show_attention(softmax_maps(3, 2, 2), head="max"), ValueError, "head must be one of"),
        (lambda: show_attention(softmax_maps(2, 2), title=3), TypeError, "title must be a str"),
        (lambda: show_attention(translator_maps(), ["a"]), TypeError, "tokens and query_tokens are for tensors"),
        (lambda: show_attention(translator_maps(), kind="decoder_cross"), ValueError,
         "kind must be one of 'encoder_self', 'decoder_self', 'cross', 'encoder', 'decoder', got"),
        (lambda: show_attention(softmax_maps(2, 2), kind="encoder"), ValueError,
         "kind must be one of 'attention', got 'encoder'"),
    ],
)  # fmt: skip
def test_bad_input_is_a_clear_error_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(
    ("kind", "index"),
    [(None, 0), ("encoder", 0), ("encoder_self", 0), ("decoder", 1), ("decoder_self", 1),
     ("cross", 2)],
)  # fmt: skip
def test_kind_picks_the_panel_the_view_opens_on(kind, index):
    # the coreference topic names a head 1-based: decoder, layer 2, head 3 -> layer=1, head=2
    view = show_attention(translator_maps(), kind=kind, layer=1, head=2)
    spec = embedded(view)
    assert spec["panel"] == index and (spec["layer"], spec["head"]) == (1, 2)
    assert spec["panels"][index]["key"] == ("encoder_self", "decoder_self", "cross")[index]
    assert f"kind={spec['panels'][index]['key']!r}" in repr(view)


def test_panels_of_your_own_are_checked_and_drawn_side_by_side():
    from attnkit.views import Panel

    a = Panel("a", "first", list("xy"), list("xyz"), softmax_maps(2, 3, seed=9))
    b = Panel("b", "second", list("xyz"), list("xyz"), softmax_maps(2, 3, 3, seed=10))
    spec = embedded(show_attention([a, b]))
    assert [p["title"] for p in spec["panels"]] == ["first", "second"]
    assert_quantized_equal(spec["panels"][0], a.weights[None, None])
    assert_quantized_equal(spec["panels"][1], b.weights[None])
    bad = Panel("c", "bad", list("xy"), list("xy"), softmax_maps(2, 3))
    with pytest.raises(ValueError, match=r"maps\[1\]\.keys has 2 tokens but the maps have 3"):
        show_attention([a, bad])


def test_translator_maps_with_wrong_token_lists_or_nothing_to_draw():
    maps = translator_maps()
    maps.source = maps.source[:-1]
    with pytest.raises(ValueError, match=r"maps\.source has 4 tokens but the maps have 5"):
        show_attention(maps)
    empty = AttentionMaps(source=["a"], decoder_inputs=[], outputs=[], translation="")
    with pytest.raises(ValueError, match="maps holds no attention weights"):
        show_attention(empty)
    nan = translator_maps()
    nan.cross[1, 2, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"maps\.cross holds 1 non-finite .* layer 1, head 2"):
        show_attention(nan)
    rnn = SimpleNamespace(prompt_tokens=["a"], new_tokens=["b"], attention=None)
    with pytest.raises(ValueError, match="a recurrent model has no attention"):
        show_attention(rnn)
    with pytest.raises(ValueError, match="must be square"):
        show_attention(LMMaps(list("ab"), softmax_maps(1, 1, 3, 2)))


def test_beyond_the_limit_the_view_says_so_instead_of_embedding(monkeypatch):
    monkeypatch.setattr(view_module, "MAX_WEIGHTS", 100)
    view = show_attention(softmax_maps(2, 2, 6, 6, seed=8))  # 144 weights > 100
    html = view.to_html()
    assert "144 weights: the interactive view embeds at most 100" in html
    assert "attnkit-data" not in html and "<script" not in html  # no data, no script
    assert picture_in(html) == view.to_svg()  # the static picture still shows
    assert MAX_WEIGHTS >= 512 * 512 * 144  # the size is within the real limit
    long = show_attention(torch.full((2, 1025), 1 / 1025))
    assert "1025 tokens on one axis" in long.to_html()


def test_save_svg_png_html(tmp_path):
    view = show_attention(translator_maps())
    svg = view.save(tmp_path / "a.svg")
    assert ET.parse(svg).getroot().tag == f"{SVG}svg"
    png = view.save(tmp_path / "sub" / "a.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 300 and height > 150
    page = view.save(tmp_path / "a.html").read_text("utf-8")
    assert page.startswith("<!doctype html>") and "window.attnkitViews.mount" in page
    assert "attnkit-data" in page and "http://" not in page.replace("http://www.w3.org", "")
    assert "https://" not in page
    with pytest.raises(ValueError, match="path's suffix must be one of"):
        view.save(tmp_path / "a.pdf")
    with pytest.raises(TypeError, match="path must be a str or a path"):
        view.save(3)
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/html", "image/svg+xml", "text/plain"}
    assert bundle["text/plain"].startswith("AttentionView(encoder_self (2, 3, 5, 5)")


def test_attnkit_show_attention_is_loaded_lazily():
    # ``import attnkit`` leaves the views alone: the name resolves through _LAZY on first use
    # (tests/test_public_api.py checks that first-use names do not load at import)
    assert attnkit._LAZY["show_attention"] == "attnkit.views"
    assert "show_attention" not in vars(attnkit)
    assert attnkit.show_attention is show_attention and "show_attention" in attnkit.__all__
