"""The explorer in a Chinese browser: headless Chromium with the zh-CN locale (its
``Accept-Language`` and ``navigator.language``) gets the page in Chinese, draws its maps with
Chinese titles and tooltips, and the language switch brings English back. Skips as
``test_serve_browser.py`` does, without Chromium or Playwright."""

from __future__ import annotations

import os
import re

import pytest
from tests.serve.test_serve_browser import CHROMIUM_ARGS, SENTENCE, find_chromium


@pytest.fixture(scope="module")
def zh_page(live_server):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")
    executable = find_chromium()
    required = os.environ.get("ATTNKIT_REQUIRE_BROWSER") == "1"
    if executable is None:
        if required:
            pytest.fail("ATTNKIT_REQUIRE_BROWSER=1 but no Chromium was found (/usr/bin/chromium)")
        pytest.skip("no Chromium found (/usr/bin/chromium); see tests/serve/test_serve_browser.py")
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS,
                                        timeout=30_000)  # fmt: skip
        except Exception as e:  # e.g. Ubuntu's snap stub in place of a real chromium
            if required:
                raise
            pytest.skip(f"{executable} is not a Chromium that starts headless here: {e}")
        context = browser.new_context(locale="zh-CN", viewport={"width": 1280, "height": 760})
        yield context.new_page()
        browser.close()


def test_the_explorer_in_a_zh_cn_browser_speaks_chinese(zh_page, live_server, tmp_path):
    page = zh_page
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(live_server) else outside.append(r.url))
    page.goto(live_server + "/", wait_until="domcontentloaded")
    page.wait_for_selector("#beam option:nth-child(2)", state="attached")
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    assert (
        page.title() == "attnkit注意力浏览器" and page.text_content("h1") == "attnkit注意力浏览器"
    )
    assert page.locator("nav button:visible").all_text_contents() == [
        "翻译",
        "Nadaraya-Watson核回归",
    ]
    assert page.text_content("label[for=text]") == "英语句子"
    assert page.text_content("#translate-button") == "翻译"
    assert page.locator("#beam option").all_text_contents()[:2] == ["贪心搜索", "束宽2"]
    assert re.fullmatch(r"transformer（.*）· 词表：英语\d+个、法语\d+个词 · 最多\d+个词",
                        page.text_content("#model-info"))  # fmt: skip
    assert page.input_value("#lang") == "zh"

    page.fill("#text", SENTENCE)
    page.click("#translate-button")
    page.wait_for_selector("body[data-state=done] svg.heatmap[data-kind=cross]", timeout=20_000)
    assert page.locator("#heatmaps figcaption").all_text_contents() == [
        "编码器自注意力 · 第1层，各头的平均", "解码器自注意力 · 第1层，各头的平均",
        "编码器-解码器注意力 · 第1层，各头的平均"]  # fmt: skip
    assert page.text_content("#timing").startswith("贪心搜索解码 · ")
    assert page.locator("#layer option").all_text_contents() == ["第1层", "第2层"]
    page.locator("svg.heatmap[data-kind=cross] rect.cell[data-row='0'][data-col='1']").hover()
    assert re.fullmatch(r"目标“.+” → 源“.+”：0\.\d{3}", page.text_content("#tooltip"))
    shown = page.inner_text("body")
    for english in ("English sentence", "decoding", "greedy", "attention of", "layer", "head"):
        assert not re.search(rf"\b{english}\b", shown), english  # (num_layers=2 is config)
    page.screenshot(path=str(tmp_path / "explorer-zh.png"), full_page=True)

    # the Nadaraya-Watson tab: its legend
    page.click("#tab-nw")
    page.wait_for_selector("#nw-plot svg path.fit")
    assert {"真实值", "预测", "训练数据"} <= set(page.locator("#nw-plot text").all_text_contents())

    # the switch: the page again in English (?lang=en), its API calls in English too; the
    # address bar held the sentence and the pickers (app.js updateLink): translated again
    with page.expect_navigation():
        page.select_option("#lang", "en")
    page.wait_for_selector("body[data-state=done] svg.heatmap[data-kind=cross]", timeout=20_000)
    assert "lang=en" in page.url.split("?")[1].split("&")
    assert page.evaluate("document.documentElement.lang") == "en"
    assert page.input_value("#text") == SENTENCE
    assert page.text_content("#link-picked") == "opened from the link: layer 1, mean of heads"
    assert page.text_content("h1") == "attnkit attention explorer"
    assert page.text_content("#model-info").startswith("transformer (")
    page.fill("#text", "I love you")
    page.click("#translate-button")
    page.wait_for_selector("#error:not([hidden])")
    assert "love" in page.text_content("#error") and not re.search(
        "[\u4e00-\u9fff]", page.text_content("#error")
    )
    assert not errors and not outside, (errors, outside)
