"""End to end in a real browser: headless Chromium types a sentence and reads the heatmap.

Uses Playwright's Python package driving the system Chromium (``/usr/bin/chromium``,
installed by ``tools/ensure_browser.sh``; Playwright's own browser download is not
needed). Skips, saying why, only when no browser or no Playwright is available
(``ATTNKIT_REQUIRE_BROWSER=1`` turns a missing browser into a failure).

Regenerate the README screenshot with::

    .venv/bin/python -m pytest tests/serve/test_serve_browser.py --explorer-screenshot
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS_SCREENSHOT = REPO / "docs" / "explorer.png"
# Flags this machine's headless Chromium needs (no background connections, no sandbox).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
SENTENCE = "the happy girl watches the cat ."
SHOWCASE_SENTENCE = "a tired friend buys yellow computers ."  # --explorer-screenshot


def find_chromium() -> str | None:
    for candidate in (os.environ.get("ATTNKIT_CHROMIUM"), "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file():
            return candidate
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    return None


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")
    executable = find_chromium()
    if executable is None and os.environ.get("ATTNKIT_REQUIRE_BROWSER") == "1":
        pytest.fail("ATTNKIT_REQUIRE_BROWSER=1 but no Chromium was found (/usr/bin/chromium)")
    if executable is None:
        pytest.skip(
            "no Chromium found (/usr/bin/chromium); `bash tools/ensure_browser.sh` installs "
            "it with apt-get when run as root, or set ATTNKIT_CHROMIUM"
        )
    profile = tempfile.mkdtemp(dir=tmp_path_factory.mktemp("browser"), prefix="profile-")
    with sync_playwright() as p:
        try:
            context = p.chromium.launch_persistent_context(
                profile,
                executable_path=executable,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 760},
                timeout=30_000,
            )
        except Exception as e:  # e.g. Ubuntu's snap stub in place of a real chromium
            if os.environ.get("ATTNKIT_REQUIRE_BROWSER") == "1":
                raise
            pytest.skip(f"{executable} is not a Chromium that starts headless here: {e}")
        try:
            yield context
        finally:
            context.close()


def _translate(page, url: str, sentence: str, beam: str = "1") -> None:
    page.goto(url + "/", wait_until="domcontentloaded")
    # (no wait_for_function: its polling evaluates strings, which the page's CSP forbids)
    page.wait_for_selector("#beam option:nth-child(2)", state="attached")
    page.fill("#text", sentence)
    page.select_option("#beam", value=beam)
    page.click("#translate-button")
    page.wait_for_selector("body[data-state=done] svg.heatmap[data-kind=cross]", timeout=20_000)


def test_translate_and_heatmap_in_browser(browser_context, live_server, tmp_path, request):
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(live_server) else outside.append(r.url))
    showcase = request.config.getoption("--explorer-screenshot")
    sentence = SHOWCASE_SENTENCE if showcase else SENTENCE
    _translate(page, live_server, sentence)

    translation = page.text_content("#translation")
    expected = httpx.post(f"{live_server}/api/translate", json={"text": sentence}).json()
    assert translation == (expected["translation"] or "(empty translation)")
    assert " ms" in page.text_content("#timing")

    # encoder-decoder attention: one row per target token, one column per source token
    svg = page.locator("svg.heatmap[data-kind=cross]")
    rows, cols = len(expected["outputs"]), len(expected["source"])
    assert svg.get_attribute("data-rows") == str(rows)
    assert svg.get_attribute("data-cols") == str(cols)
    assert svg.locator("rect.cell").count() == rows * cols
    assert svg.locator("text.row-label").all_text_contents() == expected["outputs"]
    assert svg.locator("text.col-label").all_text_contents() == expected["source"]
    n_rows = page.evaluate(
        "new Set([...document.querySelectorAll("
        "'svg[data-kind=cross] rect.cell')].map(r => r.dataset.row)).size"
    )
    assert n_rows == rows
    for kind, n in (("encoder_self", cols), ("decoder_self", rows)):
        assert page.locator(f"svg.heatmap[data-kind={kind}] rect.cell").count() == n * n

    # hovering a cell shows both tokens and the weight
    svg.locator("rect.cell[data-row='0'][data-col='1']").hover()
    tip = page.locator("#tooltip")
    tip.wait_for(state="visible")
    text = tip.text_content()
    assert f"“{expected['outputs'][0]}”" in text and f"“{expected['source'][1]}”" in text
    assert any(c.isdigit() for c in text.split(":")[-1])

    # picking a head redraws the map from that head's weights
    page.select_option("#layer", value="0")
    page.select_option("#head", value="1")
    cell = page.locator("svg.heatmap[data-kind=cross] rect.cell[data-row='0'][data-col='0']")
    assert float(cell.get_attribute("data-weight")) == pytest.approx(
        expected["cross"][0][1][0][0], abs=1e-3
    )
    page.select_option("#layer", value="1")
    page.select_option("#head", value="mean")

    assert tip.is_hidden()  # redrawn: the hovered cell is gone
    # hover the strongest cross-attention cell of the second-to-last word, for the picture
    row = max(0, rows - 3)
    mean = [sum(h[row][c] for h in expected["cross"][-1]) for c in range(cols)]
    col = mean.index(max(mean))
    svg.locator(f"rect.cell[data-row='{row}'][data-col='{col}']").hover()
    tip.wait_for(state="visible")
    page.screenshot(path=str(tmp_path / "explorer.png"), full_page=True)
    assert (tmp_path / "explorer.png").stat().st_size > 10_000
    if showcase:
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(DOCS_SCREENSHOT), full_page=True)

    # a refused input shows the server's message and clears the previous result: no
    # translation or heatmap of the last sentence stays on screen under the error
    page.fill("#text", "I love you")
    page.click("#translate-button")
    page.wait_for_selector("#error:not([hidden])")
    assert "love" in page.text_content("#error")
    assert page.locator("#result").is_hidden()
    assert page.text_content("#translation") == "" and page.text_content("#timing") == ""
    assert page.locator("#heatmaps svg").count() == 0
    # and the page still works afterwards (no reload)
    page.fill("#text", SENTENCE)
    page.click("#translate-button")
    page.wait_for_selector("body[data-state=done] svg.heatmap[data-kind=cross]", timeout=20_000)
    assert (
        page.text_content("#translation")
        == (
            httpx.post(f"{live_server}/api/translate", json={"text": SENTENCE}).json()[
                "translation"
            ]
        )
    )
    assert page.locator("#error").is_hidden()
    assert not errors and not outside, (errors, outside)
    page.close()


def test_nadaraya_watson_tab_in_browser(browser_context, live_server, tmp_path):
    from playwright.sync_api import expect  # importable: browser_context did not skip

    page = browser_context.new_page()
    page.goto(live_server + "/", wait_until="domcontentloaded")
    page.click("#tab-nw")
    page.wait_for_selector("#nw-plot svg path.fit")
    matrix = page.locator("#nw-matrix svg.heatmap")
    assert matrix.get_attribute("data-rows") == "50" and matrix.get_attribute("data-cols") == "50"
    before = page.get_attribute("#nw-plot path.fit", "d")
    page.locator("#width").fill("0.8")  # a much wider kernel: a flatter curve
    expect(page.locator("#nw-plot path.fit")).not_to_have_attribute("d", before)
    assert "6.310" in page.text_content("#width-value")  # 10 ** 0.8
    page.screenshot(path=str(tmp_path / "nadaraya_watson.png"), full_page=True)
    page.close()


def test_bahdanau_alignment_in_browser(browser_context, bahdanau_server, tmp_path):
    page = browser_context.new_page()
    _translate(page, bahdanau_server, SENTENCE, beam="2")
    expected = httpx.post(
        f"{bahdanau_server}/api/translate", json={"text": SENTENCE, "beam_size": 2}
    ).json()
    assert page.text_content("#translation") == (expected["translation"] or "(empty translation)")
    # a single alignment map, no layer or head picker
    assert page.locator("svg.heatmap").count() == 1
    assert page.text_content("#heatmaps figcaption") == "alignment (Bahdanau)"
    assert page.locator("#map-controls").is_hidden()
    svg = page.locator("svg.heatmap[data-kind=cross]")
    rows, cols = len(expected["outputs"]), len(expected["source"])
    assert svg.get_attribute("data-rows") == str(rows)
    assert svg.get_attribute("data-cols") == str(cols)
    assert svg.locator("rect.cell").count() == rows * cols
    assert svg.locator("text.col-label").all_text_contents() == expected["source"]
    page.screenshot(path=str(tmp_path / "bahdanau.png"), full_page=True)
    page.close()


def test_generate_and_each_new_tokens_attention_in_browser(browser_context, lm_server, tmp_path):
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(lm_server + "/", wait_until="domcontentloaded")
    page.wait_for_selector("#tab-generate", state="visible")  # a language model: its own tab
    assert (
        page.locator("#tab-translate").is_hidden() and page.locator("#panel-translate").is_hidden()
    )
    assert "language model transformer" in page.text_content("#model-info")
    page.fill("#prompt", "the time")
    page.fill("#new-tokens", "10")
    page.click("#generate-button")
    page.wait_for_selector("body[data-state=done] svg.heatmap[data-kind=lm]", timeout=20_000)
    body = {"prompt": "the time", "max_new_tokens": 10}
    expected = httpx.post(f"{lm_server}/api/generate", json=body, timeout=30).json()
    assert page.text_content("#gen-prompt") == "the time"
    assert page.text_content("#gen-continuation") == expected["continuation"]
    assert "greedy" in page.text_content("#gen-timing")

    # the map: new tokens (rows) over the context (columns), last layer, mean of heads
    N, P = 10, len("the time")
    svg = page.locator("svg.heatmap[data-kind=lm]")
    assert svg.get_attribute("data-rows") == str(N)
    assert svg.get_attribute("data-cols") == str(P + N - 1)
    assert svg.locator("rect.cell").count() == N * (P + N - 1)
    mean = sum(head[3][2] for head in expected["attention"][-1]) / 2
    cell = svg.locator("rect.cell[data-row='3'][data-col='2']")
    assert float(cell.get_attribute("data-weight")) == pytest.approx(mean, abs=1e-3)

    # one new token's attention as shading over the context it saw (up to its chooser)
    assert page.locator("#gen-tokens button").count() == N
    assert page.locator("#gen-context span").count() == P  # token 0: chosen at the prompt's end
    page.locator("#gen-tokens button").nth(4).click()
    assert page.locator("#gen-tokens button").nth(4).get_attribute("aria-selected") == "true"
    page.select_option("#gen-layer", value="0")
    page.select_option("#gen-head", value="1")
    spans = page.locator("#gen-context span")
    assert spans.count() == P + 4 and page.locator("#gen-context span.chooser").count() == 1
    shown = [float(w) for w in spans.evaluate_all("s => s.map(x => x.dataset.weight)")]
    assert shown == pytest.approx(expected["attention"][0][1][4][: P + 4], abs=1e-3)
    page.screenshot(path=str(tmp_path / "generate.png"), full_page=True)

    # a refused prompt shows the server's message and clears the result
    page.fill("#prompt", "1984")
    page.click("#generate-button")
    page.wait_for_selector("#gen-error:not([hidden])")
    assert "letters and spaces only" in page.text_content("#gen-error")
    assert (
        page.locator("#gen-result").is_hidden() and page.locator("#gen-heatmaps svg").count() == 0
    )
    assert not errors, errors
    page.close()


def test_a_link_opens_a_sentence_with_a_head_picked(browser_context, live_server):
    # layer and head count from 1 in the link (the pickers' "layer 2" is their value "1")
    from urllib.parse import quote_plus

    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    link = f"{live_server}/?text={quote_plus(SENTENCE)}&kind=decoder&layer=2&head=2"
    page.goto(link, wait_until="domcontentloaded")
    page.wait_for_selector("body[data-state=done] figure.picked svg[data-kind=decoder_self]")
    expected = httpx.post(f"{live_server}/api/translate", json={"text": SENTENCE}).json()
    assert page.text_content("#translation") == expected["translation"]
    assert (page.input_value("#layer"), page.input_value("#head")) == ("1", "1")
    cell = page.locator("svg[data-kind=decoder_self] rect.cell[data-row='1'][data-col='0']")
    assert float(cell.get_attribute("data-weight")) == pytest.approx(
        expected["decoder_self"][1][1][1][0], abs=1e-3
    )
    assert page.locator("figure.picked").count() == 1
    note = page.text_content("#link-picked")
    assert note == "opened from the link: decoder self-attention · layer 2, head 2"
    assert page.text_content("#link-ignored") == ""
    page.select_option("#head", value="0")  # the address bar follows: a link to the view
    assert page.url.endswith("&kind=decoder&layer=2&head=1")

    # bad values are ignored, each named in the note; the sentence is still translated
    page.goto(f"{live_server}/?text={quote_plus(SENTENCE)}&kind=encoder-decoder&layer=3&head=x")
    page.wait_for_selector("body[data-state=done] #link-note:not([hidden])")
    assert page.text_content("#link-ignored") == (
        "ignored from the link: kind=encoder-decoder (encoder, decoder or cross) · "
        "ignored from the link: layer=3 (a whole number from 1 to 2) · "
        "ignored from the link: head=x (a whole number from 1 to 2, or mean)"
    )
    assert (page.input_value("#layer"), page.input_value("#head")) == ("0", "mean")  # as without
    assert page.locator("figure.picked").count() == 0 and page.locator("#error").is_hidden()
    assert not errors, errors
    page.close()
