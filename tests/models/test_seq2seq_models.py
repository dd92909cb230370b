"""GRU seq2seq and Bahdanau models: the book's checks, the generic interface, the registry."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnkit.models.registry import (
    Seq2SeqConfig,
    arch_config,
    available_archs,
    build_model,
    parse_config_overrides,
    register_arch,
)
from attnkit.models.seq2seq import (
    EncoderDecoder,
    Seq2SeqAttentionDecoder,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
)


def _book_models():
    encoder = Seq2SeqEncoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2).eval()
    X = torch.zeros((4, 7), dtype=torch.long)
    return encoder, X


def test_encoder_and_decoder_shapes_as_the_book():
    encoder, X = _book_models()
    output, state = encoder(X)
    assert output.shape == (7, 4, 16) and state.shape == (2, 4, 16)  # time-major
    decoder = Seq2SeqDecoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2).eval()
    out, state = decoder(X, decoder.init_state(encoder(X)))
    assert out.shape == (4, 7, 10) and state.shape == torch.Size([2, 4, 16])


def test_bahdanau_decoder_shapes_as_the_book():
    encoder, X = _book_models()
    decoder = Seq2SeqAttentionDecoder(10, 8, 16, 2).eval()
    output, state = decoder(X, decoder.init_state(encoder(X), None))
    got = (output.shape, len(state), state[0].shape, len(state[1]), state[1][0].shape)
    assert got == ((4, 7, 10), 3, (4, 7, 16), 2, (4, 16))
    assert len(decoder.attention_weights) == 7 and decoder.attention_weights[0].shape == (4, 1, 7)
    assert decoder.alignment().shape == (4, 7, 7)
    torch.testing.assert_close(decoder.alignment().sum(-1), torch.ones(4, 7))


def test_state_dict_keys_are_the_books():
    model = build_model("bahdanau", {}, 12, 13)
    keys = set(model.state_dict())
    assert {
        "encoder.embedding.weight",
        "encoder.rnn.weight_ih_l0",
        "encoder.rnn.weight_hh_l1",
        "decoder.attention.W_k.weight",
        "decoder.attention.W_q.weight",
        "decoder.attention.w_v.weight",
        "decoder.embedding.weight",
        "decoder.rnn.weight_ih_l0",
        "decoder.dense.weight",
        "decoder.dense.bias",
    } <= keys
    plain = set(build_model("seq2seq", {}, 12, 13).state_dict())
    assert not any("attention" in k for k in plain) and "decoder.dense.weight" in plain
    # GRU input widths as the book: embed + hidden
    assert model.decoder.rnn.weight_ih_l0.shape == (3 * 32, 32 + 32)


def test_xavier_init_bounds():
    model = build_model("seq2seq", {"num_hiddens": 20, "embed_size": 10}, 30, 40)
    w = model.decoder.dense.weight  # (40, 20): xavier bound sqrt(6 / (20 + 40))
    bound = (6 / 60) ** 0.5
    assert w.abs().max() <= bound and w.abs().max() > 0.8 * bound
    torch.testing.assert_close(model.decoder.dense.bias, model.decoder.dense.bias)  # finite


@pytest.mark.parametrize("arch", ["seq2seq", "bahdanau"])
def test_incremental_decoding_equals_full_pass(arch):
    torch.manual_seed(0)
    model = build_model(arch, {"dropout": 0.0}, 20, 25).eval()
    src = torch.randint(4, 20, (5, 8))
    src_len = torch.tensor([8, 5, 3, 7, 2])
    tgt = torch.randint(0, 25, (5, 6))
    full, _ = model(src, tgt, src_len)  # (B, T, V)
    state = model.decoder.init_state(model.encoder(src, src_len), src_len)
    steps = []
    for t in range(6):
        logits, state = model.decoder(tgt[:, t : t + 1], state)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_encoder_state_ignores_padding():
    torch.manual_seed(0)
    enc = Seq2SeqEncoder(20, 8, 16, 2).eval()
    src = torch.randint(4, 20, (3, 5))
    src_len = torch.tensor([5, 3, 2])
    padded = torch.cat([src, torch.ones(3, 4, dtype=torch.long)], 1)  # 4 extra <pad>
    out_a, state_a = enc(src, src_len)
    out_b, state_b = enc(padded, src_len)
    torch.testing.assert_close(state_a, state_b)
    torch.testing.assert_close(out_a, out_b[:5])
    assert out_b[5:].abs().max() == 0  # past each length: zeros
    # row 1 alone, unpadded, gives the same final state
    _, state_1 = enc(src[1:2, :3], torch.tensor([3]))
    torch.testing.assert_close(state_1[:, 0], state_a[:, 1])


def test_seq2seq_decoder_context_stays_the_encoders():
    torch.manual_seed(0)
    model = build_model("seq2seq", {}, 20, 25).eval()
    src, src_len = torch.randint(4, 20, (2, 6)), torch.tensor([6, 4])
    enc_outputs = model.encoder(src, src_len)
    state = model.decoder.init_state(enc_outputs, src_len)
    for _ in range(3):
        _, state = model.decoder(torch.full((2, 1), 2), state)
    torch.testing.assert_close(state.context, enc_outputs[1][-1])  # not the decoder's state
    assert not torch.allclose(state.hidden[-1], state.context)


@pytest.mark.parametrize("arch", ["seq2seq", "bahdanau"])
def test_reorder_state_selects_rows(arch):
    torch.manual_seed(0)
    model = build_model(arch, {}, 20, 25).eval()
    src, src_len = torch.randint(4, 20, (4, 6)), torch.tensor([6, 4, 5, 2])
    state = model.decoder.init_state(model.encoder(src, src_len), src_len)
    y = torch.full((4, 1), 2)
    _logits, state = model.decoder(y, state)
    index = torch.tensor([3, 1])
    sub, _ = model.decoder(y[index], model.decoder.reorder_state(state, index))
    full, _ = model.decoder(y, state)
    torch.testing.assert_close(sub, full[index])


def test_model_input_validation():
    with pytest.raises(ValueError, match="num_hiddens must be a positive int, got 0"):
        Seq2SeqEncoder(10, 8, 0, 2)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1\.5"):
        Seq2SeqDecoder(10, 8, 16, 2, dropout=1.5)
    with pytest.raises(TypeError, match=r"embed_size must be a positive int, got 8\.0 \(float\)"):
        Seq2SeqEncoder(10, 8.0, 16, 2)
    with pytest.raises(TypeError, match=r"dropout must be a float in \[0, 1\), got None"):
        Seq2SeqEncoder(10, 8, 16, 2, dropout=None)
    enc = Seq2SeqEncoder(10, 8, 16, 2)
    with pytest.raises(TypeError, match="int64 tensor of token ids"):
        enc(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"shape \(B, T\)"):
        enc(torch.zeros(2, 3, 1, dtype=torch.long))
    with pytest.raises(ValueError, match=r"src_len must have shape \(B,\)"):
        enc(torch.zeros(2, 3, dtype=torch.long), torch.tensor([1, 2, 3]))


def test_registry_builds_validates_and_extends():
    assert {"seq2seq", "bahdanau"} <= set(available_archs())
    model = build_model("bahdanau", {"num_hiddens": 24}, 11, 12)
    assert isinstance(model, EncoderDecoder)
    assert model.decoder.dense.weight.shape == (12, 24)
    assert arch_config("seq2seq", {"num_layers": 3}) == Seq2SeqConfig(num_layers=3)
    with pytest.raises(ValueError, match="unknown arch 'nope'"):
        build_model("nope", {}, 5, 5)
    with pytest.raises(ValueError, match=r"unknown config key\(s\) \['heads'\]"):
        build_model("seq2seq", {"heads": 2}, 5, 5)
    with pytest.raises(ValueError, match="num_layers must be a positive int, got 0"):
        build_model("seq2seq", {"num_layers": 0}, 5, 5)
    with pytest.raises(ValueError, match="tgt_vocab_size must be a positive int"):
        build_model("seq2seq", {}, 5, 0)
    assert parse_config_overrides("seq2seq", ["num-layers=3", "dropout=0.2"]) == {
        "num_layers": 3,
        "dropout": 0.2,
    }
    with pytest.raises(ValueError, match="expected a int"):
        parse_config_overrides("seq2seq", ["num_layers=two"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_config_overrides("seq2seq", ["num_layers"])

    @dataclasses.dataclass(frozen=True)
    class TinyConfig:
        width: int = 4

    def build(cfg, s, t):
        return EncoderDecoder(
            Seq2SeqEncoder(s, cfg.width, cfg.width, 1), Seq2SeqDecoder(t, 4, 4, 1)
        )

    from attnkit.models.registry import _ARCHS

    register_arch("tiny-test", build, TinyConfig())
    try:
        assert build_model("tiny-test", {"width": 4}, 7, 8).decoder.dense.out_features == 8
    finally:
        _ARCHS.pop("tiny-test")
    with pytest.raises(TypeError, match="dataclass instance"):
        register_arch("bad", build, TinyConfig)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: register_arch("", print, Seq2SeqConfig()), ValueError,
         "name must be a non-empty str, got ''"),
        (lambda: register_arch(3, print, Seq2SeqConfig()), TypeError,
         r"name must be a non-empty str, got 3 \(int\)"),
        (lambda: build_model("seq2seq", {}, 0, 5), ValueError,
         "src_vocab_size must be a positive int, got 0"),
        (lambda: build_model("seq2seq", {}, "5", 5), TypeError,
         r"src_vocab_size must be a positive int, got '5' \(str\)"),
        (lambda: build_model("seq2seq", {}, 5, 0), ValueError,
         "tgt_vocab_size must be a positive int, got 0"),
        (lambda: build_model("seq2seq", {}, 5, True), TypeError,
         r"tgt_vocab_size must be a positive int, got True \(bool\)"),
        (lambda: Seq2SeqConfig(embed_size=0), ValueError,
         r"Seq2SeqConfig\.embed_size must be a positive int, got 0"),
        (lambda: Seq2SeqConfig(num_hiddens=32.0), TypeError,
         r"Seq2SeqConfig\.num_hiddens must be a positive int, got 32\.0 \(float\)"),
        (lambda: Seq2SeqConfig(num_layers=-1), ValueError,
         r"Seq2SeqConfig\.num_layers must be a positive int, got -1"),
        (lambda: Seq2SeqConfig(num_layers=True), TypeError,
         r"Seq2SeqConfig\.num_layers must be a positive int, got True \(bool\)"),
        (lambda: Seq2SeqConfig(dropout=1.0), ValueError,
         r"Seq2SeqConfig\.dropout must be in \[0, 1\), got 1\.0"),
        (lambda: Seq2SeqConfig(dropout="0.1"), TypeError,
         r"Seq2SeqConfig\.dropout must be a float in \[0, 1\), got '0\.1' \(str\)"),
    ],
)  # fmt: skip
def test_registry_and_seq2seq_config_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_seq2seq_config_takes_numpy_ints_as_ints():
    import numpy as np

    cfg = Seq2SeqConfig(embed_size=np.int64(8), num_hiddens=np.int32(8))
    assert type(cfg.embed_size) is int and type(cfg.num_hiddens) is int
    assert cfg == Seq2SeqConfig(embed_size=8, num_hiddens=8)


@pytest.mark.parametrize("arch", ["seq2seq", "bahdanau"])
def test_reorder_state_with_same_sources_keeps_the_encoder_side(arch):
    torch.manual_seed(0)
    model = build_model(arch, {}, 20, 25).eval()
    src, src_len = torch.randint(4, 20, (2, 6)), torch.tensor([6, 4])
    two = torch.tensor([0, 0, 1, 1])  # two hypotheses per sentence
    state = model.decoder.init_state(model.encoder(src[two], src_len[two]), src_len[two])
    y = torch.tensor([[2], [3], [2], [5]])
    _logits, state = model.decoder(y, state)
    index = torch.tensor([1, 0, 3, 3])  # within each sentence
    kept = model.decoder.reorder_state(state, index, same_sources=True)
    copied = model.decoder.reorder_state(state, index)
    encoder_side = {"seq2seq": "context", "bahdanau": "enc_outputs"}[arch]
    assert getattr(kept, encoder_side) is getattr(state, encoder_side)
    torch.testing.assert_close(model.decoder(y, kept)[0], model.decoder(y, copied)[0])
    with pytest.raises(ValueError, match="same_sources needs one new row per old row, got 2"):
        model.decoder.reorder_state(state, index[:2], same_sources=True)
