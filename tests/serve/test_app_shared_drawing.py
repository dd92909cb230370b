"""The explorer and the notebook views draw with one copy of the code: the page's
``/static/heatmap.js`` is ``attnkit/views/static/heatmap.js``, byte for byte, and the
explorer's own script defines no drawing of its own."""

from __future__ import annotations

import re
from importlib import resources

from attnkit.views import assets


def test_the_explorer_serves_the_views_drawing_code(client):
    shared = (resources.files("attnkit.views") / "static" / "heatmap.js").read_bytes()
    res = client.get("/static/heatmap.js")
    assert res.status_code == 200 and res.content == shared
    assert res.headers["content-type"].startswith("text/javascript")
    page = client.get("/").text
    assert page.index('src="/static/heatmap.js"') < page.index('src="/static/app.js"')
    app_js = client.get("/static/app.js").text
    for name in ("heatmap", "color", "el", "showTip"):  # used, never defined twice
        assert not re.search(rf"function {name}\s*\(", app_js), name
    assert "window.attnkitViews" in app_js
    # the notebook views embed the same file
    assert shared.decode() in assets.script()
    assert not (resources.files("attnkit.serve") / "static" / "heatmap.js").is_file()
