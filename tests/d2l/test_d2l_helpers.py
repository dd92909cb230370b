"""``attnkit.d2l`` helpers the chapters take from earlier chapters (no network, no ../shared)."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch
from torch import nn

from attnkit import d2l
from attnkit.data import hub


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    matplotlib.pyplot.close("all")


@pytest.fixture
def offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


# ---------------------------------------------------------------- DATA_HUB and downloads


def test_data_hub_is_the_real_registry_with_the_books_entries():
    assert d2l.DATA_HUB is hub.DATA_HUB
    assert d2l.DATA_URL == "http://d2l-data.s3-accelerate.amazonaws.com/"
    assert d2l.DATA_HUB["fra-eng"] == (
        d2l.DATA_URL + "fra-eng.zip",
        "94646ad1522d915e7b0f9296181140edcf86a4f5",
    )
    assert d2l.DATA_HUB["time_machine"][1] == "090b5e7e70c295757f55df93cb0a180b9691891a"


def _toy_zip(path: Path) -> str:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("toy-set/fra.txt", "Go.\tVa !\n")
        z.writestr("toy-set/_about.txt", "about\n")
    return hashlib.sha1(path.read_bytes()).hexdigest()


def test_download_extract_of_a_cached_zip_as_the_book(tmp_path, monkeypatch, offline):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    sha1 = _toy_zip(tmp_path / "cache" / "toy-set.zip")
    # The book's registration line, with our zip's real sha1.
    monkeypatch.setitem(d2l.DATA_HUB, "toy-set", (d2l.DATA_URL + "toy-set.zip", sha1))

    data_dir = d2l.download_extract("toy-set")
    assert data_dir == str(tmp_path / "cache" / "toy-set")
    with open(Path(data_dir) / "fra.txt", encoding="utf-8") as f:
        assert f.read() == "Go.\tVa !\n"
    assert Path(data_dir, "_about.txt").is_file()
    # The book's `folder` argument: base_dir / folder.
    assert d2l.download_extract("toy-set", "toy-set") == str(tmp_path / "cache" / "toy-set")
    assert d2l.download("toy-set") == str(tmp_path / "cache" / "toy-set.zip")


def test_download_into_an_explicit_cache_dir(tmp_path, monkeypatch, offline):
    sha1 = _toy_zip(tmp_path / "toy-set.zip")
    monkeypatch.setitem(d2l.DATA_HUB, "toy-set", (d2l.DATA_URL + "toy-set.zip", sha1))
    got = d2l.download("toy-set", cache_dir=str(tmp_path))
    assert isinstance(got, str)
    assert got == str(tmp_path / "toy-set.zip")


def test_download_offline_fails_with_the_clear_message(tmp_path, monkeypatch, offline):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path))
    monkeypatch.setitem(d2l.DATA_HUB, "toy-set", (d2l.DATA_URL + "toy-set.zip", "0" * 40))
    with pytest.raises(hub.DatasetUnavailableError, match="Are you offline"):
        d2l.download_extract("toy-set")
    with pytest.raises(hub.DatasetUnavailableError, match="Are you offline"):
        d2l.download("toy-set", cache_dir=tmp_path)
    assert not list(tmp_path.iterdir())  # no partial file left


def test_download_extract_rejects_non_zip_and_unknown_names(monkeypatch):
    monkeypatch.setitem(d2l.DATA_HUB, "toy-tar", (d2l.DATA_URL + "toy.tar", "0" * 40))
    with pytest.raises(ValueError, match=r"only \.zip"):
        d2l.download_extract("toy-tar")
    with pytest.raises(KeyError, match="unknown dataset"):
        d2l.download_extract("no-such-dataset")


# ---------------------------------------------------------------- Timer, Accumulator, sgd


def test_timer_sums_as_the_book():
    timer = d2l.Timer()
    lap = timer.stop()
    assert lap >= 0 and timer.times == [lap]
    timer.times = [1.0, 2.0, 3.5]
    assert timer.sum() == 6.5
    assert timer.avg() == pytest.approx(6.5 / 3)
    assert timer.cumsum() == [1.0, 3.0, 6.5]
    timer.start()
    timer.stop()
    assert len(timer.times) == 4


def test_accumulator():
    metric = d2l.Accumulator(3)
    assert metric[0] == metric[1] == metric[2] == 0.0
    metric.add(1, torch.tensor(2.5), 3)
    metric.add(0.5, 1, np.float32(2))
    assert metric.data == [1.5, 3.5, 5.0]
    assert metric[1] == 3.5
    assert metric[:2] == [1.5, 3.5]
    metric.reset()
    assert metric.data == [0.0, 0.0, 0.0]


def test_sgd_updates_in_place_and_zeroes_grads():
    torch.manual_seed(0)
    w = torch.randn(3, 2, requires_grad=True)
    b = torch.randn(2, requires_grad=True)
    (w.sum() * 2 + (b**2).sum()).backward()
    w0, b0 = w.detach().clone(), b.detach().clone()
    gw, gb = w.grad.clone(), b.grad.clone()
    d2l.sgd([w, b], 0.1, 4)
    torch.testing.assert_close(w.detach(), w0 - 0.1 * gw / 4)
    torch.testing.assert_close(b.detach(), b0 - 0.1 * gb / 4)
    assert w.requires_grad and w.is_leaf
    assert torch.count_nonzero(w.grad) == 0 and torch.count_nonzero(b.grad) == 0


# ---------------------------------------------------------------- plotting


def test_animator_keeps_points_and_draws_lines():
    animator = d2l.Animator(
        xlabel="epoch", ylabel="loss", legend=["train", "test"], xlim=[1, 5], yscale="log"
    )
    assert isinstance(animator.fig, matplotlib.figure.Figure)
    animator.add(1, (2.0, 3.0))
    animator.add(2, (1.0, None))  # None is skipped, as the book
    animator.add(3, (0.5, 1.5))
    assert animator.X == [[1, 2, 3], [1, 3]]
    assert animator.Y == [[2.0, 1.0, 0.5], [3.0, 1.5]]
    ax = animator.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 2
    assert list(lines[0].get_xdata()) == [1, 2, 3]
    assert list(lines[1].get_ydata()) == [3.0, 1.5]
    assert ax.get_xlabel() == "epoch" and ax.get_yscale() == "log"
    assert ax.get_xlim() == (1.0, 5.0)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "test"]


def test_animator_grid_signature():
    animator = d2l.Animator(nrows=2, ncols=2, figsize=(4, 3), fmts=("-",))
    assert animator.axes.shape == (2, 2)
    animator.add([0.0], [1.0])
    assert animator.X == [[0.0]]
    assert len(animator.axes[0, 0].get_lines()) == 1  # the first subplot


def test_set_figsize_and_plot():
    d2l.set_figsize((4, 3))
    assert tuple(matplotlib.pyplot.rcParams["figure.figsize"]) == (4.0, 3.0)
    x = torch.arange(0, 5, 1.0)
    ax = d2l.plot(x, [x * 2, x**2], "x", "y", legend=["2x", "x^2"], xlim=[0, 5])
    lines = ax.get_lines()
    assert len(lines) == 2
    assert list(lines[1].get_ydata()) == [0.0, 1.0, 4.0, 9.0, 16.0]
    assert ax.get_xlabel() == "x" and ax.get_xlim() == (0.0, 5.0)
    # Y omitted: the book plots X against its indices; `d2l.plt.plot` adds to the same axes.
    ax = d2l.plot([3.0, 1.0, 2.0], xscale="log", yscale="log")
    assert list(ax.get_lines()[0].get_ydata()) == [3.0, 1.0, 2.0]
    d2l.plt.plot([1, 2], [1, 2], "o")
    assert len(ax.get_lines()) == 2
    d2l.set_figsize()


def test_show_list_len_pair_hist_counts():
    xlist = [[0] * n for n in (1, 1, 2, 3, 3, 3, 10)]
    ylist = [[0] * n for n in (2, 2, 5)]
    counts, bins, patches = d2l.show_list_len_pair_hist(
        ["source", "target"], "# tokens per sequence", "count", xlist, ylist
    )
    lengths_x = [len(s) for s in xlist]
    lengths_y = [len(s) for s in ylist]
    expected_bins = np.histogram_bin_edges(lengths_x + lengths_y, bins=10)
    np.testing.assert_allclose(bins, expected_bins)
    np.testing.assert_array_equal(counts[0], np.histogram(lengths_x, expected_bins)[0])
    np.testing.assert_array_equal(counts[1], np.histogram(lengths_y, expected_bins)[0])
    assert counts[0].sum() == 7 and counts[1].sum() == 3
    heights = [p.get_height() for p in patches[0].patches]
    assert heights == list(counts[0])
    assert all(p.get_hatch() == "/" for p in patches[1].patches)
    ax = matplotlib.pyplot.gca()
    assert ax.get_xlabel() == "# tokens per sequence" and ax.get_ylabel() == "count"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["source", "target"]


def test_show_heatmaps_passes_keywords_through(tmp_path):
    weights = torch.eye(3).reshape(1, 1, 3, 3)
    out = tmp_path / "maps.png"
    fig = d2l.show_heatmaps(
        weights, "Keys", "Queries", path=out, xticklabels=["a", "b", "c"], yticklabels="xyz"
    )
    assert out.is_file() and out.stat().st_size > 0
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "z"]
    with pytest.raises(ValueError, match="xticklabels"):
        d2l.show_heatmaps(weights, "Keys", "Queries", xticklabels=["a"])


# ---------------------------------------------------------------- transpose_qkv / transpose_output


@pytest.mark.parametrize("fn", [d2l.transpose_qkv, d2l.transpose_output])
def test_transpose_num_heads_is_validated(fn):
    X = torch.zeros(4, 3, 8)
    name = fn.__name__
    with pytest.raises(ValueError, match=rf"{name}: num_heads must be a positive int, got 0"):
        fn(X, 0)
    with pytest.raises(ValueError, match=r"num_heads must be a positive int, got -2"):
        fn(X, -2)
    with pytest.raises(TypeError, match=r"num_heads must be a positive int, got 2\.0 \(float\)"):
        fn(X, 2.0)
    with pytest.raises(TypeError, match=r"got True \(bool\)"):
        fn(X, True)


def test_transpose_shapes_are_validated():
    with pytest.raises(ValueError, match=r"transpose_qkv: X must have shape \(batch, steps, "):
        d2l.transpose_qkv(torch.zeros(2, 8), 2)
    with pytest.raises(ValueError, match=r"got \(2, 3, 4, 8\)"):
        d2l.transpose_output(torch.zeros(2, 3, 4, 8), 2)
    with pytest.raises(TypeError, match=r"X must be a torch\.Tensor .* got list"):
        d2l.transpose_qkv([[[1.0]]], 1)
    with pytest.raises(ValueError, match=r"X\.shape\[2\] .* divisible by num_heads, got 10"):
        d2l.transpose_qkv(torch.zeros(2, 3, 10), 4)
    with pytest.raises(ValueError, match=r"X\.shape\[0\] .* divisible by num_heads, got 6"):
        d2l.transpose_output(torch.zeros(6, 3, 2), 4)
    X = torch.randn(2, 3, 8)
    torch.testing.assert_close(d2l.transpose_output(d2l.transpose_qkv(X, 4), 4), X)


def test_evaluate_loss_is_the_mean_over_every_element():
    torch.manual_seed(0)
    X, y = torch.randn(10, 3), torch.randn(10)
    net = nn.Linear(3, 1)
    data_iter = d2l.load_array((X, y), batch_size=4, is_train=False)  # batches of 4, 4, 2
    got = d2l.evaluate_loss(net, data_iter, nn.MSELoss(reduction="none"))
    expected = ((net(X).detach().double().squeeze(1) - y.double()) ** 2).mean()
    assert abs(got - float(expected)) < 1e-6
    with pytest.raises(ValueError, match="evaluate_loss: data_iter gave no batch"):
        d2l.evaluate_loss(net, [], nn.MSELoss(reduction="none"))
