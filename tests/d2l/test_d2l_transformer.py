"""The book's Transformer names: signatures, state_dict keys, shapes, and its section on real data."""

from __future__ import annotations

import torch

from attnkit import d2l
from attnkit.models import transformer as tf

BOOK_ENCODER_BLOCK_KEYS = [
    "attention.W_q.weight",
    "attention.W_k.weight",
    "attention.W_v.weight",
    "attention.W_o.weight",
    "addnorm1.ln.weight",
    "addnorm1.ln.bias",
    "ffn.dense1.weight",
    "ffn.dense1.bias",
    "ffn.dense2.weight",
    "ffn.dense2.bias",
    "addnorm2.ln.weight",
    "addnorm2.ln.bias",
]


def test_book_printed_shapes():
    X = torch.ones((2, 100, 24))
    valid_lens = torch.tensor([3, 2])
    encoder_blk = d2l.EncoderBlock(24, 24, 24, 24, [100, 24], 24, 48, 8, 0.5)
    encoder_blk.eval()
    assert encoder_blk(X, valid_lens).shape == (2, 100, 24)
    assert list(encoder_blk.state_dict()) == BOOK_ENCODER_BLOCK_KEYS
    assert encoder_blk.addnorm1.ln.normalized_shape == (100, 24)  # the book's 2-D norm_shape
    encoder = d2l.TransformerEncoder(200, 24, 24, 24, 24, [100, 24], 24, 48, 8, 2, 0.5)
    encoder.eval()
    assert encoder(torch.ones((2, 100), dtype=torch.long), valid_lens).shape == (2, 100, 24)
    decoder_blk = d2l.DecoderBlock(24, 24, 24, 24, [100, 24], 24, 48, 8, 0.5, 0)
    decoder_blk.eval()
    state = [encoder_blk(X, valid_lens), valid_lens, [None]]
    out, state = decoder_blk(X, state)
    assert out.shape == (2, 100, 24) and state[2][0] is not None
    ffn = d2l.PositionWiseFFN(4, 4, 8)
    ffn.eval()
    assert ffn(torch.ones((2, 3, 4)))[0].shape == (3, 8)
    add_norm = d2l.AddNorm([3, 4], 0.5)
    add_norm.eval()
    assert add_norm(torch.ones((2, 3, 4)), torch.ones((2, 3, 4))).shape == (2, 3, 4)


def test_state_dict_keys_and_attention_weight_layout():
    enc = d2l.TransformerEncoder(20, 32, 32, 32, 32, [32], 32, 64, 4, 2, 0.1)
    dec = d2l.TransformerDecoder(25, 32, 32, 32, 32, [32], 32, 64, 4, 2, 0.1)
    keys = list(enc.state_dict())
    assert keys[0] == "embedding.weight"
    assert keys[1:13] == [f"blks.block0.{k}" for k in BOOK_ENCODER_BLOCK_KEYS]
    dkeys = list(dec.state_dict())
    assert dkeys[1:5] == [f"blks.block0.attention1.W_{c}.weight" for c in "qkvo"]
    assert dkeys[-2:] == ["dense.weight", "dense.bias"]
    # the real modules keep W_q, W_k, W_v as one fused W_qkv, otherwise the same keys:
    # weights move between them, both ways
    real = tf.build_transformer(tf.TransformerConfig(), 20, 25)
    book = d2l.EncoderDecoder(enc, dec)
    fused = [k.replace("W_qkv", "W_q") for k in real.state_dict() if ".W_k" not in k]
    assert fused == [k for k in book.state_dict() if ".W_k" not in k and ".W_v" not in k]
    book.load_state_dict(real.state_dict())
    book.eval()
    real.eval()
    src, tgt = torch.randint(0, 20, (2, 10)), torch.randint(0, 25, (2, 6))
    lens = torch.tensor([10, 4])
    torch.testing.assert_close(book(src, tgt, lens)[0], real(src, tgt, lens)[0])
    twin = tf.build_transformer(tf.TransformerConfig(), 20, 25).eval()
    twin.load_state_dict(book.state_dict())  # the book's layout into the fused one
    torch.testing.assert_close(twin(src, tgt, lens)[0], real(src, tgt, lens)[0])
    # eval mode keeps the book's (B*H, Q, K) weights
    assert enc.attention_weights[0].shape == (8, 10, 10)
    assert dec.attention_weights[0][1].shape == (8, 6, 6)
    assert dec.attention_weights[1][0].shape == (8, 6, 10)
    assert (dec.attention_weights[1][0].reshape(2, 4, 6, 10)[1, :, :, 4:] == 0).all()


def test_book_transformer_section_on_real_data(fra_file):
    """A short run of the book's section (the full 200 epochs is benchmarks/book/d2l_transformer_section.py)."""
    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(64, 10)
    assert (len(src_vocab), len(tgt_vocab)) == (184, 201)
    torch.manual_seed(0)
    encoder = d2l.TransformerEncoder(len(src_vocab), 32, 32, 32, 32, [32], 32, 64, 4, 2, 0.1)
    decoder = d2l.TransformerDecoder(len(tgt_vocab), 32, 32, 32, 32, [32], 32, 64, 4, 2, 0.1)
    net = d2l.EncoderDecoder(encoder, decoder)
    d2l.train_seq2seq(net, train_iter, 0.005, 2, tgt_vocab, "cpu")
    translation, seq = d2l.predict_seq2seq(net, "go .", src_vocab, tgt_vocab, 10, "cpu", True)
    assert isinstance(translation, str) and len(seq) >= 1
    self_w, cross_w = seq[0]
    assert cross_w[0].shape == (4, 1, 10) and self_w[0].shape == (4, 1, 1)
