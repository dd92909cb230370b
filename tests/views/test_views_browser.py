"""The notebook views in a real notebook and a real browser, offline.

A notebook is executed by nbclient (a real kernel), exported to HTML by nbconvert (the
"lab" template, its CDN script URLs emptied) and opened in headless Chromium (Playwright
driving the system browser, as tests/serve/test_serve_browser.py) with every request that
is not a local file aborted and recorded: none may be attempted. Picking a layer and a head
and hovering a token must show the weights the maps hold (read back from the page, compared
with the tensors the notebook saved); the static picture (an ``<img>`` of the SVG) must be
there, equal the maps and show with scripts off; the download buttons and ``save`` must
write valid files; a 512-token map of 12 x 12 heads must render within seconds. Skips,
saying why, only without Chromium, Playwright, nbclient or a kernel.
"""

from __future__ import annotations

import os
import re
import struct
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from tests.notebooks import HINT, execute, nbformat_module
from tests.serve.test_serve_browser import CHROMIUM_ARGS, find_chromium
from tests.views.test_views import picture_in

SETUP = """
import torch
import attnkit
from attnkit import attention_maps, build_model, load_translation_data
from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig
from attnkit.views import lm_maps

torch.manual_seed(0)
data = load_translation_data(num_pairs=300, seed=1)
sizes = {"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32, "dropout": 0.0}
model = build_model("transformer", sizes, len(data.src_vocab), len(data.tgt_vocab)).eval()
maps = attention_maps(model, data, "the cat is happy .")
lm = DecoderLM(DecoderLMConfig(vocab_size=20, d_model=16, num_heads=4, num_layers=2,
                               ffn_hidden=32, context_length=32, dropout=0.0))
ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
lm_view = lm_maps(lm, ids, [f"w{i}" for i in ids])
torch.save({"maps": maps, "lm": lm_view}, "maps.pt")
"""
CELLS = [
    SETUP,
    "view = attnkit.show_attention(maps)\nview",
    'attnkit.show_attention(lm_view, view="head", head=0)',
    'for name in ("a.svg", "a.png", "a.html"):\n    view.save(name)',
]


def step(w: torch.Tensor) -> torch.Tensor:
    """Half the quantization step of each map (L, H, 1, 1), and the page's rounding."""
    return w.amax(dim=(2, 3), keepdim=True) / 510 + 2e-6


def weights_of(locator) -> list[float]:
    return [float(x) for x in locator.evaluate_all("ns => ns.map(n => n.dataset.weight)")]


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    nbformat = nbformat_module()
    nbconvert = pytest.importorskip("nbconvert", reason=f"nbconvert {HINT}")
    work = tmp_path_factory.mktemp("notebook")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    execute(nb, work)
    exporter = nbconvert.HTMLExporter(template_name="lab", mathjax_url="", require_js_url="")
    page, _ = exporter.from_notebook_node(nb)
    page = page.replace('<script src=""></script>', "").replace('<script src=""> </script>', "")
    (work / "notebook.html").write_text(page, "utf-8")
    saved = torch.load(work / "maps.pt", weights_only=False)
    return work, nb, saved


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"the playwright package is {HINT}")
    executable = find_chromium()
    required = os.environ.get("ATTNKIT_REQUIRE_BROWSER") == "1"
    if executable is None and required:
        pytest.fail("ATTNKIT_REQUIRE_BROWSER=1 but no Chromium was found (/usr/bin/chromium)")
    if executable is None:
        pytest.skip("no Chromium found (/usr/bin/chromium); `bash tools/ensure_browser.sh` "
                    "installs it with apt-get when run as root, or set ATTNKIT_CHROMIUM")  # fmt: skip
    with sync_playwright() as p:
        try:  # launch() starts from a new, empty profile
            b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, timeout=30_000)
        except Exception as e:  # e.g. Ubuntu's snap stub in place of a real chromium
            if required:
                raise
            pytest.skip(f"{executable} is not a Chromium that starts headless here: {e}")
        yield b
        b.close()


def offline_page(browser, outside: list[str], **context):
    """A page whose every non-file request is aborted and recorded in ``outside``."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True,
                              **context)  # fmt: skip

    def route(r):
        if r.request.url.startswith("file:"):
            return r.continue_()
        outside.append(r.request.url)
        return r.abort()

    ctx.route("**/*", route)
    page = ctx.new_page()
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:"))
            else outside.append(r.url))  # fmt: skip
    return page


def test_notebook_outputs_carry_the_view_and_the_same_static_svg(notebook):
    _, nb, _ = notebook
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    views = [o for o in outputs if "text/html" in o.get("data", {})]
    assert len(views) == 2
    for o in views:
        html, svg = o["data"]["text/html"], o["data"]["image/svg+xml"]
        assert picture_in(html) == svg
        assert 'class="attnkit-data"' in html and "attnkitViews.mount" in html
        assert not re.search(r"(src|href)=\"https?:", html)


def test_notebook_views_in_an_offline_browser(notebook, browser, tmp_path):
    work, _, saved = notebook
    maps, lm = saved["maps"], saved["lm"]
    outside: list[str] = []
    page = offline_page(browser, outside)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((work / "notebook.html").as_uri())
    page.wait_for_function("document.querySelectorAll('.attnkit-view[data-state=ready]').length == 2",
                           timeout=20_000)  # fmt: skip
    tr, lmv = page.locator(".attnkit-view").nth(0), page.locator(".attnkit-view").nth(1)
    assert tr.locator(".attnkit-fallback").is_hidden() and tr.locator(".attnkit-live").is_visible()
    page.screenshot(path=str(tmp_path / "head-all.png"), full_page=True)

    # translator: cross attention, layer 1, head 2; hover the third target token
    assert tr.locator(".attnkit-panel option").all_text_contents() == [
        "encoder self-attention", "decoder self-attention", "encoder-decoder attention"]  # fmt: skip
    tr.locator(".attnkit-panel").select_option("2")
    tr.locator(".attnkit-layer").select_option("0")
    tr.locator(".attnkit-head").select_option("1")
    assert tr.locator(".q-token").all_text_contents() == maps.outputs
    tr.locator(".q-token[data-index='2']").hover()
    shown = torch.tensor(weights_of(tr.locator(".k-token")))
    expected, tol = maps.cross[0, 1, 2], step(maps.cross)[0, 1, 0]
    assert shown.shape == expected.shape and ((shown - expected).abs() <= tol).all()
    assert tr.locator(".lines line").count() >= 1
    page.screenshot(path=str(tmp_path / "head-one.png"), full_page=True)
    # all heads: lines in a colour per head, numbers the mean of heads
    tr.locator(".attnkit-head").select_option("all")
    tr.locator(".q-token[data-index='1']").hover()
    shown = torch.tensor(weights_of(tr.locator(".k-token")))
    assert ((shown - maps.cross[0, :, 1].mean(0)).abs() <= step(maps.cross)[0].max()).all()
    assert (
        len(
            set(
                tr.locator(".lines line").evaluate_all(
                    "ls => ls.map(l => l.getAttribute('stroke'))"
                )
            )
        )
        == 2
    )

    # matrix view, the explorer's heatmap: tokens on the axes, each cell its weight
    tr.locator("button[data-view=matrix]").click()
    tr.locator(".attnkit-head").select_option("1")
    cell = tr.locator("svg.heatmap rect.cell[data-row='1'][data-col='3']")
    assert float(cell.get_attribute("data-weight")) == pytest.approx(
        float(maps.cross[0, 1, 1, 3]), abs=float(step(maps.cross)[0, 1, 0, 0]) + 5e-5
    )
    assert tr.locator("svg.heatmap text.col-label").all_text_contents() == maps.source
    # model view: every layer x head; a click enlarges one in the matrix view
    tr.locator("button[data-view=model]").click()
    assert tr.locator("canvas.thumb").count() == 2 * 2
    page.screenshot(path=str(tmp_path / "model.png"), full_page=True)
    tr.locator("canvas.thumb[data-layer='1'][data-head='0']").click()
    assert (tr.get_attribute("data-view"), tr.get_attribute("data-layer"), tr.get_attribute("data-head")) == ("matrix", "1", "0")  # fmt: skip

    # download buttons: the view on screen as SVG and PNG
    with page.expect_download() as down:
        tr.locator("button.attnkit-download[data-format=svg]").click()
    svg_path = tmp_path / down.value.suggested_filename
    down.value.save_as(svg_path)
    root = ET.parse(svg_path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and svg_path.name == "attention-matrix.svg"
    assert (
        len(root.findall(".//{http://www.w3.org/2000/svg}rect[@class='cell']"))
        == maps.cross[0, 0].numel()
    )
    with page.expect_download() as down:
        tr.locator("button.attnkit-download[data-format=png]").click()
    png = Path(down.value.path()).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24])[0] > 100

    # language model: layer 2, head 1 (the cell asked for head 0 first); pin a token
    assert lmv.get_attribute("data-head") == "0"
    lmv.locator(".attnkit-layer").select_option("1")
    lmv.locator(".q-token[data-index='4']").click()
    page.mouse.move(5, 5)  # pinned: leaving the token keeps its row
    shown = torch.tensor(weights_of(lmv.locator(".k-token")))
    assert ((shown - lm.attention[1, 0, 4]).abs() <= step(lm.attention)[1, 0, 0]).all()
    assert (shown[5:] == 0).all()  # causal: nothing after the token
    page.screenshot(path=str(tmp_path / "lm.png"), full_page=True)

    # the static picture of each view is in the page (an <img> of the SVG, hidden once the
    # script runs) and equals the maps: the last layer's mean of heads
    img = tr.locator(".attnkit-fallback img.attnkit-picture")
    assert img.is_hidden()
    svg = ET.fromstring(
        picture_in(f'<img class="attnkit-picture" src="{img.get_attribute("src")}"')
    )
    got = torch.zeros(maps.cross.shape[2:])
    for c in svg.iterfind(".//{*}g[@data-kind='cross']/{*}rect[@class='cell']"):
        got[int(c.get("data-row")), int(c.get("data-col"))] = float(c.get("data-weight"))
    torch.testing.assert_close(got, maps.cross[-1].mean(0), atol=1e-6, rtol=0)
    assert not errors and not outside, (errors, outside)


def test_without_scripts_the_static_svg_shows(notebook, browser, tmp_path):
    work, _, _ = notebook
    outside: list[str] = []
    page = offline_page(browser, outside, java_script_enabled=False)
    page.goto((work / "notebook.html").as_uri())
    fallback = page.locator(".attnkit-view .attnkit-fallback img.attnkit-picture").first
    assert fallback.is_visible() and fallback.bounding_box()["width"] > 100
    assert fallback.evaluate("n => n.complete && n.naturalWidth") > 100  # decoded: a picture
    assert page.locator(".attnkit-view .attnkit-live").first.is_hidden()
    page.screenshot(path=str(tmp_path / "no-script.png"), full_page=True)
    assert not outside, outside


def test_saved_files_are_valid_and_the_html_page_runs_offline(notebook, browser):
    work, _, saved = notebook
    assert ET.parse(work / "a.svg").getroot().tag == "{http://www.w3.org/2000/svg}svg"
    png = (work / "a.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and min(struct.unpack(">II", png[16:24])) > 100
    html = (work / "a.html").read_text("utf-8")
    assert html.startswith("<!doctype html>") and "attnkitViews.mount" in html
    outside: list[str] = []
    page = offline_page(browser, outside)
    page.goto((work / "a.html").as_uri())
    page.wait_for_selector(".attnkit-view[data-state=ready]", timeout=20_000)
    # the first kind, encoder self-attention: the source tokens on both sides
    assert page.locator(".q-token").all_text_contents() == saved["maps"].source
    assert not outside, outside


def test_512_tokens_12_layers_12_heads_render_within_seconds(browser, tmp_path):
    from attnkit.views import show_attention

    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(12, 12, 512, 512, generator=g) * 3).masked_fill(
        torch.ones(512, 512, dtype=torch.bool).triu(1), -torch.inf)  # fmt: skip
    w = torch.softmax(logits, -1)
    del logits
    tokens = [f"t{i}" for i in range(512)]
    path = show_attention(w, tokens, title="512 tokens").save(tmp_path / "big.html")
    outside: list[str] = []
    page = offline_page(browser, outside)
    start = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_selector(".attnkit-view[data-state=ready]", timeout=30_000)
    seconds = time.perf_counter() - start
    assert seconds < 10, f"the 512-token view took {seconds:.1f} s to render"
    view = page.locator(".attnkit-view")
    print(
        f"512 tokens x 144 heads: ready in {seconds:.2f} s (mount {view.get_attribute('data-render-ms')} ms)"
    )
    assert "lines are too many to draw at once" in view.locator(".attnkit-note").text_content()
    view.locator(".attnkit-head").select_option("5")  # layer 12 (the default), head 6
    view.locator(".q-token[data-index='300']").hover()
    shown = torch.tensor(weights_of(view.locator(".k-token")))
    assert ((shown - w[11, 5, 300]).abs() <= step(w[11:, 5:6])[0, 0]).all()
    start = time.perf_counter()
    view.locator("button[data-view=model]").click()
    assert view.locator("canvas.thumb").count() == 144
    model_seconds = time.perf_counter() - start
    assert model_seconds < 10
    assert "downsampled from 512 x 512 to 64 x 64" in view.locator(".attnkit-note").text_content()
    page.screenshot(path=str(tmp_path / "big-model.png"))
    assert not outside, outside


# How front ends run an output's scripts: the classic Notebook (jQuery's .html()) evaluates
# them on a detached node before attaching it (no document.currentScript); JupyterLab and VS
# Code re-create each script element inside the node, which runs when it is attached.
FRONT_ENDS = """<!doctype html><html><body><div id="a"></div><div id="b"></div><script>
const frag = %s;
const one = document.createElement("div");
one.innerHTML = frag;
for (const s of one.querySelectorAll("script:not([type])")) (0, eval)(s.textContent);
document.getElementById("a").appendChild(one);
const two = document.createElement("div");
two.innerHTML = frag.replace(/attnkit-view-[0-9a-f]+/g, "attnkit-view-two");
for (const s of two.querySelectorAll("script:not([type])")) {
  const n = document.createElement("script");
  n.textContent = s.textContent;
  s.replaceWith(n);
}
document.getElementById("b").appendChild(two);
</script></body></html>"""


def test_the_view_mounts_however_a_front_end_runs_its_script(browser, tmp_path):
    import json

    from attnkit.views import show_attention

    w = torch.softmax(torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(1)), -1)
    fragment = show_attention(w, list("abcd")).to_html()
    path = tmp_path / "front_ends.html"
    path.write_text(FRONT_ENDS % json.dumps(fragment).replace("</", "<\\/"), "utf-8")
    outside: list[str] = []
    page = offline_page(browser, outside)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function(
        "document.querySelectorAll('.attnkit-view[data-state=ready]').length == 2"
    )
    for i in range(2):
        view = page.locator(".attnkit-view").nth(i)
        view.locator(".attnkit-head").select_option("2")
        view.locator(".q-token[data-index='3']").hover()
        shown = torch.tensor(weights_of(view.locator(".k-token")))
        assert ((shown - w[1, 2, 3]).abs() <= step(w)[1, 2, 0]).all()
    assert not errors and not outside, (errors, outside)


def test_a_view_drawn_in_chinese_reads_chinese_in_a_zh_cn_browser(browser, tmp_path):
    """Saved under ``use_language("zh")``, a view's every word on screen is Chinese: the
    pickers, the notes, the captions, the tooltips (the scripts read the embedded table)."""
    from tests.views.test_views import translator_maps

    from attnkit import show_attention
    from attnkit.i18n import use_language

    with use_language("zh"):
        path = show_attention(translator_maps()).save(tmp_path / "zh.html")
    outside: list[str] = []
    page = offline_page(browser, outside, locale="zh-CN")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector(".attnkit-view[data-state=ready]", timeout=20_000)
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    view = page.locator(".attnkit-view")
    assert view.locator(".attnkit-views button").all_text_contents() == [
        "头视图",
        "模型视图",
        "矩阵视图",
    ]
    assert view.locator(".attnkit-panel option").all_text_contents() == [
        "编码器自注意力", "解码器自注意力", "编码器-解码器注意力"]  # fmt: skip
    assert view.locator(".attnkit-head option").all_text_contents()[:3] == [
        "所有头（按颜色区分）", "各头的平均", "第1个头"]  # fmt: skip
    note = view.locator(".attnkit-note")
    assert (
        note.text_content()
        == "悬停或点击一个查询词元，查看它的那一行；每个头一种颜色；小于0.01的线不画"
    )
    view.locator(".q-token[data-index='1']").hover()
    assert note.text_content().startswith("查询“cat”：它对各键词元的注意力（数字：各头的平均")
    view.locator("button[data-view=matrix]").click()
    assert view.locator("figcaption").text_content() == "编码器自注意力 · 第2层，各头的平均"
    view.locator("svg.heatmap rect.cell[data-row='0'][data-col='1']").hover()
    tip = page.locator("#attnkit-tooltip")
    assert re.fullmatch(r"查询“the” → 键“cat”：0\.\d{3}", tip.text_content())
    view.locator("button[data-view=model]").click()
    assert view.locator(".model-view > span").all_text_contents()[1:3] == ["第1个头", "第2个头"]
    shown = view.inner_text()
    for english in ("head view", "mean of heads", "layer", "hover", "weights embedded", "click"):
        assert english not in shown, english
    assert "嵌入的权重每个占8位" in shown
    assert not errors and not outside, (errors, outside)
    page.context.close()


THEMED = """<!doctype html><html><head><style>:root { %s }</style></head><body>%s</body></html>"""


@pytest.mark.parametrize(
    ("variables", "background", "ink"),
    [
        ("", "rgb(255, 255, 255)", "rgb(29, 35, 48)"),  # no theme: light
        ("--jp-layout-color0: #111111; --jp-ui-font-color1: rgba(255, 255, 255, 0.87);",
         "rgb(17, 17, 17)", "rgba(255, 255, 255, 0.87)"),  # JupyterLab Dark
        ("--vscode-editor-background: #1e1e1e; --vscode-foreground: #cccccc;",
         "rgb(30, 30, 30)", "rgb(204, 204, 204)"),  # a VS Code dark theme's webview
    ],
)  # fmt: skip
def test_the_view_takes_the_pages_theme_colours(browser, tmp_path, variables, background, ink):
    """Outside JupyterLab too: the view, its SVG text and a canvas heatmap (a map larger than
    64 x 64) take the page's theme variables, and are light without them."""
    from attnkit.views import show_attention

    w = torch.softmax(torch.randn(1, 1, 70, 70, generator=torch.Generator().manual_seed(2)), -1)
    fragment = show_attention(w, [f"t{i}" for i in range(70)], view="matrix", head=0).to_html()
    path = tmp_path / "themed.html"
    path.write_text(THEMED % (variables, fragment), "utf-8")
    page = offline_page(browser, [])
    page.goto(path.as_uri())
    page.wait_for_selector(".attnkit-view[data-state=ready]", timeout=20_000)
    view = page.locator(".attnkit-view")
    got = view.evaluate("v => [getComputedStyle(v).backgroundColor, getComputedStyle(v).color]")
    assert got == [background, ink]
    # the canvas heatmap's margin is the theme's background
    corner = view.locator("canvas.heatmap-canvas").evaluate(
        "c => Array.from(c.getContext('2d').getImageData(1, 1, 1, 1).data)")  # fmt: skip
    assert corner[:3] == [int(v) for v in background[4:-1].split(",")[:3]]
    page.context.close()


def test_a_view_opened_on_a_kind_shows_that_panel_layer_and_head(browser, tmp_path):
    # what show_found_head (attnkit.tour.coreference) opens: the decoder's layer 2, head 2
    from tests.views.test_views import translator_maps

    from attnkit.views import show_attention

    maps = translator_maps()
    path = show_attention(maps, kind="decoder", layer=1, head=1).save(tmp_path / "kind.html")
    outside: list[str] = []
    page = offline_page(browser, outside)
    page.goto(path.as_uri())
    view = page.locator(".attnkit-view[data-state=ready]")
    view.wait_for(timeout=20_000)
    assert (view.get_attribute("data-panel"), view.get_attribute("data-layer"),
            view.get_attribute("data-head")) == ("decoder_self", "1", "1")  # fmt: skip
    assert page.locator(".attnkit-panel").input_value() == "1"
    assert page.locator(".q-token").all_text_contents() == maps.decoder_inputs
    page.locator(".q-token[data-index='3']").hover()
    shown = torch.tensor(weights_of(page.locator(".k-token")))
    w = maps.decoder_self
    assert ((shown - w[1, 1, 3]).abs() <= step(w)[1, 1, 0]).all()
    assert not outside, outside
