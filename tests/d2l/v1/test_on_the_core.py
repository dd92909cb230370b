"""The 1.0 layer over the core: its Transformer is the core's (no second implementation),
its lazy layers are created in 1.0.3's order under a seed, and ``predict_step`` is the
book's loop run by the core's greedy decoder."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnkit.attention import LazyMultiHeadAttention
from attnkit.d2l import v1 as d2l
from attnkit.models import seq2seq as core_s2s
from attnkit.models import transformer as core_tf


def _materialise(model, *inputs):
    with torch.no_grad():
        model(*inputs)
    return model


def _transformer():
    torch.manual_seed(1)
    X, Y = torch.randint(0, 10, (3, 6)), torch.randint(0, 12, (3, 5))
    lens = torch.tensor([5, 2, 4])
    enc = d2l.TransformerEncoder(10, 8, 16, 2, 2, 0.0)
    dec = d2l.TransformerDecoder(12, 8, 16, 2, 2, 0.0)
    model = d2l.Seq2Seq(enc, dec, tgt_pad=0, lr=0.1)
    return _materialise(model, X, Y, lens).double(), X, Y, lens


def _bos(Y, bos=1):
    Y = Y.clone()
    Y[:, 0] = bos
    return Y


def test_the_1_0_classes_are_the_cores():
    model, *_ = _transformer()
    enc, dec = model.encoder, model.decoder
    assert isinstance(enc, core_tf.TransformerEncoder) and isinstance(
        dec, core_tf.TransformerDecoder
    )
    assert all(isinstance(b, core_tf.EncoderBlock) for b in enc.blks)
    assert all(isinstance(b, core_tf.DecoderBlock) for b in dec.blks)
    blk = dec.blks[0]
    assert isinstance(blk.attention1, LazyMultiHeadAttention)
    assert isinstance(blk.ffn, core_tf.PositionWiseFFN) and isinstance(
        blk.addnorm1, core_tf.AddNorm
    )
    assert d2l.Encoder is core_s2s.Encoder and d2l.Decoder is core_s2s.Decoder
    assert d2l.AttentionDecoder is core_s2s.AttentionDecoder
    # the book's block call updates state[2][i] (the core's BlockCache) in place
    state = [torch.zeros(2, 5, 8, dtype=torch.float64), torch.tensor([5, 3]), [None, None]]
    Y, same = blk(torch.ones(2, 3, 8, dtype=torch.float64), state)
    assert same is state and len(state[2][0]) == 3 and Y.shape == (2, 3, 8)


class BookMHA(nn.Module):  # 1.0.3's lazy layers, called in 1.0.3's order
    def __init__(self, num_hiddens):
        super().__init__()
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.LazyLinear(num_hiddens, bias=False)
                                                  for _ in range(4))  # fmt: skip

    def forward(self, q, k, v):
        return self.W_o(self.W_q(q) + self.W_k(k).mean(1, keepdim=True) + self.W_v(v).mean(1, True))


class BookBlock(nn.Module):  # the encoder block (n=1) or the decoder block (n=2)
    def __init__(self, D, F, n):
        super().__init__()
        for i in range(1, n + 1):
            self.add_module(f"attention{i}" if n > 1 else "attention", BookMHA(D))
            self.add_module(f"addnorm{i}", nn.Module())
            getattr(self, f"addnorm{i}").ln = nn.LayerNorm(D)
        self.ffn = nn.Sequential()
        self.ffn.dense1, self.ffn.dense2 = nn.LazyLinear(F), nn.LazyLinear(D)
        self.add_module(f"addnorm{n + 1}", nn.Module())
        getattr(self, f"addnorm{n + 1}").ln = nn.LayerNorm(D)

    def forward(self, X, enc=None):
        for name, m in self.named_children():
            if name.startswith("attention"):
                X = m(X, X, X) if enc is None or name == "attention1" else m(X, enc, enc)
        return self.ffn.dense2(self.ffn.dense1(X))


def test_parameters_are_created_in_the_books_order_under_a_seed():
    """Lazy layers created at the first forward in 1.0.3's order: a seeded model starts from
    the book's weights (its printed losses depend on that)."""
    X, Y, lens = torch.randint(0, 10, (2, 5)), torch.randint(0, 12, (2, 4)), torch.tensor([5, 3])

    def book(vocab, n):
        torch.manual_seed(0)
        emb, blks = nn.Embedding(vocab, 8), [BookBlock(8, 16, n) for _ in range(2)]
        dense = nn.LazyLinear(vocab) if n == 2 else None
        H = emb(X if n == 1 else Y)
        for blk in blks:
            H = blk(H, None if n == 1 else torch.zeros(2, 5, 8))
        if dense is not None:
            dense(H)
        return [emb.weight] + [p for b in blks for p in b.parameters()] + (
            [] if dense is None else list(dense.parameters()))  # fmt: skip

    torch.manual_seed(0)
    enc = _materialise(d2l.TransformerEncoder(10, 8, 16, 2, 2, 0.1).eval(), X, lens)
    for ours, ref in zip(enc.parameters(), book(10, 1), strict=True):
        torch.testing.assert_close(ours, ref, rtol=0, atol=0)
    torch.manual_seed(0)
    dec = d2l.TransformerDecoder(12, 8, 16, 2, 2, 0.1).eval()
    _materialise(dec, Y, dec.init_state(torch.zeros(2, 5, 8), lens))
    for ours, ref in zip(dec.parameters(), book(12, 2), strict=True):
        torch.testing.assert_close(ours, ref, rtol=0, atol=0)


def book_predict_step(model, batch, num_steps):  # d2l 1.0.3's loop, as published
    src, tgt, src_valid_len, _ = batch
    enc_all_outputs = model.encoder(src, src_valid_len)
    dec_state = model.decoder.init_state(enc_all_outputs, src_valid_len)
    outputs, attention_weights = [tgt[:, 0].unsqueeze(1)], []
    for _ in range(num_steps):
        Y, dec_state = model.decoder(outputs[-1], dec_state)
        outputs.append(Y.argmax(2))
        attention_weights.append(model.decoder.attention_weights)
    return torch.cat(outputs[1:], 1), attention_weights


def test_predict_step_is_the_books_loop_on_the_core_greedy_decoder():
    model, X, Y, lens = _transformer()
    model.train()  # predict_step decodes in eval mode and gives the mode back
    batch = (X, _bos(Y), lens, Y)
    preds, weights = model.predict_step(batch, "cpu", 7, True)
    assert model.training
    with torch.no_grad():
        want, want_weights = book_predict_step(model.eval(), batch, 7)
    assert torch.equal(preds, want) and len(weights) == len(want_weights) == 7  # past <eos> too
    for step, want_step in zip(weights, want_weights):
        for ours, ref in zip(step, want_step):  # [self per block], [cross per block]
            for w, w_ref in zip(ours, ref, strict=True):
                torch.testing.assert_close(w, w_ref)
    with pytest.raises(
        ValueError, match=r"tgt\[:, 0\] must hold one start token .* got \[2, 4, 5\]"
    ):
        model.predict_step((X, Y, lens, Y), "cpu", 2)
