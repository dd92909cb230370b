"""``d2l.show_attention``: the book's ``attention_weights`` through attnkit's notebook views
(``d2l.show_heatmaps`` stays the book's figure)."""

from __future__ import annotations

import pytest
import torch
from tests.views.test_views import assert_quantized_equal, embedded


def test_book_attention_weights_through_attnkit_d2l():
    from attnkit import d2l

    encoder = d2l.TransformerEncoder(200, 24, 24, 24, 24, [24], 24, 48, 4, 2, 0.0).eval()
    X = torch.ones(2, 5, dtype=torch.long)  # two sentences of 5 tokens
    with torch.no_grad():
        encoder(X, torch.tensor([3, 5]))
    blocks = encoder.attention_weights  # the book's: per block (B*H, Q, K) = (8, 5, 5)
    view = d2l.show_attention(blocks, list("abcde"), num_heads=4, view="matrix")
    [p] = embedded(view)["panels"]
    assert (p["layers"], p["heads"]) == (2, 4)
    first = torch.stack([b.reshape(2, 4, 5, 5)[0] for b in blocks])  # sentence 0's heads
    assert_quantized_equal(p, first)
    assert float(first[..., 3:].abs().max()) == 0.0  # its two padded keys get no weight
    with pytest.raises(ValueError, match="not a multiple of num_heads=3"):
        d2l.show_attention(blocks, list("abcde"), num_heads=3)
    assert d2l.show_heatmaps is not d2l.show_attention  # the book's figure stays the book's
