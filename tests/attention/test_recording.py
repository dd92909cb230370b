"""Attention weights recorded per thread (``record_attention``): values, no shared flags."""

from __future__ import annotations

import threading

import torch

from attnkit.attention.bilinear import BilinearAttention
from attnkit.attention.multihead import MultiHeadAttention
from attnkit.attention.recording import record_attention, recording
from attnkit.attention.single_head import AdditiveAttention, DotProductAttention


def test_record_returns_the_weights_as_values():
    mha = MultiHeadAttention(8, 2).eval()
    X = torch.randn(2, 5, 8)
    assert not recording()
    with record_attention(mha) as record:
        assert recording()
        mha(X, X, X, torch.tensor([5, 3]))
    assert not recording()
    w = record.get(mha)
    assert w.shape == (2, 2, 5, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 5))
    assert (w[1, :, :, 3:] == 0).all()  # masked keys get exactly zero
    # equal to the module's own attribute (the book's API)
    torch.testing.assert_close(mha.attention_weights, w)
    add = AdditiveAttention(4, 4, 6).eval()
    with record_attention() as record:
        add(torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 5))
    torch.testing.assert_close(record.get(add), add.attention_weights)
    with record_attention(on=False) as off:  # a block that turns recording off
        mha(X, X, X)
    assert off.get(mha) is None and len(off) == 0


def test_every_attention_module_returns_the_weights_it_records():
    """need_weights=True returns (output, weights): the same weights a record_attention()
    block notes, and the same output as without them."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    lens = torch.tensor([5, 2])
    modules = [
        DotProductAttention(),
        AdditiveAttention(4, 4, 6),
        BilinearAttention(4, 4),
        MultiHeadAttention(4, 2),
    ]
    for module in modules:
        module.eval()
        plain = module(q, k, v, lens)
        with record_attention() as record:
            out, weights = module(q, k, v, lens, need_weights=True)
        torch.testing.assert_close(out, plain, atol=1e-6, rtol=1e-5)
        assert record.get(module) is weights, type(module).__name__
        assert (weights[1, ..., 2:] == 0).all(), type(module).__name__  # masked keys
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


def test_threads_record_their_own_weights_at_once():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    inputs = [torch.randn(1, 6 + i, 16) for i in range(6)]
    with torch.no_grad():
        alone = []
        for X in inputs:
            with record_attention() as record:
                mha(X, X, X)
            alone.append(record.get(mha))
    barrier = threading.Barrier(len(inputs))
    got: dict[int, torch.Tensor] = {}

    def work(i: int) -> None:
        barrier.wait()  # every thread inside its block at the same time
        with torch.no_grad(), record_attention() as record:
            for _ in range(20):
                mha(inputs[i], inputs[i], inputs[i])
            got[i] = record.get(mha)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, w in enumerate(alone):
        torch.testing.assert_close(got[i], w)  # no thread saw another's weights
