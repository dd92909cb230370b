"""Chapter 8 of the book (d2l 0.17): text preprocessing, The Time Machine, RNN models.

Thin wrappers over :mod:`attnkit.data.text`, :mod:`attnkit.data.lm`,
:mod:`attnkit.models.rnn` and :mod:`attnkit.training.lm`. The training loops
(``train_ch8``, ``train_epoch_ch8``, ``grad_clipping``) are in :mod:`attnkit.d2l.training`.
"""

from __future__ import annotations

import random

import torch

from attnkit.d2l.book_output import book_line
from attnkit.d2l.utils import book_data_dir
from attnkit.data import lm as _lm
from attnkit.data import text as _text
from attnkit.inference.generation import generate as _generate
from attnkit.models import rnn as _rnn

Vocab = _text.Vocab
count_corpus = _text.count_corpus


def tokenize(lines, token="word"):
    """Lines split into words or characters. An unknown ``token`` is a ``ValueError`` (the
    book prints an error and returns None); under Chinese its message is d2l-zh's words."""
    if token not in ("word", "char"):
        message = book_line("tokenize", token=token)
        if message is not None:
            raise ValueError(message)
    return _text.tokenize(lines, token)


def seq_data_iter_random(corpus, batch_size, num_steps):
    """Random sampling, drawing from the global ``random`` state as the book does."""
    return _lm.seq_data_iter_random(corpus, batch_size, num_steps, rng=random)


def seq_data_iter_sequential(corpus, batch_size, num_steps):
    """Sequential partitioning, drawing from the global ``random`` state as the book does."""
    return _lm.seq_data_iter_sequential(corpus, batch_size, num_steps, rng=random)


def read_time_machine():
    """The book's lines of The Time Machine, lower-cased, letters and spaces only.

    From ``$ATTNKIT_TIMEMACHINE`` if set; else ``../data/timemachine.txt`` (the book's
    download folder, relative to the working directory) when its sha1 is
    ``DATA_HUB['time_machine']``'s; else attnkit's cache, downloading into it
    (``DatasetUnavailableError`` naming the places looked at when offline).
    """
    return _lm.read_time_machine(search=(book_data_dir(),))


def load_corpus_time_machine(max_tokens=-1):
    """Character corpus and vocab of The Time Machine; the book prints ``(170580, 28)``."""
    return _lm.load_corpus(read_time_machine(), "char", max_tokens)


class SeqDataLoader(_lm.LMDataLoader):
    """The book's ``SeqDataLoader(batch_size, num_steps, use_random_iter, max_tokens)``."""

    def __init__(self, batch_size, num_steps, use_random_iter, max_tokens):
        corpus, self.vocab = load_corpus_time_machine(max_tokens)
        # each epoch draws its offset from the global `random`, as the book's loader
        super().__init__(corpus, batch_size, num_steps, use_random_iter, rng=random)


def load_data_time_machine(batch_size, num_steps, use_random_iter=False, max_tokens=10000):
    data_iter = SeqDataLoader(batch_size, num_steps, use_random_iter, max_tokens)
    return data_iter, data_iter.vocab


class RNNModelScratch:
    """The book's glue for functional scratch models: ``forward_fn(one_hot(X.T), state, params)``."""

    def __init__(self, vocab_size, num_hiddens, device, get_params, init_state, forward_fn):
        self.vocab_size, self.num_hiddens = vocab_size, num_hiddens
        self.params = get_params(vocab_size, num_hiddens, device)
        self.init_state, self.forward_fn = init_state, forward_fn

    def __call__(self, X, state):
        X = torch.nn.functional.one_hot(X.T, self.vocab_size).type(torch.float32)
        return self.forward_fn(X, state, self.params)

    def begin_state(self, batch_size, device):
        return self.init_state(batch_size, self.num_hiddens, device)


class RNNModel(_rnn.RNNLM):
    """The book's ``RNNModel(rnn_layer, vocab_size)``: same ``rnn.*``/``linear.*`` keys."""

    def __init__(self, rnn_layer, vocab_size, **kwargs):
        super().__init__(rnn_layer, vocab_size)


def predict_ch8(prefix, num_preds, net, vocab, device):
    """Greedy continuation of ``prefix`` (unknown prefix characters raise ValueError)."""
    return _generate(net, prefix, vocab=vocab, max_new_tokens=num_preds, device=device)
