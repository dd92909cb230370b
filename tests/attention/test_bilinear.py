"""BilinearAttention: qᵀWk with matrix products, masking as attnkit.attention.masking."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention.bilinear import BilinearAttention


def test_scores_are_qwk_and_weights_sum_to_one():
    torch.manual_seed(0)
    att = BilinearAttention(query_size=5, key_size=3)
    q, k, v = torch.randn(2, 4, 5), torch.randn(2, 6, 3), torch.randn(2, 6, 7)
    out = att(q, k, v)
    assert out.shape == (2, 4, 7)
    loop = torch.empty(2, 4, 6)
    for b in range(2):
        for i in range(4):
            for j in range(6):
                loop[b, i, j] = q[b, i] @ att.W @ k[b, j]
    torch.testing.assert_close(att.scores(q, k), loop, atol=1e-5, rtol=1e-5)
    w = att.attention_weights
    torch.testing.assert_close(w, torch.softmax(loop, -1), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out, w @ v)


def test_masking_lengths_bool_masks_and_empty_rows():
    torch.manual_seed(0)
    att = BilinearAttention(4, 2)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 2), torch.randn(2, 5, 3)
    att(q, k, v, torch.tensor([2, 0]))
    w = att.attention_weights
    assert (w[0, :, 2:] == 0).all() and torch.allclose(w[0].sum(-1), torch.ones(3))
    assert (w[1] == 0).all()  # no key to attend: zero weights, zero output, no NaN
    out = att(q, k, v, torch.tensor([[1, 2, 3], [5, 5, 5]]))  # per-query lengths
    assert (att.attention_weights[0, 0, 1:] == 0).all() and not out.isnan().any()
    mask = torch.tensor([True, False, True, False, True])  # True = attend
    att(q, k, v, mask)
    assert (att.attention_weights[..., 1] == 0).all() and (att.attention_weights[..., 3] == 0).all()


def test_gradients_and_dropout():
    att = BilinearAttention(3, 3, dropout=0.5)
    q, k, v = torch.randn(1, 2, 3), torch.randn(1, 4, 3), torch.randn(1, 4, 2)
    att(q, k, v).sum().backward()
    assert att.W.grad is not None and att.W.grad.abs().sum() > 0
    att.eval()
    torch.testing.assert_close(att(q, k, v), att.attention_weights @ v)


def test_argument_errors():
    with pytest.raises(TypeError, match="query_size must be a positive int"):
        BilinearAttention(2.5, 3)
    with pytest.raises(ValueError, match="key_size must be a positive int"):
        BilinearAttention(2, 0)
    with pytest.raises(ValueError, match="dropout must be in"):
        BilinearAttention(2, 3, dropout=1.0)
    att = BilinearAttention(4, 2)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 2), torch.randn(2, 5, 3)
    with pytest.raises(ValueError, match=r"queries must be \(B, Q, 4\)"):
        att(torch.randn(2, 3, 5), k, v)
    with pytest.raises(ValueError, match=r"keys must be \(B, K, 2\)"):
        att(q, torch.randn(2, 5, 3), v)
    with pytest.raises(ValueError, match="same length K"):
        att(q, k, torch.randn(2, 4, 3))
    with pytest.raises(ValueError, match="share the batch size"):
        att(q, torch.randn(1, 5, 2), torch.randn(1, 5, 3))
    with pytest.raises(TypeError, match="floating-point"):
        att(q.long(), k, v)
    with pytest.raises(ValueError, match="3-D"):
        att(q[0], k, v)
    with pytest.raises(ValueError, match="valid_lens must lie in"):
        att(q, k, v, torch.tensor([6, 1]))
