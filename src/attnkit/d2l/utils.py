"""Helpers the attention chapters take from earlier chapters of the book (d2l 0.17).

``DATA_HUB``/``download`` over :mod:`attnkit.data.hub` (same dict, so the book's
``d2l.DATA_HUB[name] = (url, sha1)`` registers with the real downloader). As the book,
``download`` looks in ``../data`` (relative to the working directory) first; unlike the
book, it then uses attnkit's cache (``$ATTNKIT_CACHE`` or ~/.cache/attnkit) and downloads
there, a fresh download is verified too, offline gives ``DatasetUnavailableError`` naming
the places looked at, and only zip archives are extracted. ``Timer``, ``Accumulator``,
``Animator`` and ``plot`` are the book's notebook helpers (matplotlib, headless-safe:
:mod:`attnkit.viz` picks Agg without a display).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from attnkit.d2l.book_output import book_line
from attnkit.data import hub as _hub
from attnkit.i18n import _
from attnkit.training import optim as _optim

DATA_HUB = _hub.DATA_HUB
DATA_URL = _hub.DATA_URL


def book_data_dir() -> Path:
    """The book's default data folder, ``../data``, relative to the working directory.

    Evaluated on each call (as the book's ``os.path.join('..', 'data')``), so it follows
    ``os.chdir``.
    """
    return Path("..", "data")


def try_gpu(i: int = 0) -> torch.device:
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


def download(name: str, cache_dir=None) -> str:
    """Path (str) of ``DATA_HUB[name]``, its sha1 checked.

    With ``cache_dir=None``: ``../data/<file>`` (the book's default folder, relative to the
    working directory) when its sha1 matches, else attnkit's cache, downloading into it.
    An explicit ``cache_dir`` is the only folder used (downloading into it if needed).
    Under Chinese a download is announced as d2l-zh does ("正在从{url}下载{fname}...").
    """
    if cache_dir is None:
        _announce(name, (book_data_dir(), _hub.cache_dir()))
        return str(_hub.download(name, search=(book_data_dir(),)))
    _announce(name, (cache_dir,))
    return str(_hub.download(name, cache_dir))


def _announce(name: str, folders) -> None:
    """d2l-zh's line before a download: when no folder holds the file with its registered
    sha1 (the last folder is where it goes). English, as attnkit always has, downloads
    quietly."""
    if name not in DATA_HUB:
        return
    url, sha1 = DATA_HUB[name]
    filename = url.rsplit("/", 1)[-1]
    line = book_line("download", url=url, fname=str(Path(folders[-1]) / filename))
    if line is None:
        return
    for folder in folders:
        path = Path(folder) / filename
        if path.is_file() and _hub.sha1_of(path) == sha1:
            return
    print(line)


def download_extract(name: str, folder=None) -> str:
    """Download and unzip ``DATA_HUB[name]``; return ``base_dir/folder`` or the zip's stem.

    An already-extracted ``../data/<stem>`` folder (what the book's ``download_extract``
    leaves) is used first, as is (extracted files cannot be checked against the zip's
    sha1); then a verified zip in ``../data`` or attnkit's cache, extracted next to itself;
    then a download into attnkit's cache.
    """
    if name in DATA_HUB and not DATA_HUB[name][0].endswith(".zip"):
        message = _("download_extract: {name!r} is {url}; only .zip archives are supported")
        raise ValueError(message.format(name=name, url=DATA_HUB[name][0]))
    data_dir = _hub.download_extract(name, search=(book_data_dir(),))
    return str(data_dir.parent / folder) if folder else str(data_dir)


class Timer:
    """The book's ``Timer``: ``start``, ``stop`` (returns the lap), ``avg``, ``sum``, ``cumsum``."""

    def __init__(self):
        self.times: list[float] = []
        self.start()

    def start(self) -> None:
        self.tik = time.perf_counter()

    def stop(self) -> float:
        self.times.append(time.perf_counter() - self.tik)
        return self.times[-1]

    def avg(self) -> float:
        return sum(self.times) / len(self.times)

    def sum(self) -> float:
        return sum(self.times)

    def cumsum(self) -> list[float]:
        return list(itertools.accumulate(self.times))


class Accumulator:
    """The book's ``Accumulator(n)``: ``n`` running float sums."""

    def __init__(self, n: int):
        self.data = [0.0] * n

    def add(self, *args) -> None:
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self) -> None:
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def sgd(params, lr, batch_size) -> None:
    """The book's minibatch SGD: ``p -= lr * p.grad / batch_size`` under no_grad, zero grads."""
    _optim.sgd_update(params, lr)(batch_size)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def use_svg_display() -> None:
    """SVG figures in a Jupyter notebook (as the book); does nothing elsewhere."""
    if _in_notebook():
        try:
            from matplotlib_inline import backend_inline
        except ImportError:
            return
        backend_inline.set_matplotlib_formats("svg")


def set_figsize(figsize=(3.5, 2.5)) -> None:
    """Default size of new figures (``plt.rcParams['figure.figsize']``)."""
    use_svg_display()
    plt.rcParams["figure.figsize"] = figsize


def set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend) -> None:
    """The book's axis setup: labels, scales, limits, legend, grid."""
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_xscale(xscale)
    axes.set_yscale(yscale)
    axes.set_xlim(xlim)
    axes.set_ylim(ylim)
    if legend:
        axes.legend(legend)
    axes.grid()


def plot(X, Y=None, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
         xscale="linear", yscale="linear", fmts=("-", "m--", "g-.", "r:"), figsize=(3.5, 2.5),
         axes=None):  # fmt: skip
    """The book's ``plot``: one or more curves on ``axes`` (default: a new figure's axes).

    Returns the axes. Unlike the book (which reuses ``plt.gca()``, fresh per notebook cell),
    without ``axes`` it opens a new figure, so scripts do not draw over older plots;
    ``d2l.plt.plot(...)`` afterwards still draws on it, as in the book.
    """
    legend = [] if legend is None else legend
    set_figsize(figsize)
    if axes is None:
        axes = plt.figure(figsize=figsize).gca()

    def has_one_axis(X):
        return (hasattr(X, "ndim") and X.ndim == 1) or (
            isinstance(X, list) and not hasattr(X[0], "__len__")
        )

    if has_one_axis(X):
        X = [X]
    if Y is None:
        X, Y = [[]] * len(X), X
    elif has_one_axis(Y):
        Y = [Y]
    if len(X) != len(Y):
        X = X * len(Y)
    axes.cla()
    for x, y, fmt in zip(X, Y, fmts):
        if len(x):
            axes.plot(x, y, fmt)
        else:
            axes.plot(y, fmt)
    set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend)
    return axes


class Animator:
    """The book's ``Animator``: ``add(x, y)`` appends points and redraws its figure.

    Keeps the points in ``X``/``Y`` (one list per curve) and the figure in ``fig``. In a
    Jupyter notebook it redisplays the figure on every ``add`` as the book does; elsewhere it
    only draws (save it with ``fig.savefig`` or ``attnkit.viz.save_figure``).
    """

    def __init__(self, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
                 xscale="linear", yscale="linear", fmts=("-", "m--", "g-.", "r:"), nrows=1,
                 ncols=1, figsize=(3.5, 2.5)):  # fmt: skip
        legend = [] if legend is None else legend
        use_svg_display()
        self.fig, self.axes = plt.subplots(nrows, ncols, figsize=figsize)
        if nrows * ncols == 1:
            self.axes = [self.axes]
        # The curves go on the first subplot (the book's ``axes[0]``, which for a 2-D grid is
        # a row of axes and crashes there).
        self._ax = self.axes[0] if nrows * ncols == 1 else self.axes.flat[0]
        self.config_axes = lambda: set_axes(
            self._ax, xlabel, ylabel, xlim, ylim, xscale, yscale, legend
        )
        self.X, self.Y, self.fmts = None, None, fmts

    def add(self, x, y) -> None:
        if not hasattr(y, "__len__"):
            y = [y]
        n = len(y)
        if not hasattr(x, "__len__"):
            x = [x] * n
        if not self.X:
            self.X = [[] for _ in range(n)]
        if not self.Y:
            self.Y = [[] for _ in range(n)]
        for i, (a, b) in enumerate(zip(x, y)):
            if a is not None and b is not None:
                self.X[i].append(a)
                self.Y[i].append(b)
        self._ax.cla()
        for xs, ys, fmt in zip(self.X, self.Y, self.fmts):
            self._ax.plot(xs, ys, fmt)
        self.config_axes()
        if _in_notebook():
            from IPython import display

            display.display(self.fig)
            display.clear_output(wait=True)


def show_list_len_pair_hist(legend, xlabel, ylabel, xlist, ylist):
    """The book's histogram of list lengths (second set hatched) on a new figure.

    Returns ``(counts, bins, patches)`` from ``plt.hist``; the book returns nothing.
    """
    set_figsize()
    plt.figure()
    result = plt.hist([[len(seq) for seq in xlist], [len(seq) for seq in ylist]])
    plt.xlabel(xlabel)
    plt.ylabel(ylabel)
    for patch in result[2][1].patches:
        patch.set_hatch("/")
    plt.legend(legend)
    return result
