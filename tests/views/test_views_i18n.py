"""The notebook views in the reader's language: what a view shows (titles, captions, the
scripts' words through the table each view embeds) follows ``attnkit.set_language`` /
``use_language`` / the environment when it is drawn; English stays exactly as it was."""

from __future__ import annotations

import json
import pickle
import re
import xml.etree.ElementTree as ET

import pytest
import torch
from tests.views.test_views import SVG, embedded, picture_in, softmax_maps, translator_maps

from attnkit.i18n import set_language, use_language
from attnkit.views import LMMaps, show_attention
from attnkit.views.text import Message, shown


def words_of(html: str) -> dict:
    found = re.search(r'<script type="application/json" class="attnkit-i18n">(.*?)</script>', html)
    return json.loads(found.group(1))


def captions(svg: str) -> list[str]:
    return [t.text for t in ET.fromstring(svg).iter(f"{SVG}text") if t.get("font-weight")]


def test_a_view_drawn_under_chinese_speaks_chinese():
    view = show_attention(translator_maps())  # made in English, drawn in Chinese
    with use_language("zh"):
        page = view.to_html(standalone=True)
        svg = view.to_svg()
        spec = embedded(view)
    assert page.startswith('<!doctype html>\n<html lang="zh-CN">')
    assert '<div class="attnkit-view mathjax_ignore tex2jax_ignore" id="' in page
    assert 'lang="zh-CN">' in page
    assert picture_in(page) == svg and "; 编码器自注意力 · 第2层，各头的平均; 解码器" in page
    # the static picture: each kind's last layer, mean of heads
    assert captions(svg)[1:] == [
        "编码器自注意力 · 第2层，各头的平均",
        "解码器自注意力 · 第2层，各头的平均",
        "编码器-解码器注意力 · 第2层，各头的平均",
    ]
    # the data the scripts draw: titles and axis names in Chinese, the tokens as they are
    assert [p["title"] for p in spec["panels"]] == ["编码器自注意力", "解码器自注意力",
                                                   "编码器-解码器注意力"]  # fmt: skip
    assert (spec["panels"][2]["qname"], spec["panels"][2]["kname"]) == ("目标", "源")
    assert spec["panels"][0]["keys"] == ["the", "cat", "sleeps", ".", "<eos>"]
    assert spec["quantization"].startswith("嵌入的权重每个占8位")
    assert "嵌入的权重每个占8位" in page  # the foot
    # the scripts' words: a table in the output, from the catalog
    words = words_of(page)
    assert words["head view"] == "头视图" and words["layer {n}"] == "第{n}层"
    assert words["mean of heads"] == "各头的平均"
    assert "this browser has no DecompressionStream" in " ".join(words)
    # drawn again in English: the English of before, and an empty table
    english = view.to_html()
    assert words_of(english) == {} and 'lang="en"' in english
    assert captions(view.to_svg())[1] == "encoder self-attention · layer 2, mean of heads"


def test_set_language_and_the_environment_decide_at_render_time(monkeypatch):
    view = show_attention(softmax_maps(3, 4, 4), list("abcd"))
    monkeypatch.setenv("ATTNKIT_LANG", "zh")
    assert captions(view.to_svg()) == ["注意力 · 各头的平均"]
    monkeypatch.setenv("ATTNKIT_LANG", "en")
    try:
        set_language("zh")
        assert 'lang="zh-CN"' in view.to_html()
    finally:
        set_language(None)
    assert captions(view.to_svg()) == ["attention · mean of heads"]


def test_a_title_of_the_callers_and_the_prompt_note_and_the_limits():
    view = show_attention(softmax_maps(2, 2, 4, 4), list("abcd"), title="my map")
    with use_language("zh"):
        assert captions(view.to_svg())[1] == "my map · 第2层，各头的平均"  # as given
    lm = LMMaps(list("abcde"), softmax_maps(1, 1, 5, 5, causal=True), prompt_length=2)
    [panel] = show_attention(lm).panels
    assert panel.title == "causal self-attention (prompt: the first 2 tokens)"  # English
    assert (
        isinstance(panel.title, Message) and pickle.loads(pickle.dumps(panel.title)) == panel.title
    )
    with use_language("zh"):
        assert shown(panel.title) == "因果自注意力（提示：前2个词元）"
        assert (
            embedded(show_attention(lm))["panels"][0]["title"] == "因果自注意力（提示：前2个词元）"
        )
        long = show_attention(torch.full((2, 1025), 1 / 1025)).to_html()
        assert "一条轴上有1025个词元：交互视图最多画1024个" in long


def test_errors_in_chinese_keep_their_names_and_values():
    with use_language("zh"), pytest.raises(ValueError) as caught:
        show_attention(softmax_maps(3, 4), list("abcd"), ["x"])
    assert str(caught.value) == "query_tokens有1个词元，但注意力图有3个查询（行）"
    with use_language("zh"), pytest.raises(ValueError, match="maps中有负权重（最小值"):
        show_attention(-softmax_maps(2, 2))
    with pytest.raises(ValueError, match="maps holds negative weights"):  # English unchanged
        show_attention(-softmax_maps(2, 2))
