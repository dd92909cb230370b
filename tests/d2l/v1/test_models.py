"""Models of d2l 1.0: state_dict keys as 1.0.3's, loading both ways, float64 references of the
book's math, notebook-style subclassing, predict_step with attention weights."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnkit.d2l import v1 as d2l

torch.set_default_dtype(torch.float32)


def w_keys(prefix, bias=False):
    keys = [f"{prefix}.weight"]
    return [*keys, f"{prefix}.bias"] if bias else keys


def mha_keys(p, bias=False):
    return [k for n in ("W_q", "W_k", "W_v", "W_o") for k in w_keys(f"{p}{n}", bias)]


def ffn_keys(p):
    return w_keys(f"{p}ffn.dense1", True) + w_keys(f"{p}ffn.dense2", True)


def ln_keys(p):
    return w_keys(f"{p}.ln", True)


# The key lists of d2l 1.0.3 (read from its torch.py and the chapters' notebooks).
ENCODER_KEYS = ["embedding.weight"] + [
    k
    for i in range(2)
    for k in mha_keys(f"blks.block{i}.attention.") + ln_keys(f"blks.block{i}.addnorm1")
    + ffn_keys(f"blks.block{i}.") + ln_keys(f"blks.block{i}.addnorm2")
]  # fmt: skip
DECODER_KEYS = ["embedding.weight"] + [
    k
    for i in range(2)
    for k in mha_keys(f"blks.block{i}.attention1.") + ln_keys(f"blks.block{i}.addnorm1")
    + mha_keys(f"blks.block{i}.attention2.") + ln_keys(f"blks.block{i}.addnorm2")
    + ffn_keys(f"blks.block{i}.") + ln_keys(f"blks.block{i}.addnorm3")
] + ["dense.weight", "dense.bias"]  # fmt: skip
GRU2 = [f"{w}_{x}_l{i}" for i in range(2) for w, x in
        (("weight", "ih"), ("weight", "hh"), ("bias", "ih"), ("bias", "hh"))]  # fmt: skip


def _materialise(model, *inputs):
    with torch.no_grad():
        model(*inputs)
    return model


def test_state_dict_keys_are_1_0_3s():
    torch.manual_seed(0)
    X, lens = torch.randint(0, 10, (2, 5)), torch.tensor([5, 3])
    enc = _materialise(d2l.TransformerEncoder(10, 8, 16, 2, 2, 0.0), X, lens)
    assert list(enc.state_dict()) == ENCODER_KEYS
    dec = d2l.TransformerDecoder(12, 8, 16, 2, 2, 0.0)
    _materialise(dec, X, dec.init_state(enc(X, lens), lens))
    assert list(dec.state_dict()) == DECODER_KEYS
    s2s = d2l.Seq2Seq(enc, dec, tgt_pad=0, lr=0.1)
    assert list(s2s.state_dict()) == [f"encoder.{k}" for k in ENCODER_KEYS] + [
        f"decoder.{k}" for k in DECODER_KEYS
    ]
    mha = _materialise(
        d2l.MultiHeadAttention(8, 2, 0.0, bias=True), *[torch.ones(1, 2, 4)] * 3, None
    )
    assert list(mha.state_dict()) == mha_keys("", bias=True)
    add = _materialise(d2l.AdditiveAttention(4, 0.0), *[torch.ones(1, 2, 3)] * 3, None)
    assert list(add.state_dict()) == ["W_k.weight", "W_q.weight", "w_v.weight"]
    genc = d2l.Seq2SeqEncoder(10, 4, 6, 2)
    assert list(genc.state_dict()) == ["embedding.weight"] + [f"rnn.rnn.{k}" for k in GRU2]
    gdec = d2l.Seq2SeqDecoder(12, 4, 6, 2)
    _materialise(gdec, X, gdec.init_state(genc(X)))
    assert list(gdec.state_dict()) == (
        ["embedding.weight"] + [f"rnn.rnn.{k}" for k in GRU2] + ["dense.weight", "dense.bias"]
    )
    adec = d2l.Seq2SeqAttentionDecoder(12, 4, 6, 2)
    _materialise(adec, X, adec.init_state(genc(X), lens))
    assert list(adec.state_dict()) == ["attention.W_k.weight", "attention.W_q.weight",
        "attention.w_v.weight", "embedding.weight", *[f"rnn.{k}" for k in GRU2],
        "dense.weight", "dense.bias"]  # fmt: skip
    lm = d2l.RNNLMScratch(d2l.RNNScratch(5, 4), 5)
    assert list(lm.state_dict()) == ["W_hq", "b_q", "rnn.W_xh", "rnn.W_hh", "rnn.b_h"]
    lm = _materialise(d2l.RNNLM(d2l.RNN(5, 4), 5), torch.zeros(2, 3, dtype=torch.long))
    assert list(lm.state_dict()) == [
        "rnn.rnn.weight_ih_l0", "rnn.rnn.weight_hh_l0", "rnn.rnn.bias_ih_l0",
        "rnn.rnn.bias_hh_l0", "linear.weight", "linear.bias",
    ]  # fmt: skip
    assert list(d2l.GRUScratch(3, 4).state_dict()) == [
        f"{w}{g}" for g in "zrh" for w in ("W_x", "W_h", "b_")
    ]
    assert list(d2l.LSTMScratch(3, 4).state_dict()) == [
        f"{w}{g}" for g in "ifoc" for w in ("W_x", "W_h", "b_")
    ]
    assert list(d2l.StackedRNNScratch(3, 4, 2).state_dict()) == [
        f"rnns.{i}.{k}" for i in range(2) for k in ("W_xh", "W_hh", "b_h")
    ]
    assert list(d2l.BiGRU(3, 4).state_dict())[-1] == "rnn.bias_hh_l0_reverse"


def test_lazy_model_loads_only_after_a_first_forward_as_in_the_book():
    torch.manual_seed(0)
    X, lens = torch.randint(0, 10, (2, 5)), torch.tensor([5, 3])
    src = _materialise(d2l.TransformerEncoder(10, 8, 16, 2, 2, 0.0), X, lens)
    fresh = d2l.TransformerEncoder(10, 8, 16, 2, 2, 0.0)
    _materialise(fresh, X, lens)
    fresh.load_state_dict(src.state_dict())
    torch.testing.assert_close(fresh.eval()(X, lens), src.eval()(X, lens))


# ---------------------------------------------------------------- float64 references (book math)


def ref_masked_softmax(X, valid_lens):  # 1.0's: fill -1e6, repeat lengths per query
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    lens = (
        torch.repeat_interleave(valid_lens, shape[1])
        if valid_lens.dim() == 1
        else valid_lens.reshape(-1)
    )
    flat = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1])[None, :] < lens[:, None]
    return F.softmax(flat.masked_fill(~mask, -1e6).reshape(shape), dim=-1)


def ref_mha(sd, p, q, k, v, valid_lens, H):
    lin = lambda x, n: x @ sd[f"{p}{n}.weight"].T  # noqa: E731

    def split(X):
        X = X.reshape(X.shape[0], X.shape[1], H, -1).permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    Q, K, V = split(lin(q, "W_q")), split(lin(k, "W_k")), split(lin(v, "W_v"))
    if valid_lens is not None:
        valid_lens = torch.repeat_interleave(valid_lens, H, dim=0)
    w = ref_masked_softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), valid_lens)
    out = (w @ V).reshape(-1, H, q.shape[1], V.shape[-1]).permute(0, 2, 1, 3)
    return lin(out.reshape(q.shape[0], q.shape[1], -1), "W_o"), w


def ref_ln(sd, p, X):
    return F.layer_norm(X, X.shape[-1:], sd[f"{p}.ln.weight"], sd[f"{p}.ln.bias"])


def ref_ffn(sd, p, X):
    h = torch.relu(X @ sd[f"{p}ffn.dense1.weight"].T + sd[f"{p}ffn.dense1.bias"])
    return h @ sd[f"{p}ffn.dense2.weight"].T + sd[f"{p}ffn.dense2.bias"]


def ref_positions(T, D):
    X = torch.arange(T, dtype=torch.float64).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, D, 2, dtype=torch.float64) / D
    )
    P = torch.zeros(T, D, dtype=torch.float64)
    P[:, 0::2], P[:, 1::2] = torch.sin(X), torch.cos(X)
    return P


def ref_encoder(sd, X, lens, D, H, n):
    X = sd["embedding.weight"][X] * math.sqrt(D) + ref_positions(X.shape[1], D)
    weights = []
    for i in range(n):
        b = f"blks.block{i}."
        att, w = ref_mha(sd, b + "attention.", X, X, X, lens, H)
        Y = ref_ln(sd, b + "addnorm1", X + att)
        X = ref_ln(sd, b + "addnorm2", Y + ref_ffn(sd, b, Y))
        weights.append(w)
    return X, weights


def ref_decoder(sd, X, enc, lens, D, H, n):
    """The notebook's decoder in training mode (causal by lengths), dropout 0."""
    B, T = X.shape
    X = sd["embedding.weight"][X] * math.sqrt(D) + ref_positions(T, D)
    causal = torch.arange(1, T + 1).repeat(B, 1)
    for i in range(n):
        b = f"blks.block{i}."
        Y = ref_ln(sd, b + "addnorm1", X + ref_mha(sd, b + "attention1.", X, X, X, causal, H)[0])
        Z = ref_ln(sd, b + "addnorm2", Y + ref_mha(sd, b + "attention2.", Y, enc, enc, lens, H)[0])
        X = ref_ln(sd, b + "addnorm3", Z + ref_ffn(sd, b, Z))
    return X @ sd["dense.weight"].T + sd["dense.bias"]


def _transformer(dtype=torch.float64):
    torch.manual_seed(1)
    X, Y = torch.randint(0, 10, (3, 6)), torch.randint(0, 12, (3, 5))
    lens = torch.tensor([5, 2, 4])  # the longest is 5 < 6: training trims the source to 5
    enc = d2l.TransformerEncoder(10, 8, 16, 2, 2, 0.0)
    dec = d2l.TransformerDecoder(12, 8, 16, 2, 2, 0.0)
    model = d2l.Seq2Seq(enc, dec, tgt_pad=0, lr=0.1)
    _materialise(model, X, Y, lens)
    return model.to(dtype), X, Y, lens


@pytest.mark.parametrize("training", [True, False])
def test_transformer_equals_the_books_math_in_float64(training):
    model, X, Y, lens = _transformer()
    model.train(training)
    sd = {k: v.detach() for k, v in model.state_dict().items()}  # ours -> the book's layout
    enc_sd = {k[8:]: v for k, v in sd.items() if k.startswith("encoder.")}
    dec_sd = {k[8:]: v for k, v in sd.items() if k.startswith("decoder.")}
    enc_ref, w_ref = ref_encoder(enc_sd, X, lens, 8, 2, 2)
    with torch.no_grad():
        torch.testing.assert_close(model.encoder(X, lens), enc_ref)
        seen = []
        hook = model.encoder.register_forward_hook(lambda m, args, out: seen.append(args[0].shape))
        out = model(X, Y, lens)  # training mode: the source is trimmed to its longest (5)
        hook.remove()
    assert seen == [(3, 5) if training else (3, 6)]
    torch.testing.assert_close(out, ref_decoder(dec_sd, Y, enc_ref, lens, 8, 2, 2))
    if not training:  # eval keeps the weights, (B*H, T, T) as the book's
        for ours, ref in zip(model.encoder.attention_weights, w_ref):
            torch.testing.assert_close(ours, ref)


def test_state_dict_loads_both_ways_with_equal_outputs():
    model, X, Y, lens = _transformer()
    model.eval()
    # the book's layout -> ours: random tensors under 1.0.3's keys
    book_sd = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
    model.load_state_dict(book_sd)
    enc_sd = {k[8:]: v for k, v in book_sd.items() if k.startswith("encoder.")}
    dec_sd = {k[8:]: v for k, v in book_sd.items() if k.startswith("decoder.")}
    enc_ref, _ = ref_encoder(enc_sd, X, lens, 8, 2, 2)
    with torch.no_grad():
        torch.testing.assert_close(
            model(X, Y, lens), ref_decoder(dec_sd, Y, enc_ref, lens, 8, 2, 2)
        )
    # ours -> a fresh model (as the book's would load it): same outputs
    other, *_ = _transformer()
    other.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(other.eval()(X, Y, lens), model(X, Y, lens))


def test_step_by_step_decoding_gives_true_positions_and_is_causal():
    """The fixed quirks: decoding one token at a time = the causal full pass (eval mode)."""
    model, X, Y, lens = _transformer()
    model.eval()
    with torch.no_grad():
        full = model(X, Y, lens)
        state = model.decoder.init_state(model.encoder(X, lens), lens)
        steps = [model.decoder(Y[:, t : t + 1], state)[0] for t in range(Y.shape[1])]
    torch.testing.assert_close(torch.cat(steps, 1), full)


def test_fully_masked_rows_give_zero_weights_never_nan():
    X = torch.randn(2, 3, 4)
    w = d2l.masked_softmax(X, torch.tensor([0, 2]))
    assert torch.equal(w[0], torch.zeros(3, 4))
    torch.testing.assert_close(w[1].sum(-1), torch.ones(3))
    torch.testing.assert_close(w[1], ref_masked_softmax(X, torch.tensor([0, 2]))[1])
    mha = d2l.MultiHeadAttention(8, 2, 0.0).eval()
    out = mha(
        torch.randn(2, 3, 5), torch.randn(2, 4, 5), torch.randn(2, 4, 5), torch.tensor([0, 4])
    )
    assert not out.isnan().any() and torch.equal(
        mha.attention.attention_weights[:2], torch.zeros(2, 3, 4)
    )


# ---------------------------------------------------------------- notebook-style subclassing


class NotebookSeq2SeqDecoder(d2l.Decoder):  # the seq2seq notebook's class, as written there
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = d2l.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout)
        self.dense = nn.LazyLinear(vocab_size)
        self.apply(d2l.init_seq2seq)

    def init_state(self, enc_all_outputs, *args):
        return enc_all_outputs

    def forward(self, X, state):
        embs = self.embedding(X.t().type(torch.int32))
        enc_output, hidden_state = state
        context = enc_output[-1]
        context = context.repeat(embs.shape[0], 1, 1)
        embs_and_context = torch.cat((embs, context), -1)
        outputs, hidden_state = self.rnn(embs_and_context, hidden_state)
        outputs = self.dense(outputs).swapaxes(0, 1)
        return outputs, [enc_output, hidden_state]


class MaskedSeq2Seq(d2l.Seq2Seq):
    pass


@d2l.add_to_class(MaskedSeq2Seq)  # the notebook's masked loss, added after the fact
def loss(self, Y_hat, Y):
    l = super(MaskedSeq2Seq, self).loss(Y_hat, Y, averaged=False)  # noqa: E741
    mask = (Y.reshape(-1) != self.tgt_pad).type(torch.float32)
    return (l * mask).sum() / mask.sum()


def test_notebook_seq2seq_trains_on_the_bases_and_equals_the_shipped_decoder(fra_root):
    torch.manual_seed(0)
    data = d2l.MTFraEng(batch_size=4, num_steps=5, num_train=16, num_val=4, root=str(fra_root))
    encoder = d2l.Seq2SeqEncoder(len(data.src_vocab), 8, 16, 2, 0.1)
    decoder = NotebookSeq2SeqDecoder(len(data.tgt_vocab), 8, 16, 2, 0.1)
    model = MaskedSeq2Seq(encoder, decoder, tgt_pad=data.tgt_vocab["<pad>"], lr=0.005)
    trainer = d2l.Trainer(max_epochs=3, gradient_clip_val=1)
    trainer.fit(model, data)
    losses = trainer.engine.history["train_loss"]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert "val_loss" in model.board.data
    shipped = d2l.Seq2SeqDecoder(len(data.tgt_vocab), 8, 16, 2, 0.1)
    src, tgt, lens, _ = next(iter(data.val_dataloader()))
    _materialise(shipped, tgt, shipped.init_state(encoder(src, lens)))
    shipped.load_state_dict(decoder.state_dict())
    model.eval()
    shipped.eval()
    with torch.no_grad():
        state = encoder(src, lens)
        torch.testing.assert_close(shipped(tgt, state)[0], decoder(tgt, state)[0])


def test_predict_step_with_attention_weights(fra_root):
    torch.manual_seed(0)
    data = d2l.MTFraEng(batch_size=4, num_steps=5, num_train=16, num_val=4, root=str(fra_root))
    encoder = d2l.Seq2SeqEncoder(len(data.src_vocab), 8, 16, 2)
    decoder = d2l.Seq2SeqAttentionDecoder(len(data.tgt_vocab), 8, 16, 2)
    model = d2l.Seq2Seq(encoder, decoder, tgt_pad=data.tgt_vocab["<pad>"], lr=0.005)
    d2l.Trainer(max_epochs=1, gradient_clip_val=1).fit(model, data)
    batch = data.build(["go .", "i lost ."], ["va !", "j'ai perdu ."])
    preds, weights = model.predict_step(batch, d2l.cpu(), data.num_steps, True)
    assert preds.shape == (2, 5) and len(weights) == 5
    assert all(len(w) == 1 and w[0].shape == (2, 1, 5) for w in weights)
    # padding beyond each source length gets zero weight
    assert torch.equal(weights[0][0][0, 0, 3:], torch.zeros(2))
    _, none = model.predict_step(batch, d2l.cpu(), 3)
    assert none == []
    # the Transformer: [self per block, cross per block] per step, as the book's cells read
    model, X, Y, lens = _transformer(torch.float32)
    model.eval()
    preds, weights = model.predict_step((X, _bos(Y), lens, Y), d2l.cpu(), 4, True)
    assert preds.shape == (3, 4) and len(weights) == 4
    assert weights[2][0][1].shape == (6, 1, 3) and weights[2][1][0].shape == (6, 1, 6)
    assert torch.cat(model.encoder.attention_weights, 0).shape == (2 * 3 * 2, 6, 6)


def _bos(Y, bos=1):
    """Y with the one start token every row of a predict_step batch begins with."""
    Y = Y.clone()
    Y[:, 0] = bos
    return Y


# ---------------------------------------------------------------- values and bad input


def test_bleu_as_1_0():
    assert d2l.bleu("va !", "va !", k=2) == 1.0
    assert d2l.bleu("", "va !", k=2) == 0.0
    # one-token prediction: 1.0 stops at n = len(pred) (0.17 divided by zero)
    assert d2l.bleu("va", "va !", k=2) == pytest.approx(math.exp(1 - 2 / 1))
    p1, p2 = 3 / 3, 1 / 2
    want = math.exp(1 - 5 / 3) * p1**0.5 * p2**0.25
    assert d2l.bleu("je suis .", "je suis chez moi .", k=2) == pytest.approx(want)


def test_nadaraya_watson_kernels():
    x_train = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    y_train = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    x_val = torch.tensor([1.0, 10.0], dtype=torch.float64)
    y_hat, w = d2l.nadaraya_watson(x_train, y_train, x_val, d2l.gaussian)
    g = torch.exp(-((x_train - 1) ** 2) / 2)
    torch.testing.assert_close(w[:, 0], g / g.sum())
    y_hat, w = d2l.nadaraya_watson(x_train, y_train, x_val, d2l.boxcar)
    assert y_hat.tolist() == [2.0, 0.0] and not w.isnan().any()  # the book: NaN for 10.0
    y_hat, _ = d2l.nadaraya_watson(x_train, y_train, x_val, d2l.constant)
    assert y_hat.tolist() == [2.0, 2.0]
    assert d2l.epanechikov is d2l.epanechnikov
    with pytest.raises(ValueError, match="same length, got 3 and 2"):
        d2l.nadaraya_watson(x_train, y_train[:2], x_val, d2l.gaussian)


_M = nn.Linear(1, 1)  # a stand-in encoder/decoder for Seq2Seq's own checks


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: d2l.MultiHeadAttention(10, 3, 0.1), ValueError,
         "num_hiddens must be divisible by num_heads, got num_hiddens=10 and num_heads=3"),
        (lambda: d2l.MultiHeadAttention(8, 0, 0.1), ValueError, "num_heads must be a positive int, got 0"),
        (lambda: d2l.MultiHeadAttention(8, "2", 0.1), TypeError,
         r"num_heads must be a positive int, got '2' \(str\)"),
        (lambda: d2l.MultiHeadAttention(8.0, 2, 0.1), TypeError,
         r"num_hiddens must be a positive int, got 8\.0 \(float\)"),
        (lambda: d2l.MultiHeadAttention(8, 2, 1.0), ValueError, r"dropout must be in \[0, 1\), got 1\.0"),
        (lambda: d2l.MultiHeadAttention(8, 2, None), TypeError,
         r"dropout must be a float in \[0, 1\), got None \(NoneType\)"),
        (lambda: d2l.DotProductAttention(-0.1), ValueError, r"dropout must be in \[0, 1\), got -0\.1"),
        (lambda: d2l.DotProductAttention("0.1"), TypeError,
         r"dropout must be a float in \[0, 1\), got '0\.1' \(str\)"),
        (lambda: d2l.AdditiveAttention(-1, 0.1), ValueError, "num_hiddens must be a positive int, got -1"),
        (lambda: d2l.AdditiveAttention(True, 0.1), TypeError,
         r"num_hiddens must be a positive int, got True \(bool\)"),
        (lambda: d2l.AdditiveAttention(4, 1), ValueError, r"dropout must be in \[0, 1\), got 1"),
        (lambda: d2l.AdditiveAttention(4, False), TypeError,
         r"dropout must be a float in \[0, 1\), got False \(bool\)"),
        (lambda: d2l.Seq2SeqAttentionDecoder(0, 8, 16, 2), ValueError, "vocab_size must be a positive int, got 0"),
        (lambda: d2l.Seq2SeqAttentionDecoder(10.0, 8, 16, 2), TypeError,
         r"vocab_size must be a positive int, got 10\.0 \(float\)"),
        (lambda: d2l.Seq2SeqAttentionDecoder(10, 8, 16, 0), ValueError, "num_layers must be a positive int, got 0"),
        (lambda: d2l.Seq2SeqAttentionDecoder(10, 8, 16, "2"), TypeError,
         r"num_layers must be a positive int, got '2' \(str\)"),
        (lambda: d2l.TransformerEncoder(10, 8, 16, 2, 2, 1.5), ValueError, r"dropout must be in \[0, 1\), got 1.5"),
        (lambda: d2l.TransformerDecoder(10, 8, 0, 2, 2, 0.1), ValueError,
         "ffn_num_hiddens must be a positive int, got 0"),
        (lambda: d2l.TransformerDecoder(10, 8, 16, 2, 2.0, 0.1), TypeError,
         r"num_blks must be a positive int, got 2\.0 \(float\)"),
        (lambda: d2l.TransformerDecoderBlock(8, 16, 2, 0.1, -1), ValueError, "i must be a non-negative int, got -1"),
        (lambda: d2l.TransformerDecoderBlock(8, 16, 2, 0.1, "0"), TypeError,
         r"i must be a non-negative int, got '0' \(str\)"),
        (lambda: d2l.RNNScratch(0, 4), ValueError, "num_inputs must be a positive int, got 0"),
        (lambda: d2l.RNNScratch(3.0, 4), TypeError, r"num_inputs must be a positive int, got 3\.0 \(float\)"),
        (lambda: d2l.GRUScratch(3, -4), ValueError, "num_hiddens must be a positive int, got -4"),
        (lambda: d2l.LSTMScratch(3, None), TypeError, r"num_hiddens must be a positive int, got None"),
        (lambda: d2l.RNNScratch(3, 4, sigma=-0.01), ValueError, r"sigma must be a finite number >= 0, got -0\.01"),
        (lambda: d2l.RNNScratch(3, 4, sigma="0.01"), TypeError,
         r"sigma must be a finite number >= 0, got '0\.01' \(str\)"),
        (lambda: d2l.StackedRNNScratch(3, 4, 0), ValueError, "num_layers must be a positive int, got 0"),
        (lambda: d2l.StackedRNNScratch(3, 4, 2.0), TypeError, r"num_layers must be a positive int, got 2\.0"),
        (lambda: d2l.RNNLMScratch(d2l.RNNScratch(3, 4), 0), ValueError, "vocab_size must be a positive int, got 0"),
        (lambda: d2l.RNNLMScratch(d2l.RNNScratch(3, 4), "3"), TypeError,
         r"vocab_size must be a positive int, got '3' \(str\)"),
        (lambda: d2l.RNN(3, 0), ValueError, "num_hiddens must be a positive int, got 0"),
        (lambda: d2l.RNN(True, 4), TypeError, r"num_inputs must be a positive int, got True \(bool\)"),
        (lambda: d2l.LSTM(0, 4), ValueError, "num_inputs must be a positive int, got 0"),
        (lambda: d2l.LSTM(3, 4.5), TypeError, r"num_hiddens must be a positive int, got 4\.5"),
        (lambda: d2l.BiGRU(3, 0), ValueError, "num_hiddens must be a positive int, got 0"),
        (lambda: d2l.BiGRU("3", 4), TypeError, r"num_inputs must be a positive int, got '3' \(str\)"),
        (lambda: d2l.GRU(3, 4, 0), ValueError, "num_layers must be a positive int, got 0"),
        (lambda: d2l.GRU(3, 4, 1.0), TypeError, r"num_layers must be a positive int, got 1\.0 \(float\)"),
        (lambda: d2l.GRU(3, 4, 2, dropout=1.5), ValueError, r"dropout must be in \[0, 1\), got 1\.5"),
        (lambda: d2l.GRU(3, 4, 2, dropout="0"), TypeError, r"dropout must be a float in \[0, 1\), got '0'"),
        (lambda: d2l.Seq2SeqEncoder(0, 8, 16, 2), ValueError, "vocab_size must be a positive int, got 0"),
        (lambda: d2l.Seq2SeqEncoder(10, 8.0, 16, 2), TypeError, r"embed_size must be a positive int, got 8\.0"),
        (lambda: d2l.Seq2SeqDecoder(10, -8, 16, 2), ValueError, "embed_size must be a positive int, got -8"),
        (lambda: d2l.Seq2SeqDecoder([10], 8, 16, 2), TypeError, r"vocab_size must be a positive int, got \[10\]"),
        (lambda: d2l.Seq2Seq(_M, _M, tgt_pad=-1, lr=0.1), ValueError, "tgt_pad must be a non-negative int, got -1"),
        (lambda: d2l.Seq2Seq(_M, _M, tgt_pad=0.0, lr=0.1), TypeError,
         r"tgt_pad must be a non-negative int, got 0\.0 \(float\)"),
        (lambda: d2l.Seq2Seq(_M, _M, tgt_pad=0, lr=0), ValueError, "lr must be a positive number, got 0"),
        (lambda: d2l.Seq2Seq(_M, _M, tgt_pad=0, lr="0.1"), TypeError,
         r"lr must be a positive number, got '0\.1' \(str\)"),
        (lambda: d2l.EncoderDecoder(1, 2), TypeError, "encoder and decoder must be nn.Modules, got int and int"),
    ],
)  # fmt: skip
def test_constructor_errors_name_the_argument(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_forward_errors_name_the_argument():
    model, X, Y, lens = _transformer(torch.float32)
    with pytest.raises(
        ValueError, match=r"valid_lens must lie in \[0, 6\].*got values in \[2, 7\]"
    ):
        model.encoder(X, torch.tensor([7, 2, 4]))
    with pytest.raises(ValueError, match=r"valid_lens must have shape \(B,\) = \(3,\)"):
        model.encoder(X, torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="valid_lens must have an integer dtype"):
        model.encoder(X, lens.float())
    with pytest.raises(
        TypeError,
        match=r"X must be integer token ids \(batch_size, num_steps\), got torch\.float32",
    ):
        model.encoder(X.float(), lens)
    with pytest.raises(
        ValueError, match=r"X must be integer token ids \(batch_size, num_steps\), got shape \(3,\)"
    ):
        model.encoder(X[:, 0], lens)
    with pytest.raises(ValueError, match="num_steps must be a positive int, got 0"):
        model.predict_step((X, Y, lens, Y), "cpu", 0)
    with pytest.raises(TypeError, match=r"num_steps must be a positive int, got 2\.5"):
        model.predict_step((X, Y, lens, Y), "cpu", 2.5)
    with pytest.raises(
        ValueError, match=r"src_valid_len must have shape \(B,\) = \(3,\), got \(2,\)"
    ):
        model.predict_step((X, Y, lens[:2], Y), "cpu", 2)
    mha = d2l.MultiHeadAttention(8, 2, 0.0)
    with pytest.raises(ValueError, match=r"queries must be 3-D \(B, T, D\), got shape \(3, 4\)"):
        mha(torch.ones(3, 4), torch.ones(3, 4, 2), torch.ones(3, 4, 2), None)
    with pytest.raises(TypeError, match=r"keys must be a floating-point tensor, got torch\.int64"):
        mha(torch.ones(3, 2, 2), torch.ones(3, 4, 2, dtype=torch.long), torch.ones(3, 4, 2), None)
    additive = d2l.AdditiveAttention(4, 0.0)
    with pytest.raises(TypeError, match=r"values must be a torch\.Tensor, got list"):
        additive(torch.ones(3, 2, 2), torch.ones(3, 4, 2), [[1.0]], None)
    with pytest.raises(ValueError, match=r"keys must be 3-D \(B, T, D\), got shape \(3, 4\)"):
        additive(torch.ones(3, 2, 2), torch.ones(3, 4), torch.ones(3, 4, 2), None)
    with pytest.raises(
        ValueError, match="keys and values must have the same length K, got 4 and 5"
    ):
        mha(torch.ones(3, 2, 2), torch.ones(3, 4, 2), torch.ones(3, 5, 2), None)
    with pytest.raises(ValueError, match=r"inputs must be \(num_steps, batch_size, num_inputs=3\)"):
        d2l.RNNScratch(3, 4)(torch.ones(2, 5, 4))
    encoder = d2l.Seq2SeqEncoder(10, 8, 16, 2)
    with pytest.raises(
        TypeError,
        match=r"X must be an integer tensor \(batch_size, num_steps\), got torch\.float32",
    ):
        encoder(torch.zeros(2, 3))
    with pytest.raises(
        TypeError, match=r"X must be an integer tensor \(batch_size, num_steps\), got list"
    ):
        encoder([[1, 2]])
    with pytest.raises(
        ValueError, match=r"X must be an integer tensor \(batch_size, num_steps\), got shape \(2,\)"
    ):
        encoder(torch.zeros(2, dtype=torch.long))


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("", 3), ValueError, "prefix must be a non-empty str, got ''"),
        ((["a"], 3), TypeError, r"prefix must be a non-empty str, got \['a'\] \(list\)"),
        (("ab", -1), ValueError, "num_preds must be a non-negative int, got -1"),
        (("ab", 3.0), TypeError, r"num_preds must be a non-negative int, got 3\.0 \(float\)"),
    ],
)
def test_predict_checks_its_arguments(args, error, match):
    vocab = d2l.Vocab(list("abcdefghijklmn"))
    model = d2l.RNNLMScratch(d2l.RNNScratch(len(vocab), 4), len(vocab))
    with pytest.raises(error, match=match):
        model.predict(*args, vocab)


@pytest.mark.parametrize(
    ("k", "error", "match"),
    [
        (0, ValueError, "k must be a positive int, got 0"),
        (2.0, TypeError, r"k must be a positive int, got 2\.0 \(float\)"),
        (True, TypeError, r"k must be a positive int, got True \(bool\)"),
    ],
)
def test_bleu_checks_k(k, error, match):
    with pytest.raises(error, match=match):
        d2l.bleu("je suis .", "je suis chez moi .", k)


def test_rnn_scratch_models_and_lm_predict():
    torch.manual_seed(0)
    rnn = d2l.RNNScratch(num_inputs=16, num_hiddens=32)
    outputs, state = rnn(torch.ones((100, 4, 16)))
    d2l.check_len(outputs, 100)
    d2l.check_shape(outputs[0], (4, 32))
    d2l.check_shape(state, (4, 32))
    model = d2l.RNNLMScratch(rnn, 16)
    d2l.check_shape(model(torch.ones((4, 100), dtype=torch.int64)), (4, 100, 16))
    vocab = d2l.Vocab(list("abcdefghijklmn"))
    assert len(model.predict("ab", 5, vocab)) == 7
    outs, (H, C) = d2l.LSTMScratch(3, 4)(torch.ones(5, 2, 3))
    assert len(outs) == 5 and H.shape == C.shape == (2, 4)
    outs, Hs = d2l.StackedRNNScratch(3, 4, 2)(torch.ones(5, 2, 3))
    assert outs.shape == (5, 2, 4) and len(Hs) == 2
    outs, _ = d2l.BiRNNScratch(3, 4)(torch.ones(5, 2, 3))
    assert outs[0].shape == (2, 8)
    with pytest.raises(AssertionError, match="list's length 3 != expected length 2"):
        d2l.check_len([1, 2, 3], 2)


class NotebookDecoderBlock(nn.Module):  # the Transformer notebook's block, on attnkit's bases
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i):
        super().__init__()
        self.i = i
        self.attention1 = d2l.MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm1 = d2l.AddNorm(num_hiddens, dropout)
        self.attention2 = d2l.MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm2 = d2l.AddNorm(num_hiddens, dropout)
        self.ffn = d2l.PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm3 = d2l.AddNorm(num_hiddens, dropout)

    def forward(self, X, state):
        enc_outputs, enc_valid_lens = state[0], state[1]
        cached = state[2][self.i]
        key_values = X if cached is None else torch.cat((cached, X), dim=1)
        state[2][self.i] = key_values
        if self.training:
            batch_size, num_steps, _ = X.shape
            dec_valid_lens = torch.arange(1, num_steps + 1).repeat(batch_size, 1)
        else:
            dec_valid_lens = None
        Y = self.addnorm1(X, self.attention1(X, key_values, key_values, dec_valid_lens))
        Z = self.addnorm2(Y, self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens))
        return self.addnorm3(Z, self.ffn(Z)), state


class NotebookTransformerDecoder(d2l.AttentionDecoder):
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout):
        super().__init__()
        self.num_hiddens, self.num_blks = num_hiddens, num_blks
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = d2l.PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add_module("block" + str(i), NotebookDecoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout, i))  # fmt: skip
        self.dense = nn.LazyLinear(vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens):
        return [enc_outputs, enc_valid_lens, [None] * self.num_blks]

    def forward(self, X, state):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        self._attention_weights = [[None] * len(self.blks) for _ in range(2)]
        for i, blk in enumerate(self.blks):
            X, state = blk(X, state)
            self._attention_weights[0][i] = blk.attention1.attention.attention_weights
            self._attention_weights[1][i] = blk.attention2.attention.attention_weights
        return self.dense(X), state

    @property
    def attention_weights(self):
        return self._attention_weights


def test_notebook_transformer_decoder_on_the_bases_equals_the_shipped_one():
    model, X, Y, lens = _transformer(torch.float64)
    notebook = NotebookTransformerDecoder(12, 8, 16, 2, 2, 0.0).double()
    with torch.no_grad():
        enc = model.encoder(X, lens)
        notebook(Y, notebook.init_state(enc, lens))  # materialise, then load 1.0.3's keys
        notebook.load_state_dict(model.decoder.state_dict())
        shipped = model.decoder(Y, model.decoder.init_state(enc, lens))[0]
        torch.testing.assert_close(notebook(Y, notebook.init_state(enc, lens))[0], shipped)
        trained = d2l.Seq2Seq(model.encoder, notebook, tgt_pad=0, lr=0.1)
        preds, weights = trained.eval().predict_step((X, _bos(Y), lens, Y), "cpu", 3, True)
    assert preds.shape == (3, 3) and weights[1][0][0].shape == (6, 1, 2)


def test_rnn_chapters_train_on_the_time_machine(monkeypatch, timemachine_file):
    monkeypatch.setenv("ATTNKIT_TIMEMACHINE", str(timemachine_file))
    torch.manual_seed(0)
    data = d2l.TimeMachine(batch_size=8, num_steps=8, num_train=64, num_val=16)
    rnn = d2l.RNNScratch(num_inputs=len(data.vocab), num_hiddens=16)
    model = d2l.RNNLMScratch(rnn, vocab_size=len(data.vocab), lr=1)
    trainer = d2l.Trainer(max_epochs=2, gradient_clip_val=1, num_gpus=1)
    trainer.fit(model, data)
    assert "train_ppl" in model.board.data and "val_ppl" in model.board.data
    out = model.predict("it has", 20, data.vocab, d2l.try_gpu())
    assert len(out) == 26 and out.startswith("it has")
    gru = d2l.GRU(num_inputs=len(data.vocab), num_hiddens=16, num_layers=2)
    model = d2l.RNNLM(gru, vocab_size=len(data.vocab), lr=2)
    d2l.Trainer(max_epochs=1, gradient_clip_val=1).fit(model, data)
    assert list(model.state_dict())[-2:] == ["linear.weight", "linear.bias"]
    assert len(model.predict("the", 5, data.vocab)) == 8
