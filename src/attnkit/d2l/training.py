"""The book's training loops (d2l 0.17): ``train_ch8``, ``train_epoch_ch8``,
``grad_clipping`` (chapter 8) and ``train_seq2seq`` (chapter 9), over
:mod:`attnkit.training`. ``train_ch8`` shows a progress bar instead of the Animator;
``train_seq2seq`` prints only its final line.
"""

from __future__ import annotations

import time as _time

import torch
from torch import nn

from attnkit.d2l.rnn import predict_ch8
from attnkit.models import seq2seq as _s2s
from attnkit.training import lm as _lmtrain
from attnkit.training import trainer as _trainer


def grad_clipping(net, theta):
    """Global L2-norm clipping (``clip_grad_norm_``); returns the norm before clipping."""
    return _lmtrain.clip_gradients(net, theta)


def train_epoch_ch8(net, train_iter, loss, updater, device, use_random_iter):
    stats = _lmtrain.train_epoch(
        net, train_iter, updater, loss=loss, device=device, use_random_iter=use_random_iter
    )
    return stats.perplexity, stats.tokens_per_sec


def train_ch8(net, train_iter, vocab, lr, num_epochs, device, use_random_iter=False):
    """SGD with clipping at 1; a progress bar instead of the Animator; returns the history."""
    if isinstance(net, nn.Module):
        updater = torch.optim.SGD(net.parameters(), lr)
    else:
        updater = _lmtrain.sgd_update(net.params, lr)
    hist = _lmtrain.train_lm(
        net,
        train_iter,
        num_epochs=num_epochs,
        updater=updater,
        device=device,
        use_random_iter=use_random_iter,
    )
    ppl, speed = hist.perplexity[-1], hist.tokens_per_sec[-1]
    print(f"perplexity {ppl:.1f}, {speed:.1f} tokens/sec on {device!s}")
    print(predict_ch8("time traveller", 50, net, vocab, device))
    print(predict_ch8("traveller", 50, net, vocab, device))
    return hist


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, device):
    """The book's loop: Xavier init, Adam, teacher forcing, ``l.sum().backward()``, clip at 1.

    Batches are ``(X, X_valid_len, Y, Y_valid_len)``. Prints the book's line for the last
    epoch: ``loss {sum of per-sequence losses / tokens:.3f}, {tokens/sec:.1f} tokens/sec``.
    """
    net.apply(_s2s.xavier_init_weights)
    net.to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    bos_id = tgt_vocab["<bos>"]
    net.train()
    loss_sum = num_tokens = seconds = 0.0
    for _epoch in range(num_epochs):
        start = _time.perf_counter()
        totals = torch.zeros(2, dtype=torch.float64)
        for batch in data_iter:
            optimizer.zero_grad()
            X, X_valid_len, Y, Y_valid_len = (x.to(device) for x in batch)
            loss = _trainer.teacher_forcing_loss(
                net, X, X_valid_len, Y, Y_valid_len, bos_id, "per_sequence"
            )  # (B,): the book's MaskedSoftmaxCELoss
            loss.sum().backward()
            grad_clipping(net, 1)
            optimizer.step()
            totals += torch.stack([loss.detach().sum().cpu(), Y_valid_len.sum().cpu()])
        seconds = _time.perf_counter() - start
        loss_sum, num_tokens = float(totals[0]), float(totals[1])
    print(f"loss {loss_sum / num_tokens:.3f}, {num_tokens / seconds:.1f} tokens/sec on {device!s}")
