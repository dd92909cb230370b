"""What a view shows without its script, and what ``save("x.png")`` draws, without a browser.

- The output survives a sanitizer of untrusted output (the rules of JupyterLab's and
  Notebook 7's, applied here by a small parser: scripts, ``<style>`` and their text dropped,
  other tags outside the allowed list dropped with their text kept, an empty ``hidden``
  dropped): what is left shows no text and one ``<img>`` whose data URI is the SVG.
- PNG export: a ``$``, ``_`` or ``^`` in a token or a title is drawn as itself (no mathtext),
  titles and captions overlap nothing (bounding boxes measured on the drawn figure), long
  tokens are cut with "…" (in the figure, in the SVG with the full token in a <title>).
- A row of NaN (a fully masked query row) is named, with why it happens.
(The real JupyterLab run is tests/views/test_views_jupyterlab.py.)
"""

from __future__ import annotations

import base64
import itertools
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import matplotlib
import pytest
import torch
from tests.views.test_views import SVG, softmax_maps, translator_maps

from attnkit import AttentionMaps, viz
from attnkit.i18n import use_language
from attnkit.views import assets, show_attention
from attnkit.views.text import LABEL_CHARS, short

# JupyterLab's sanitizer (@jupyterlab/apputils sanitizer.ts, sanitize-html): the tags a view's
# output uses that it keeps, the attributes it keeps on them, the tags whose text goes too
KEPT = {"div", "img", "span", "button", "select", "option", "label", "figure", "figcaption"}
ATTRIBUTES = {"class", "id", "lang", "style", "title", "hidden", "src", "alt", "width", "height"}
DROPPED_WITH_TEXT = {"script", "style", "textarea", "option", "noscript"}


class Sanitized(HTMLParser):
    """The text a page would show of ``html`` once sanitized, and the images kept."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, hidden or dropped with its text)
        self.text: list[str] = []
        self.images: list[dict] = []

    def handle_starttag(self, tag, attrs):
        attrs = {k: v for k, v in attrs if k in ATTRIBUTES and (v or k == "alt")}
        gone = tag in DROPPED_WITH_TEXT or "hidden" in attrs
        if tag == "img":
            if not any(h for _, h in self.stack):
                self.images.append(attrs)
            return
        if tag in KEPT or tag in DROPPED_WITH_TEXT:
            self.stack.append((tag, gone))
        # any other tag (svg, text, rect, title...) is dropped, its text kept

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_data(self, data):
        if not any(h for _, h in self.stack):
            self.text.append(data)


def sanitized(html: str) -> Sanitized:
    parser = Sanitized()
    parser.feed(html)
    return parser


def test_what_a_sanitizer_leaves_of_an_output_is_the_picture():
    view = show_attention(translator_maps())
    html = view.to_html()
    left = sanitized(html)
    assert "".join(left.text).strip() == ""  # no token, no caption as a run of text
    [img] = left.images
    assert img["src"].startswith("data:image/svg+xml;base64,")
    assert base64.b64decode(img["src"].split(",", 1)[1]).decode() == view.to_svg()
    root = ET.fromstring(view.to_svg())
    assert (img["width"], img["height"]) == (root.get("width"), root.get("height"))
    assert img["style"] == "max-width: 100%; height: auto"  # both kept by the CSS rules
    assert img["alt"].startswith("the cat sleeps")
    # a page that runs no script and keeps no <style>: nothing hides the picture
    assert 'class="attnkit-fallback"><img' in html
    # the old way, an inline <svg>, leaves its text: what the issue saw
    assert "".join(sanitized(f"<div>{view.to_svg()}</div>").text).startswith("the cat sleeps")
    # nor does a $ in the output become TeX: the root tells MathJax 2 and 3 to leave it
    assert 'class="attnkit-view mathjax_ignore tex2jax_ignore"' in html


def test_over_the_limit_the_message_and_the_picture_survive(monkeypatch):
    from attnkit.views import view as view_module

    monkeypatch.setattr(view_module, "MAX_WEIGHTS", 10)
    left = sanitized(show_attention(softmax_maps(2, 2, 4, 4)).to_html())
    assert "64 weights: the interactive view embeds at most 10" in "".join(left.text)
    assert len(left.images) == 1


def text_boxes(fig):
    """The drawn extents of the figure's titles, captions and tick labels."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    titles = [("suptitle", fig._suptitle.get_window_extent(r))] if fig._suptitle else []
    for i, ax in enumerate(fig.axes):
        if ax.get_title():
            titles.append((f"caption {i}", ax.title.get_window_extent(r)))
    ticks = [(f"tick {i} {t.get_text()!r}", t.get_window_extent(r))
             for i, ax in enumerate(fig.axes)
             for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]  # fmt: skip
    axes = [(f"axes {i}", ax.get_window_extent(r)) for i, ax in enumerate(fig.axes)]
    return titles, ticks, axes


def assert_apart(fig):
    titles, ticks, axes = text_boxes(fig)
    for (a, box_a), (b, box_b) in itertools.combinations(titles + ticks + axes, 2):
        if a.startswith(("tick", "axes")) and b.startswith(("tick", "axes")):
            if a.split()[1] == b.split()[1]:  # an axes and its own ticks touch by design
                continue
            if a.startswith("tick") and b.startswith("tick"):
                continue  # rotated neighbours may brush; they are one panel's
        assert not box_a.overlaps(box_b), (a, b, box_a, box_b)
    figure = fig.bbox
    for name, box in titles:  # within the figure: nothing cut off
        assert box.x0 >= figure.x0 - 1 and box.x1 <= figure.x1 + 1, (name, box, figure)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_png_titles_and_captions_overlap_nothing(language, tmp_path):
    maps = translator_maps()  # three narrow panels: long captions over 5-token maps
    title = "a long title that says what the three maps are, with $5, a_b and x^2 in it"
    with use_language(language):
        view = show_attention(maps, title=title)
        fig = view.figure()
        assert_apart(fig)
        path = view.save(tmp_path / "a.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "\n" in fig.axes[0].get_title()  # the caption wrapped to its panel
    matplotlib.pyplot.close(fig)


TOKENS = ["$5", "a_b", "x^2", "$x_$", "$\\frac$", "a_token_far_longer_than_twenty_chars"]


def test_png_draws_dollars_and_underscores_as_they_are(tmp_path):
    w = softmax_maps(2, 2, 6, 6, seed=11)
    view = show_attention(w, TOKENS, title="costs $5 and $6^")
    path = view.save(tmp_path / "tokens.png")  # "$x_$" and "$\frac$" crashed mathtext
    assert path.stat().st_size > 1000
    fig = view.figure()
    fig.canvas.draw()
    ax = fig.axes[0]
    shown = [short(t) for t in TOKENS]
    assert [t.get_text() for t in ax.get_xticklabels()] == shown
    assert [t.get_text() for t in ax.get_yticklabels()] == shown
    texts = [*ax.get_xticklabels(), *ax.get_yticklabels(), ax.title, fig._suptitle]
    assert all(not t.get_parse_math() for t in texts)
    assert fig._suptitle.get_text() == "costs $5 and $6^"
    assert_apart(fig)
    matplotlib.pyplot.close(fig)


def test_long_tokens_are_cut_with_an_ellipsis_and_kept_whole_for_hover():
    long = TOKENS[-1]
    assert LABEL_CHARS == viz.LABEL_CHARS == 20
    assert short(long) == long[:19] + "…" and len(short(long)) == 20
    assert short("x" * 20) == "x" * 20 and short("词" * 25) == "词" * 19 + "…"
    assert "ns.LABEL_CHARS = 20;" in assets.read_static("heatmap.js").decode()  # the same rule
    svg = ET.fromstring(show_attention(softmax_maps(6, 6, seed=12), TOKENS).to_svg())
    labels = svg.findall(f".//{SVG}text[@class='row-label']")
    assert [t.text for t in labels] == [short(t) for t in TOKENS]
    assert labels[-1].find(f"{SVG}title").text == long  # the full token where the SVG is inline
    assert labels[0].find(f"{SVG}title") is None
    # and the data the scripts draw from keeps every token whole
    html = show_attention(softmax_maps(6, 6, seed=12), TOKENS).to_html()
    assert f'"{long}"' in html


def masked(shape=(2, 2, 4, 4), padded=2) -> torch.Tensor:
    """Attention whose last query rows are padding with every key masked by -inf."""
    scores = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    mask = torch.zeros(shape[-2:], dtype=torch.bool)
    mask[:, shape[-1] - padded :] = True
    mask[shape[-2] - padded :] = True
    return torch.softmax(scores.masked_fill(mask, -torch.inf), -1)


def test_a_nan_row_is_named_with_its_cause():
    w = masked()
    with pytest.raises(ValueError) as e:
        show_attention(w, ["a", "b", "<pad>", "<pad>"])
    message = str(e.value)
    assert message.startswith("maps: query row 2 “<pad>” at layer 0, head 0 is NaN for every "
                              "key (8 such rows).")  # fmt: skip
    assert "fully masked query row" in message and "all keys padded" in message
    assert "-1e6" in message and "-inf" in message
    # a translator's maps: the output token of the row
    maps = translator_maps()
    cross = maps.cross.clone()
    cross[1, 2, 4] = torch.nan
    bad = AttentionMaps(source=maps.source, decoder_inputs=maps.decoder_inputs,
                        outputs=maps.outputs, translation=maps.translation,
                        encoder_self=maps.encoder_self, decoder_self=maps.decoder_self,
                        cross=cross)  # fmt: skip
    with pytest.raises(ValueError, match=r"^maps\.cross: query row 4 “<eos>” at layer 1, head 2"):
        show_attention(bad)
    # NaN in part of a row: the first non-finite weight, as before
    w = softmax_maps(3, 3)
    w[1, 2] = torch.nan
    with pytest.raises(ValueError, match=r"1 non-finite weights .* query 1, key 2"):
        show_attention(w)


def test_a_nan_row_is_explained_in_chinese():
    with use_language("zh"), pytest.raises(ValueError) as e:
        show_attention(masked(), ["a", "b", "<pad>", "<pad>"])
    message = str(e.value)
    assert message.startswith("maps：层0、头0的查询行2“<pad>”对每个键都是NaN（共8行如此）。")
    assert "掩蔽" in message and "-1e6" in message
