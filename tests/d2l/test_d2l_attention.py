"""``from attnkit import d2l`` runs the book's chapter-10 code and matches its values."""

from __future__ import annotations

import torch

from attnkit import attention, d2l


def test_book_names_and_signatures():
    for name in [
        "masked_softmax",
        "sequence_mask",
        "AdditiveAttention",
        "DotProductAttention",
        "MultiHeadAttention",
        "transpose_qkv",
        "transpose_output",
        "PositionalEncoding",
        "show_heatmaps",
        "NWKernelRegression",
    ]:
        assert hasattr(d2l, name), name
    # wrappers are subclasses of the real implementation, not copies
    assert issubclass(d2l.MultiHeadAttention, attention.MultiHeadAttention)
    assert issubclass(d2l.AdditiveAttention, attention.AdditiveAttention)
    assert d2l.masked_softmax is attention.masked_softmax


def test_book_masked_softmax_example():
    out = d2l.masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3]))
    assert (out[0, :, 2:] == 0).all() and (out[1, :, 3:] == 0).all()
    torch.testing.assert_close(out.sum(-1), torch.ones(2, 2))


def test_book_scoring_examples():
    queries, keys = torch.normal(0, 1, (2, 1, 20)), torch.ones((2, 10, 2))
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    valid_lens = torch.tensor([2, 6])
    attention = d2l.AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.1)
    attention.eval()
    expected = torch.tensor([[[2.0, 3, 4, 5]], [[10.0, 11, 12, 13]]])
    torch.testing.assert_close(attention(queries, keys, values, valid_lens), expected)
    queries = torch.normal(0, 1, (2, 1, 2))
    attention = d2l.DotProductAttention(dropout=0.5)
    attention.eval()
    torch.testing.assert_close(attention(queries, keys, values, valid_lens), expected)
    assert attention.attention_weights.shape == (2, 1, 10)  # recorded in eval mode, as the book


def test_transpose_roundtrip():
    X = torch.randn(2, 3, 8)
    Y = d2l.transpose_qkv(X, 4)
    assert Y.shape == (8, 3, 2)
    torch.testing.assert_close(Y[1], X[0, :, 2:4])
    torch.testing.assert_close(d2l.transpose_output(Y, 4), X)


def test_positional_encoding_book_usage():
    pos = d2l.PositionalEncoding(32, 0)
    pos.eval()
    X = pos(torch.zeros((1, 60, 32)))
    P = pos.P[:, : X.shape[1], :]
    torch.testing.assert_close(X, P)
    torch.testing.assert_close(P[0, 1, 0], torch.sin(torch.tensor(1.0)))


def test_training_mode_uses_fused_path_and_keeps_no_weights():
    mha = d2l.MultiHeadAttention(8, 8, 8, 8, 2, 0.0)
    X = torch.randn(2, 3, 8)
    mha(X, X, X, None)
    assert mha.attention.attention_weights is None
    mha.eval()
    mha(X, X, X, None)
    assert mha.attention.attention_weights.shape == (4, 3, 3)
