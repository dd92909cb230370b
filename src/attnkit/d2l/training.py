"""The book's training loops (d2l 0.17): ``train_ch8``, ``train_epoch_ch8``,
``grad_clipping`` (chapter 8) and ``train_seq2seq`` (chapter 9), as calls of attnkit's one
training engine (:mod:`attnkit.training.engine`) with the book's settings.

The book's semantics are kept: Xavier initialisation, Adam (betas 0.9/0.999) and the sum of
the per-sequence losses of ``MaskedSoftmaxCELoss`` for ``train_seq2seq``; SGD (or the
scratch ``sgd``) on the token-mean cross-entropy with truncated BPTT for ``train_ch8``; the
global gradient norm clipped at 1; the book's final line. The engine's step makes them
fast: padded batches trimmed to their longest sequence (exact: the source only for
attnkit's own encoders, which skip padding; a reader's encoder sees the book's padding),
fused Adam / foreach SGD and clipping, no host sync per step. No Animator: ``train_ch8``
and ``train_seq2seq`` print the book's final line (and ``train_ch8`` its two predictions),
in the language in force: d2l-zh's line under Chinese (:mod:`attnkit.d2l.book_output`).
"""

from __future__ import annotations

import torch
from torch import nn

from attnkit.d2l.book_output import book_line
from attnkit.d2l.rnn import predict_ch8
from attnkit.i18n import _
from attnkit.metrics import perplexity
from attnkit.models.seq2seq import xavier_init_weights
from attnkit.training.engine import Engine, EngineConfig
from attnkit.training.lm import LMHistory, LMTask
from attnkit.training.optim import clip_gradients, sgd_update
from attnkit.training.translation import PaddedPairsTask


def evaluate_loss(net, data_iter, loss):
    """The mean of ``loss(net(X), y)`` over every element of every batch (chapter 4's helper).

    ``data_iter`` yields ``(X, y)``; ``y`` is reshaped to the output's shape, as the book
    does, and ``loss`` must not reduce (``nn.MSELoss(reduction='none')``). Runs without
    gradients; an empty ``data_iter`` is a ValueError (the book divides by zero).
    """
    total, count = 0.0, 0
    with torch.no_grad():
        for X, y in data_iter:
            out = net(X)
            losses = loss(out, y.reshape(out.shape))
            total, count = total + float(losses.sum()), count + losses.numel()
    if count == 0:
        raise ValueError(_("evaluate_loss: data_iter gave no batch (or only empty ones)"))
    return total / count


def grad_clipping(net, theta):
    """Global L2-norm clipping (``clip_grad_norm_``); returns the norm before clipping."""
    return clip_gradients(net, theta)


def _book_config(num_epochs: int, lr: float, device, optimizer: str) -> EngineConfig:
    # the book's settings: clip at 1, Adam's default betas, no re-seeding, no bars; no loss
    # guard (a book run that diverges shows its NaN, as the book's own loop does)
    return EngineConfig(
        epochs=num_epochs, lr=lr, clip=1.0, optimizer=optimizer, beta2=0.999, seed=None,
        device=str(device), progress=False, log_every=0, flat_params=True,
        max_nonfinite_steps=0, divergence_factor=0,
    )  # fmt: skip


def _updater(net, lr: float):
    """The book's choice: SGD for modules (made by the engine over its flat parameter),
    the scratch ``sgd`` over ``net.params`` otherwise."""
    return None if isinstance(net, nn.Module) else sgd_update(net.params, lr)


def train_epoch_ch8(net, train_iter, loss, updater, device, use_random_iter):
    """One epoch; returns ``(perplexity, tokens/sec)`` as the book."""
    config = _book_config(1, 1.0, device, "sgd")  # the updater is the caller's
    task = LMTask(train_iter, use_random_iter=use_random_iter, loss=loss)
    stats = Engine(net, task, config, optimizer=updater).train_epoch()
    return perplexity(stats["loss"]), stats["tokens_per_s"]


def train_ch8(net, train_iter, vocab, lr, num_epochs, device, use_random_iter=False):
    """SGD with clipping at 1; prints the book's final line and two predictions.

    Returns None, as the book (a notebook cell ending in this call shows nothing more);
    attnkit's own ``attnkit.training.lm`` keeps the per-epoch history.
    """
    task = LMTask(train_iter, use_random_iter=use_random_iter)
    config = _book_config(num_epochs, lr, device, "sgd")
    engine = Engine(net, task, config, optimizer=_updater(net, lr))
    hist = LMHistory.from_engine(engine.fit())
    ppl, speed = hist.perplexity[-1], hist.tokens_per_sec[-1]
    print(book_line("train_ch8", ppl=ppl, speed=speed, device=str(device)))
    print(predict_ch8("time traveller", 50, net, vocab, device))
    print(predict_ch8("traveller", 50, net, vocab, device))


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, device):
    """The book's loop: Xavier init, Adam, teacher forcing, ``l.sum().backward()``, clip at 1.

    Batches are ``(X, X_valid_len, Y, Y_valid_len)``. Prints the book's line for the last
    epoch: ``loss {sum of per-sequence losses / tokens:.3f}, {tokens/sec:.1f} tokens/sec``.
    """
    net.apply(xavier_init_weights)
    # Trimming padded source columns is exact only for attnkit's encoders (they skip
    # padding); a reader's own encoder may run over it, as the book's GRU does.
    trim_source = type(getattr(net, "encoder", None)).__module__.startswith("attnkit.")
    task = PaddedPairsTask(
        data_iter, tgt_vocab["<bos>"], reduction="per_sequence_sum", trim_source=trim_source
    )
    engine = Engine(net, task, _book_config(num_epochs, lr, device, "adam"))
    history = engine.fit()
    loss, speed = history["train_loss"][-1], history["tokens_per_s"][-1]
    print(book_line("train_seq2seq", loss=loss, speed=speed, device=str(device)))
