"""Text data of d2l 1.0: the alphabetical ``Vocab`` and ``TimeMachine`` (chapter 9).

``Vocab`` orders its tokens alphabetically (``<unk>`` and the reserved tokens sorted in
with the rest), as d2l 1.0 does; attnkit's own :class:`attnkit.data.text.Vocab` (and the
0.17 edition) orders by frequency with ``<unk>`` at 0, so token ids differ between editions.

Data files, as the book, come from ``root`` (default ``'../data'``, relative to the working
directory); see :func:`data_file`.
"""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path

import torch

from attnkit._validate import index as _index
from attnkit._validate import non_negative_int, positive_int, real
from attnkit.d2l.v1.base import DataModule
from attnkit.data import hub as _hub
from attnkit.i18n import _

__all__ = ["TimeMachine", "Vocab", "timemachine_path"]


class Vocab:
    """``Vocab(tokens=[], min_freq=0, reserved_tokens=[])``: alphabetical token ids.

    ``tokens``: a list of tokens, or a list of lists (flattened). ``token_freqs``: (token,
    count) by decreasing count; ``idx_to_token``: sorted unique tokens with count >=
    ``min_freq``, plus ``<unk>`` and ``reserved_tokens``.
    """

    def __init__(self, tokens=(), min_freq=0, reserved_tokens=()):
        if isinstance(tokens, str):
            raise TypeError(_("tokens must be a list of tokens (or of lists), got a str"))
        real("min_freq", min_freq)
        if isinstance(reserved_tokens, str):
            message = _("reserved_tokens must be a list of str, got {value!r}")
            raise TypeError(message.format(value=reserved_tokens))
        tokens = list(tokens)
        if tokens and isinstance(tokens[0], list | tuple):
            tokens = [token for line in tokens for token in line]
        counter = collections.Counter(tokens)
        self.token_freqs = sorted(counter.items(), key=lambda x: x[1], reverse=True)
        frequent = [token for token, freq in self.token_freqs if freq >= min_freq]
        self.idx_to_token = sorted({"<unk>", *reserved_tokens, *frequent})
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if not isinstance(tokens, list | tuple):
            return self.token_to_idx.get(tokens, self.unk)
        return [self.__getitem__(token) for token in tokens]

    def to_tokens(self, indices):
        """An index -> its token; a sequence of indices (tensor, list) -> a list of tokens.

        As the book, a sequence of length 1 gives the bare token, not a one-item list.
        """
        if isinstance(indices, torch.Tensor) and indices.dim() == 0:
            indices = int(indices)
        if hasattr(indices, "__len__") and len(indices) > 1:
            return [self._token(index) for index in indices]
        if hasattr(indices, "__len__"):
            if len(indices) == 0:
                return []
            indices = indices[0]
        return self._token(indices)

    def _token(self, index):
        if isinstance(index, torch.Tensor):
            index = int(index)
        return self.idx_to_token[_index("token index", index, len(self.idx_to_token))]

    @property
    def unk(self):
        """The index of ``<unk>``."""
        return self.token_to_idx["<unk>"]


def timemachine_path(root) -> Path:
    """``$ATTNKIT_TIMEMACHINE``; else ``root/timemachine.txt`` with the hub's sha1; else the
    cache or a download. Offline: ``DatasetUnavailableError`` naming every place looked at."""
    env = os.environ.get("ATTNKIT_TIMEMACHINE")
    if env:
        if not Path(env).is_file():
            raise FileNotFoundError(_("ATTNKIT_TIMEMACHINE={env!r} is not a file").format(env=env))
        return Path(env)
    try:
        return _hub.download("time_machine", search=(root,))
    except _hub.DatasetUnavailableError as e:
        message = _("{error} (or set ATTNKIT_TIMEMACHINE=/path/to/timemachine.txt)")
        raise _hub.DatasetUnavailableError(message.format(error=e)) from e


def check_split_sizes(batch_size, num_steps, num_train, num_val) -> None:
    """The sizes every 1.0 dataset takes: positive batch_size, num_steps and num_train;
    num_val >= 0 (TypeError/ValueError naming the argument)."""
    positive_int("batch_size", batch_size)
    positive_int("num_steps", num_steps)
    positive_int("num_train", num_train)
    non_negative_int("num_val", num_val)


class TimeMachine(DataModule):
    """``TimeMachine(batch_size, num_steps, num_train=10000, num_val=5000)``.

    Characters of the book (``[^A-Za-z]+`` -> space, lower case). ``X``, ``Y``: (N,
    num_steps) windows, ``Y`` shifted by one; the first ``num_train`` train, the next
    ``num_val`` validate. ``root`` (default ``'../data'``) may be set before ``__init__``
    runs by a subclass, or given as a keyword.
    """

    def __init__(self, batch_size, num_steps, num_train=10000, num_val=5000, *, root="../data"):
        super().__init__(root=root)
        check_split_sizes(batch_size, num_steps, num_train, num_val)
        self.batch_size, self.num_steps = batch_size, num_steps
        self.num_train, self.num_val = num_train, num_val
        corpus, self.vocab = self.build(self._download())
        windows = len(corpus) - num_steps
        if windows < num_train + num_val:
            message = _(
                "num_train + num_val = {wanted} windows of num_steps + 1 = {width} characters, "
                "but the text has {chars} characters ({windows} windows)"
            )
            raise ValueError(
                message.format(
                    wanted=num_train + num_val,
                    width=num_steps + 1,
                    chars=len(corpus),
                    windows=max(windows, 0),
                )
            )
        array = torch.tensor(corpus).unfold(0, num_steps + 1, 1)  # (windows, num_steps + 1)
        self.X, self.Y = array[:, :-1], array[:, 1:]

    def _download(self):
        path = timemachine_path(self.root)
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        if not text.strip():
            raise ValueError(_("the Time Machine file {path!r} is empty").format(path=str(path)))
        return text

    def _preprocess(self, text):
        return re.sub("[^A-Za-z]+", " ", text).lower()

    def _tokenize(self, text):
        return list(text)

    def build(self, raw_text, vocab=None):
        """``(corpus ids, vocab)`` of ``raw_text``'s characters (a new vocab unless given)."""
        if not isinstance(raw_text, str):
            message = _("raw_text must be a str, got {type}")
            raise TypeError(message.format(type=type(raw_text).__name__))
        tokens = self._tokenize(self._preprocess(raw_text))
        if vocab is None:
            vocab = Vocab(tokens)
        corpus = [vocab[token] for token in tokens]
        return corpus, vocab

    def get_dataloader(self, train):
        idx = (
            slice(0, self.num_train)
            if train
            else slice(self.num_train, self.num_train + self.num_val)
        )
        return self.get_tensorloader([self.X, self.Y], train, idx)
