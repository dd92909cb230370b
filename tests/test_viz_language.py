"""Figures in Chinese: every glyph drawn from a CJK font (matplotlib's per-glyph fallback),
and without one a single warning saying how to install one, and English text instead of
empty boxes."""

from __future__ import annotations

import io
import warnings

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

from attnkit import viz
from attnkit.i18n import _, use_language

NO_FONT = "no CJK font is installed (apt-get install fonts-noto-cjk to run this test)"


@pytest.fixture(autouse=True)
def _restore_matplotlib():
    with matplotlib.rc_context():  # viz adds the CJK font to rcParams["font.family"]
        yield
    plt.close("all")


@pytest.fixture
def no_cjk_font(monkeypatch):
    """The font lookup made to fail, with attnkit's memory of it (and its warning) fresh."""
    monkeypatch.setattr(viz, "_find_cjk_font", lambda: None)
    monkeypatch.setattr(viz, "_font_state", {})


def _drawn(make, caught: list | None = None) -> tuple[list, list[str]]:
    """The figures ``make()`` returns, each written as PNG (Agg), and every warning raised
    meanwhile (matplotlib warns of a missing glyph once, at the first draw); the warnings
    themselves go to ``caught`` when given."""
    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        figs = make()
        for fig in figs:
            fig.savefig(io.BytesIO(), format="png")
    if caught is not None:
        caught.extend(recorded)
    return figs, [str(w.message) for w in recorded]


def _missing(messages: list[str]) -> list[str]:
    return [m for m in messages if "missing from font" in m]


def _chinese_figures():
    with viz.figure_text():
        curves = {_("epoch"): [3.0, 2.0, 1.5], "训练困惑度": [4.0, 3.0, 2.5]}
    return [
        viz.plot_curves(curves, ylabel="困惑度", title="注意力汇聚"),
        viz.show_heatmaps(
            torch.rand(1, 2, 3, 3), "键", "查询", titles=["头1", "头2"],
            xticklabels=["我", "爱", "你"], yticklabels=["i", "love", "you"],
        ),
        viz.attention_panels([("自注意力", torch.rand(2, 2), ["你", "好"], ["世", "界"])]),
    ]  # fmt: skip


def test_a_chinese_figure_draws_every_glyph():
    if viz.cjk_font() is None:
        pytest.skip(NO_FONT)
    matplotlib.rcParams["font.family"] = ["sans-serif"]
    with use_language("zh"):
        figs, messages = _drawn(_chinese_figures)  # each helper readies the font itself
    assert _missing(messages) == []
    ax = figs[0].axes[0]
    assert ax.get_xlabel() == "迭代周期"  # plot_curves' own default, in the figure's language
    assert (ax.get_ylabel(), ax.get_title()) == ("困惑度", "注意力汇聚")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["迭代周期", "训练困惑度"]
    assert viz.cjk_font() in matplotlib.rcParams["font.family"]
    assert matplotlib.rcParams["font.family"][0] == "sans-serif"  # the fallback comes after


def test_without_the_font_matplotlib_would_draw_boxes():
    """What the fallback prevents (and what makes the test above meaningful)."""
    if viz.cjk_font() is None:
        pytest.skip(NO_FONT)
    matplotlib.rcParams["font.family"] = ["sans-serif"]

    def make():
        fig, ax = plt.subplots()
        ax.set_title("注意力")
        return [fig]

    assert _missing(_drawn(make)[1])


def test_no_cjk_font_warns_once_and_draws_english(no_cjk_font):
    with use_language("zh"):
        translated = _("epoch")  # built outside figure_text: Chinese, the catalog's

        def make():
            with viz.figure_text() as language:
                inside = _("epoch")
            assert (language, inside, viz.figure_language()) == ("en", "epoch", "en")
            return [
                viz.plot_curves({translated: [1.0, 0.5]}),
                viz.plot_curves({"a": [1.0]}, xlabel=translated),
                viz.show_heatmaps(torch.rand(2, 2), translated, "q", titles=[translated]),
            ]

        caught: list = []
        figs, messages = _drawn(make, caught)
    font_warnings = [w for w in caught if issubclass(w.category, viz.FontWarning)]
    assert len(font_warnings) == 1, messages
    assert font_warnings[0].filename == __file__  # it points at the caller
    message = str(font_warnings[0].message)
    assert message.startswith("未找到能显示中文的字体")  # in the reader's language
    assert "apt-get install fonts-noto-cjk" in message
    assert "brew install --cask font-noto-sans-cjk" in message
    assert translated == "迭代周期"
    assert [t.get_text() for t in figs[0].axes[0].get_legend().get_texts()] == ["epoch"]
    assert figs[0].axes[0].get_xlabel() == "epoch"
    assert figs[1].axes[0].get_xlabel() == "epoch"
    assert (figs[2].axes[0].get_xlabel(), figs[2].axes[0].get_title()) == ("epoch", "epoch")
    assert _missing(messages) == []
    assert viz.cjk_font() is None


def test_english_figures_are_unchanged_and_never_warn(no_cjk_font):
    before = list(matplotlib.rcParams["font.family"])
    with use_language("en"):
        assert viz.figure_language() == "en"
        (fig,), messages = _drawn(
            lambda: [viz.plot_curves({"train loss": [1.0, 0.5]}, ylabel="loss", title="t")]
        )
    assert messages == []
    assert fig.axes[0].get_xlabel() == "epoch"
    assert list(matplotlib.rcParams["font.family"]) == before
    assert "font" not in viz._font_state  # English never looks for a CJK font


def test_chinese_tokens_get_the_font_in_any_language():
    if viz.cjk_font() is None:
        pytest.skip(NO_FONT)
    matplotlib.rcParams["font.family"] = ["sans-serif"]
    with use_language("en"):
        _figs, messages = _drawn(
            lambda: [viz.attention_panels([("weights", torch.rand(1, 2), ["我"], ["爱", "你"])])]
        )
    assert _missing(messages) == []


def test_a_font_cache_older_than_the_font_is_mended(monkeypatch):
    """matplotlib's font list is cached on disk: a CJK font installed after it was built is
    found by registering the system's CJK font files."""
    if viz.cjk_font() is None:
        pytest.skip(NO_FONT)
    from matplotlib import font_manager

    manager = font_manager.fontManager
    stale = [e for e in manager.ttflist if e.name not in viz.CJK_FONTS]
    monkeypatch.setattr(manager, "ttflist", stale)
    assert viz._find_cjk_font() in viz.CJK_FONTS
    assert any(e.name in viz.CJK_FONTS for e in manager.ttflist)
