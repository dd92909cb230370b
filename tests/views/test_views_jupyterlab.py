"""The views in a real JupyterLab, opened in headless Chromium, offline.

A notebook someone sent, or one reopened from disk, is untrusted: JupyterLab (and Notebook 7,
built on the same renderers) sanitizes its HTML outputs, dropping scripts, ``<style>``,
inline ``<svg>`` (keeping its text) and empty ``hidden`` attributes, and keeping ``<img>``
with its ``src``. The test writes two notebooks whose cell output is a view's mime bundle, as
a kernel stores it: one unsigned (untrusted) and one signed with the server's notary key
(trusted), starts JupyterLab on 127.0.0.1 (a free port, no token, no browser, in a tmp
folder, the dark theme, no news fetched) and opens each, aborting and recording every
request that does not go to that server:

- untrusted: no script ran and no inline SVG is left, no token text shows, and the static
  picture is an image of the weights: the ``<img>`` is decoded at its size, and at the
  centre of each cell its screenshot has the colour of that cell's weight;
- trusted: the interactive view mounts and replaces the picture, follows the dark theme
  (JupyterLab's ``--jp-layout-color0`` and ``--jp-ui-font-color1``), and a long token is
  cut with "…", its full text in the hover title.

Skips, saying why, without jupyterlab (``pip install jupyterlab``), Playwright or Chromium.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from tests.views.test_views import picture_in
from tests.views.test_views_browser import browser  # noqa: F401  (the fixture)

from attnkit.views import show_attention

pytestmark = pytest.mark.slow
LONG = "a_token_far_longer_than_twenty_characters"
TOKENS = ["the", "$5", "a_b", "x^2", LONG]  # "$" and "_" are no TeX here


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_notebook(path: Path, bundle: dict, sign_with: Path | None = None) -> None:
    import nbformat
    from nbformat.sign import NotebookNotary

    output = nbformat.v4.new_output("execute_result", data=bundle, execution_count=1)
    cell = nbformat.v4.new_code_cell("attnkit.show_attention(w, tokens)", outputs=[output],
                                     execution_count=1)  # fmt: skip
    nb = nbformat.v4.new_notebook(cells=[cell])
    if sign_with is not None:  # trusted: signed with the key of the server's data folder
        NotebookNotary(data_dir=str(sign_with)).sign(nb)
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 serving a tmp folder: (base URL, folder, data dir)."""
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed (pip install jupyterlab)")
    pytest.importorskip("nbformat", reason="nbformat is not installed (pip install -e '.[dev]')")
    root = tmp_path_factory.mktemp("lab")
    dirs = {name: root / name for name in ("config", "data", "runtime", "settings", "work")}
    for d in dirs.values():
        d.mkdir()
    # no language server, no terminals: less to start; the dark theme; no news fetched
    (dirs["config"] / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {
        "jpserver_extensions": {"jupyter_lsp": False, "jupyter_server_terminals": False}}}))  # fmt: skip
    apputils = dirs["settings"] / "@jupyterlab" / "apputils-extension"
    apputils.mkdir(parents=True)
    (apputils / "themes.jupyterlab-settings").write_text(json.dumps({"theme": "JupyterLab Dark"}))
    (apputils / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(dirs["config"]),
               JUPYTER_DATA_DIR=str(dirs["data"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
               JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
               JUPYTERLAB_WORKSPACES_DIR=str(root / "workspaces"))  # fmt: skip
    port = free_port()
    log = open(root / "server.log", "w")  # noqa: SIM115 (closed in the finally)
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         "--IdentityProvider.token=", "--ServerApp.password=", "--allow-root",
         f"--ServerApp.root_dir={dirs['work']}", "--LabApp.extension_manager=readonly",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    tail = (root / "server.log").read_text()[-2000:]
                    pytest.fail(f"JupyterLab did not start (exit {server.poll()}):\n{tail}")
                time.sleep(0.2)
        yield url, dirs["work"], dirs["data"]
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
        log.close()


def open_notebook(browser, url: str, name: str, outside: list[str]):  # noqa: F811
    """A page with ``name`` open in JupyterLab, its output drawn; every request that does
    not go to the server aborted and recorded in ``outside``."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})

    def route(r):
        if r.request.url.startswith((url, "data:", "blob:")):
            return r.continue_()
        outside.append(r.request.url)
        return r.abort()

    ctx.route("**/*", route)
    page = ctx.new_page()
    page.goto(f"{url}/lab/tree/{name}?reset")  # ?reset: no notebook of an earlier test restored
    # the notebook names no kernel: JupyterLab asks which; no kernel is needed to show outputs
    no_kernel = page.locator(".jp-Dialog").get_by_role("button", name="No Kernel", exact=True)
    no_kernel.wait_for(timeout=60_000)
    no_kernel.click()
    page.wait_for_selector(".jp-OutputArea-output .attnkit-view", timeout=30_000)
    return page


def weights_view():
    g = torch.Generator().manual_seed(0)
    w = torch.softmax(torch.randn(2, 2, 5, 5, generator=g) * 2, -1)
    return show_attention(w, TOKENS, title="costs $5 and $6: a_b, x^2")


def test_an_untrusted_notebook_shows_the_picture_of_the_weights(browser, lab):  # noqa: F811
    from PIL import Image

    url, work, _ = lab
    view = weights_view()
    bundle = view._repr_mimebundle_()
    write_notebook(work / "untrusted.ipynb", bundle)
    outside: list[str] = []
    page = open_notebook(browser, url, "untrusted.ipynb", outside)
    out = page.locator(".jp-OutputArea-output").filter(has=page.locator(".attnkit-view"))
    # sanitized: no script kept or run, no inline SVG left, and no token shown as text
    assert out.locator("script").count() == 0 and out.locator("svg").count() == 0
    assert out.locator(".attnkit-view").get_attribute("data-state") is None
    assert out.locator(".attnkit-live").is_hidden()
    assert out.inner_text().strip() == "", out.inner_text()
    # the picture: an <img> decoded at the SVG's own size
    img = out.locator("img.attnkit-picture")
    img.wait_for(state="visible")
    page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=img.element_handle())
    svg = picture_in(bundle["text/html"])
    assert svg == view.to_svg()
    root = ET.fromstring(svg)
    natural = img.evaluate("i => [i.naturalWidth, i.naturalHeight]")
    assert natural == [int(root.get("width")), int(root.get("height"))]
    box = img.bounding_box()
    scale = box["width"] / natural[0]
    assert scale > 0.5, box
    # ... an image of the weights: the centre of each cell has that cell's colour (the
    # colours of 25 weights, not a line of text)
    shot = Image.open(io.BytesIO(img.screenshot())).convert("RGB")
    shot.save(work / "untrusted-picture.png")
    cells = root.findall(".//{*}rect[@class='cell']")
    seen = set()
    for c in cells:
        x = (float(c.get("x")) + float(c.get("width")) / 2) * scale
        y = (float(c.get("y")) + float(c.get("height")) / 2) * scale
        want = [int(v) for v in c.get("fill")[4:-1].split(",")]
        got = shot.getpixel((int(x), int(y)))
        assert max(abs(a - b) for a, b in zip(got, want)) <= 8, (c.attrib, got)
        seen.add(got)
    assert len(cells) == 25 and len(seen) >= 15
    page.screenshot(path=str(work / "untrusted.png"))
    assert not outside, outside
    page.context.close()


def test_a_trusted_notebook_runs_the_view_in_the_dark_theme(browser, lab):  # noqa: F811
    url, work, data = lab
    write_notebook(work / "trusted.ipynb", weights_view()._repr_mimebundle_(), sign_with=data)
    outside: list[str] = []
    page = open_notebook(browser, url, "trusted.ipynb", outside)
    view = page.locator(".jp-OutputArea-output .attnkit-view")
    page.wait_for_selector(".attnkit-view[data-state=ready]", timeout=30_000)
    assert (
        view.locator(".attnkit-fallback").is_hidden() and view.locator(".attnkit-live").is_visible()
    )
    # the theme's colours, read as JupyterLab's own elements resolve them
    colours = view.evaluate("""v => {
      const probe = document.createElement('div');
      probe.style.background = 'var(--jp-layout-color0)';
      probe.style.color = 'var(--jp-ui-font-color1)';
      document.body.appendChild(probe);
      const want = getComputedStyle(probe), got = getComputedStyle(v);
      const text = getComputedStyle(v.querySelector('.q-token'));
      const out = [got.backgroundColor, want.backgroundColor, got.color, want.color, text.fill];
      probe.remove();
      return out;
    }""")
    background, theme_background, ink, theme_ink, token_fill = colours
    assert background == theme_background and ink == theme_ink and token_fill == theme_ink
    assert sum(int(v) for v in background[4:-1].split(",")[:3]) < 200  # dark: JupyterLab Dark
    # a long token: cut with "…", the whole of it on hover
    long = view.locator(f".q-token[data-token='{LONG}']")
    assert long.evaluate("t => t.firstChild.data") == LONG[:19] + "…"
    assert long.locator("title").text_content() == LONG
    page.screenshot(path=str(work / "trusted.png"))
    assert not outside, outside
    page.context.close()
