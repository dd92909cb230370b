"""The Transformer's options beyond the book (issue 35): activation, the sinusoidal table's
layout, embedding scaling, tied embeddings; old configs load as they did."""

from __future__ import annotations

import copy
import dataclasses
import io
import math

import pytest
import torch
from torch import nn

from attnkit.attention.positional import PositionalEncoding, sinusoidal_table
from attnkit.inference.int8 import quantize_int8
from attnkit.inference.prepacked import prepack_linears
from attnkit.models import transformer_step
from attnkit.models.registry import build_model
from attnkit.models.transformer import PositionWiseFFN, TransformerConfig, build_transformer

SMALL = dict(d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=40, dropout=0.0)


def test_halves_table_is_marians_formula_in_float64():
    T, D = 50, 10
    P = sinusoidal_table(T, D, "halves").double()
    for t in (0, 1, 7, 49):
        for j in range(D // 2):
            angle = t / 10000 ** (2 * j / D)
            assert P[t, j].item() == pytest.approx(math.sin(angle), abs=1e-7)
            assert P[t, D // 2 + j].item() == pytest.approx(math.cos(angle), abs=1e-7)
    interleaved = sinusoidal_table(T, D)
    assert torch.allclose(interleaved[:, 0::2].double(), P[:, : D // 2], atol=1e-5)
    odd = sinusoidal_table(4, 5, "halves")  # ceil(D/2) sines, floor(D/2) cosines
    angles = torch.arange(4.0)[:, None] / 10000 ** (torch.arange(0, 5, 2) / 5)  # (4, 3)
    torch.testing.assert_close(odd, torch.cat([angles.sin(), angles[:, :2].cos()], 1))
    with pytest.raises(ValueError, match=r"layout must be one of 'interleaved', 'halves'"):
        PositionalEncoding(8, layout="concatenated")


@pytest.mark.parametrize("name", ["relu", "gelu", "gelu-tanh", "silu"])
def test_each_activation_in_the_ffn_and_the_lean_step(name):
    c = math.sqrt(2 / math.pi)
    references = {
        "relu": lambda x: x.clamp_min(0),
        "gelu": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
        "gelu-tanh": lambda x: 0.5 * x * (1 + torch.tanh(c * (x + 0.044715 * x**3))),
        "silu": lambda x: x / (1 + torch.exp(-x)),
    }
    ffn = PositionWiseFFN(4, 8, 4, name).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    expected = ffn.dense2(references[name](ffn.dense1(x)))
    torch.testing.assert_close(ffn(x), expected, atol=1e-12, rtol=0)
    torch.manual_seed(0)
    model = build_transformer(TransformerConfig(**SMALL, activation=name, bias=True), 20, 20)
    model.eval()
    src, src_len = torch.randint(4, 20, (2, 6)), torch.tensor([6, 3])
    tgt = torch.randint(4, 20, (2, 5))
    calls = []
    original = transformer_step.decoder_step

    def spy(*args):
        calls.append(1)
        return original(*args)

    with torch.no_grad():
        enc = model.encoder(src, src_len)
        full, _ = model.decoder(tgt, model.decoder.init_state(enc, src_len))
        state, steps = model.decoder.init_state(enc, src_len), []
        transformer_step.decoder_step = spy
        try:
            for t in range(tgt.shape[1]):
                step, state = model.decoder(tgt[:, t : t + 1], state)
                steps.append(step)
        finally:
            transformer_step.decoder_step = original
    assert len(calls) == tgt.shape[1] - 1  # the lean step ran after the first position
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)


def test_unscaled_embeddings_and_halves_positions():
    config = TransformerConfig(**SMALL, scale_embedding=False, positions_layout="halves")
    model = build_transformer(config, 12, 12).eval()
    enc = model.encoder
    X = torch.tensor([[3, 4, 5]])
    expected = enc.embedding(X) + sinusoidal_table(40, 16, "halves")[:3]
    torch.testing.assert_close(enc._embed(X), expected)
    assert build_transformer(TransformerConfig(**SMALL), 12, 12).encoder.embed_scale == 4.0


def test_tied_embeddings_survive_save_load_prepack_and_int8():
    torch.manual_seed(0)
    config = TransformerConfig(**SMALL, tie_embeddings=True)
    model = build_transformer(config, 24, 24).eval()
    shared = model.decoder.dense.weight
    assert model.encoder.embedding.weight is shared and model.decoder.embedding.weight is shared
    assert (
        sum(p.numel() for p in model.parameters())
        == sum(
            p.numel() for p in build_transformer(TransformerConfig(**SMALL), 24, 24).parameters()
        )
        - 2 * 24 * 16
    )
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    again = build_transformer(config, 24, 24).eval()
    again.load_state_dict(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    assert again.encoder.embedding.weight is again.decoder.dense.weight
    assert torch.equal(again.decoder.dense.weight, shared)
    src, src_len, tgt = torch.tensor([[5, 6, 7]]), torch.tensor([3]), torch.tensor([[2, 8, 9]])

    def logits(m):
        with torch.no_grad():
            return m.decoder(tgt, m.decoder.init_state(m.encoder(src, src_len), src_len))[0]

    reference = logits(model)
    packed = copy.deepcopy(model)
    prepack_linears(packed, min_weights=1)
    assert packed.decoder.dense.weight is packed.encoder.embedding.weight
    torch.testing.assert_close(logits(packed), reference, atol=1e-5, rtol=0)
    quantized = copy.deepcopy(model)
    quantize_int8(quantized)
    assert type(quantized.decoder.dense).__name__ == "Int8Linear"
    assert quantized.encoder.embedding.weight is quantized.decoder.embedding.weight
    assert (logits(quantized) - reference).abs().max() < 0.05 * reference.abs().max()
    with pytest.raises(ValueError, match="tie_embeddings needs one vocabulary"):
        build_transformer(config, 24, 20)


def test_checkpoints_written_before_the_options_load_as_they_were():
    old = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.1,
           "max_len": 40, "pre_norm": False, "bias": False}  # a config.json of before  # fmt: skip
    model = build_model("transformer", old, 10, 12)
    c = model.encoder.config
    assert (c.activation, c.positions_layout, c.scale_embedding, c.tie_embeddings) == (
        "relu", "interleaved", True, False)  # fmt: skip
    assert type(model.encoder.blks[0].ffn.relu) is nn.ReLU
    assert model.encoder.embed_scale == 4.0
    assert torch.equal(model.encoder.pos_encoding.P[0], sinusoidal_table(40, 16))
    keys = set(model.state_dict())
    assert "decoder.dense.bias" in keys and not any("relu" in k for k in keys)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"activation": "tanh"}, ValueError, r"TransformerConfig.activation must be one of"),
        ({"positions_layout": "split"}, ValueError, r"positions_layout must be one of"),
        ({"scale_embedding": 1}, TypeError, r"scale_embedding must be a bool"),
        ({"tie_embeddings": "yes"}, TypeError, r"tie_embeddings must be a bool"),
    ],
)
def test_the_new_fields_are_validated(kwargs, error, match):
    with pytest.raises(error, match=match):
        TransformerConfig(**kwargs)


def test_fields_are_recorded_in_asdict():
    fields = dataclasses.asdict(TransformerConfig())
    assert {"activation", "positions_layout", "scale_embedding", "tie_embeddings"} <= set(fields)
