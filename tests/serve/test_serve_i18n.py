"""The explorer speaks its reader's language: the page and the API's errors follow
``Accept-Language``, ``?lang=`` (the page's switch) wins over it, every word comes from the
catalog (the scripts' from a table the page embeds, never a second copy in JavaScript), and
English stays exactly as it was."""

from __future__ import annotations

import html
import json
import re
from importlib import resources

import pytest

from attnkit.i18n import use_language
from attnkit.i18n.catalog import messages
from attnkit.serve import page as page_module
from attnkit.serve.page import PAGE_MESSAGES, render_page, request_language
from attnkit.views import text as views_text

ZH = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
EN = {"Accept-Language": "en-US,en;q=0.9"}


def table_of(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="attnkit-i18n">(.*?)</script>', page)
    return json.loads(found.group(1))


def static_text(package: str, name: str) -> str:
    return (resources.files(package) / "static" / name).read_text("utf-8")


def test_the_page_follows_accept_language(client):
    zh = client.get("/", headers=ZH)
    assert zh.headers["content-language"] == "zh-CN" and "Accept-Language" in zh.headers["vary"]
    page = zh.text
    assert '<html lang="zh-CN" data-language="zh">' in page
    assert "<title data-i18n>attnkit注意力浏览器</title>" in page
    for word in ("翻译", "英语句子", "贪心搜索", "允许未知词", "核宽度", "正在加载模型信息…"):
        assert word in page, word
    assert 'placeholder="自动"' in page and 'title="相同的随机种子给出相同的样本"' in page
    assert 'placeholder="the cat is happy ."' in page  # the model's input stays English
    # the Nadaraya-Watson paragraph keeps its markup
    assert "每个测试点<i>x</i>以权重softmax" in page
    words = table_of(page)
    assert words["encoder self-attention"] == "编码器自注意力"
    assert words["layer {layer}, {head}"] == "第{layer}层，{head}"  # the drawing code's too
    assert words["{qname} “{query}” → {kname} “{key}”: {weight}"].startswith("{qname}“{query}”")
    # the same page is also /static/index.html
    assert client.get("/static/index.html", headers=ZH).text == page

    en = client.get("/", headers=EN)
    assert en.headers["content-language"] == "en"
    assert '<html lang="en" data-language="en">' in en.text and table_of(en.text) == {}
    assert "<h1 data-i18n>attnkit attention explorer</h1>" in en.text
    assert "编码器" not in en.text


def test_lang_in_the_url_wins_and_unknown_languages_fall_back(client):
    assert '<html lang="zh-CN"' in client.get("/?lang=zh", headers=EN).text
    assert '<html lang="en"' in client.get("/?lang=en", headers=ZH).text
    assert '<html lang="zh-CN"' in client.get("/?lang=xx", headers=ZH).text  # not one we speak
    assert '<html lang="en"' in client.get("/").text  # no header: English
    # Portuguese: a language attnkit speaks, the explorer not yet: its words stay English
    pt = client.get("/", headers={"Accept-Language": "pt-BR"}).text
    assert '<html lang="pt" data-language="pt">' in pt and "Translate</button>" in pt
    assert request_language(b"lang=zh_CN", None) == "zh"
    assert request_language(b"", "fr, pt;q=0.5") == "pt"


def test_the_language_switch_is_in_the_page(client):
    page = client.get("/", headers=ZH).text
    for value, name in (("en", "English"), ("zh", "中文"), ("pt", "Português")):
        assert f'<option value="{value}">{name}</option>' in page
    assert "<span data-i18n>语言</span>" in page
    app_js = client.get("/static/app.js").text
    assert 'searchParams.set("lang"' in app_js and '"Accept-Language": LANG' in app_js


def test_api_errors_are_in_the_requests_language(client, lm_app):
    from fastapi.testclient import TestClient

    body = {"text": "the cat .", "beam_size": 99}
    en = client.post("/api/translate", json=body, headers=EN).json()
    assert en["detail"] == "beam_size must be between 1 and 10, got 99"
    zh = client.post("/api/translate", json=body, headers=ZH).json()
    assert zh == {"detail": "beam_size必须在1到10之间，实际为99", "field": "beam_size"}
    assert client.post("/api/translate?lang=zh", json=body).json() == zh
    # validation errors, unparsable bodies, unknown paths
    missing = client.post("/api/translate", headers=ZH).json()["detail"]
    assert missing == "缺少请求体：请发送一个JSON对象（见/openapi.json）"
    bad = client.post(
        "/api/translate", content="{", headers={**ZH, "Content-Type": "application/json"}
    )
    assert bad.status_code == 400 and bad.json()["detail"].startswith("请求体不是有效的JSON：")
    form = client.post("/api/translate", data={"text": "x"}, headers=ZH).json()["detail"]
    assert form.startswith("请求体必须是以Content-Type: application/json发送的JSON（收到的是")
    assert client.get("/api/nothing", headers=ZH).json()["detail"] == "未找到"
    assert client.get("/api/nothing", headers=EN).json()["detail"] == "Not Found"
    inf = client.post("/api/nadaraya-watson", content='{"width": 1e999}',
                      headers={**ZH, "Content-Type": "application/json"}).json()  # fmt: skip
    assert "收到infinity：超出约1.8e308的数" in inf["detail"] and inf["field"] == "width"
    with TestClient(lm_app) as lm:
        wrong = lm.post("/api/translate", json={"text": "x"}, headers=ZH).json()["detail"]
        assert wrong == (
            "/api/translate需要翻译模型；本服务器加载的是语言模型（attnkit lm train）："
            "请使用/api/generate"
        )
        too_many = lm.post("/api/generate", json={"prompt": "the", "max_new_tokens": 999},
                           headers=ZH).json()  # fmt: skip
        assert too_many["detail"] == "max_new_tokens必须在1到30之间，实际为999"
        # a sampling option refused in Chinese still names its field
        top_k = lm.post("/api/generate", json={"prompt": "the", "temperature": 1.0, "top_k": 0},
                        headers=ZH).json()  # fmt: skip
        assert top_k["field"] == "top_k"


def test_every_word_of_the_page_and_its_scripts_is_in_the_catalog():
    """The page's and the scripts' English are exactly the catalog's messages (marked in
    Python), so nothing the reader sees can miss its translation."""
    index = static_text("attnkit.serve", "index.html")
    found = [" ".join(m.group(4).split()) for m in page_module._ELEMENT.finditer(index)]
    found = [f if "<" in f else html.unescape(f) for f in found]
    assert len(found) >= 25 and set(found) <= set(PAGE_MESSAGES), set(found) - set(PAGE_MESSAGES)
    attributes = [html.unescape(v) for _, v in page_module._ATTRIBUTE.findall(index)]
    assert {"auto", "head", "the same seed gives the same sample"} <= set(attributes)
    # every t("...") / tr("...") the scripts call is a marked message
    known = set(page_module.SCRIPT_MESSAGES) | set(views_text.SCRIPT_MESSAGES)
    calls = re.compile(r"""\btr?\(\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')""")
    scripts = {
        "app.js": static_text("attnkit.serve", "app.js"),
        **{n: static_text("attnkit.views", n) for n in ("heatmap.js", "panels.js", "views.js")},
    }
    for name, source in scripts.items():
        used = {json.loads(f'"{a}"') if a else b for a, b in calls.findall(source)}
        assert used and used <= known, (name, used - known)
    # and every one of them has its Chinese
    zh = messages("zh", known | set(PAGE_MESSAGES))
    assert [k for k, v in zh.items() if v == k] == []


def test_render_page_leaves_no_marked_english_under_chinese():
    index = static_text("attnkit.serve", "index.html")
    page = render_page(index, "zh").decode()
    left = [m.group(4) for m in page_module._ELEMENT.finditer(page)
            if re.search("[A-Za-z]{4,}", re.sub(r"<[^>]+>|softmax|Nadaraya-Watson|attnkit|width",
                                                 "", m.group(4)))]  # fmt: skip
    assert left == []
    with use_language("en"):  # English: byte for byte the file, but for lang and the table
        assert render_page(index, "en").decode() == index.replace(
            '<html lang="en">', '<html lang="en" data-language="en">'
        )


@pytest.mark.parametrize("language", ["zh", "en"])
def test_script_tables_carry_only_translations(language):
    table = views_text.script_table(page_module.SCRIPT_MESSAGES, language=language)
    assert all(k != v for k, v in table.items())
    assert (len(table) > 60) == (language == "zh")
