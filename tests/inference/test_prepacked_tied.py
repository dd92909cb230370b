"""Tied output layers prepacked: DecoderLM's logits by its embedding (a WeightLayout, no
layer replaced) and a tied translator's output layer (a PrepackedLinear sharing the
weight). Values equal the unprepacked model's, greedy tokens are the same, ties and the
state dict are unchanged, training runs the plain product, int8 still applies."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
import torch.nn.functional as F

from attnkit.inference import prepacked
from attnkit.inference.decoding import greedy_decode
from attnkit.inference.generation import generate_ids
from attnkit.inference.int8 import Int8Linear, Int8WeightLayout, quantize_int8
from attnkit.inference.prepacked import PrepackedLinear, WeightLayout, prepack_linears
from attnkit.models.decoder_lm import DecoderLMConfig
from attnkit.models.transformer import TransformerConfig, build_transformer

needs_onednn = pytest.mark.skipif(
    not prepacked.available(), reason="this PyTorch has no oneDNN prepacked linear operators"
)


def _spy(monkeypatch) -> list[tuple]:
    """The output shapes of the packed products run from now on."""
    calls = []
    real = torch.ops.mkldnn._linear_pointwise

    def spy(*args):
        out = real(*args)
        calls.append(tuple(out.shape))
        return out

    monkeypatch.setattr(prepacked, "_LINEAR", spy)
    return calls


def _lm(seed: int = 0):
    torch.manual_seed(seed)
    config = DecoderLMConfig(
        vocab_size=300, d_model=32, num_heads=4, num_layers=2, ffn_hidden=64,
        context_length=32, positions="learned", bias=True, activation="gelu-tanh",
    )  # fmt: skip
    return config.build().eval()


def _translator(seed: int = 0):
    torch.manual_seed(seed)
    config = TransformerConfig(
        d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.1, bias=True,
        tie_embeddings=True,
    )  # fmt: skip
    model = build_transformer(config, 40, 40).eval()
    src = torch.randint(3, 40, (4, 9), generator=torch.Generator().manual_seed(seed + 1))
    return model, src, torch.tensor([9, 6, 3, 1])


@needs_onednn
def test_a_tied_translator_decodes_the_same_prepacked_and_keeps_its_ties(monkeypatch):
    model, src, src_len = _translator()
    reference = greedy_decode(model, src, src_len, bos_id=1, eos_id=2, max_len=12)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    packed = copy.deepcopy(model)
    prepack_linears(packed, min_weights=1)
    # the output layer owns the tied weight: replaced as any nn.Linear, its weight shared
    assert type(packed.decoder.dense) is PrepackedLinear
    assert packed.decoder.dense.weight is packed.encoder.embedding.weight
    assert packed.decoder.embedding.weight is packed.encoder.embedding.weight
    calls = _spy(monkeypatch)
    got = greedy_decode(packed, src, src_len, bos_id=1, eos_id=2, max_len=12)
    assert got.tokens == reference.tokens and got.finished == reference.finished
    assert (4, 1, 40) in calls  # the output layer's one-position steps ran packed (V = 40)
    with torch.no_grad():  # the logits of every step, within float rounding
        want = _step_logits(model, src, src_len)
        torch.testing.assert_close(_step_logits(packed, src, src_len), want, rtol=0, atol=1e-5)
    assert list(packed.state_dict()) == list(state)
    assert all(torch.equal(packed.state_dict()[k], v) for k, v in state.items())


def _step_logits(model, src, src_len, n: int = 6):
    """Logits (B, n, V) of n decoding steps fed with fixed tokens."""
    y = torch.randint(3, 40, (src.shape[0], n), generator=torch.Generator().manual_seed(7))
    decoder = model.decoder
    state = decoder.init_state(model.encoder(src, src_len), src_len)
    out = []
    for t in range(n):
        logits, state = decoder(y[:, t : t + 1], state)
        out.append(logits)
    return torch.cat(out, dim=1)


@needs_onednn
def test_the_tied_output_layer_of_a_decoder_lm_runs_prepacked(monkeypatch):
    model = _lm()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.randint(0, 300, (3, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids)  # (3, 5, 300)
    reference = generate_ids(model, ids, max_new_tokens=8)
    packed = copy.deepcopy(model)
    assert prepack_linears(packed, min_weights=1) == 2 * 4 + 1  # 4 per block, the output
    assert isinstance(packed.output_layout, WeightLayout)
    assert prepack_linears(packed, min_weights=1) == 0  # already prepacked
    calls = _spy(monkeypatch)
    with torch.no_grad():
        got = packed(ids)
    assert len(calls) == 2 * 4 + 1 and calls[-1] == (3, 5, 300)  # the output layer last
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert generate_ids(packed, ids, max_new_tokens=8) == reference
    assert "output_layout" not in str(list(packed.state_dict()))
    assert list(packed.state_dict()) == list(state)
    assert all(torch.equal(packed.state_dict()[k], v) for k, v in state.items())


@needs_onednn
def test_training_a_prepacked_lm_runs_the_plain_tied_product(monkeypatch):
    model = _lm()
    reference = copy.deepcopy(model).train()  # never prepacked
    prepack_linears(model, min_weights=1)
    ids = torch.randint(0, 300, (2, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        model(ids)  # packs the output layer
    assert model.output_layout._packed is not None
    model.train()
    calls = _spy(monkeypatch)
    for m in (model, reference):
        torch.manual_seed(0)  # the same dropout masks
        m(ids).logsumexp(-1).mean().backward()
    assert calls == [] and model.output_layout._packed is None  # dropped in training
    assert torch.equal(model.embedding.weight.grad, reference.embedding.weight.grad)
    with torch.no_grad():
        for m in (model, reference):
            m.embedding.weight.add_(0.5)  # an optimizer's in-place step
            m.eval()
        torch.testing.assert_close(model(ids), reference(ids), rtol=1e-5, atol=1e-5)
    assert len(calls) == 2 * 4 + 1  # packed again, from the changed weight


def test_copies_and_pickles_of_a_prepacked_lm_drop_the_layout_and_still_agree():
    model = _lm()
    prepack_linears(model, min_weights=1)
    ids = torch.randint(0, 300, (2, 4), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(ids)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    for other in (copy.deepcopy(model), loaded, pickle.loads(pickle.dumps(model))):
        if model.output_layout is not None:  # a copy of its own, without oneDNN's tensor
            assert other.output_layout is not model.output_layout
            assert other.output_layout._packed is None
        assert other.embedding.weight is not model.embedding.weight
        with torch.no_grad():
            torch.testing.assert_close(other(ids), want, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_a_weight_layout_keeps_small_weights_and_other_dtypes_plain(monkeypatch):
    calls = _spy(monkeypatch)
    layout = WeightLayout(min_weights=1000)
    weight, x = torch.randn(20, 8), torch.randn(3, 8)
    with torch.no_grad():
        assert torch.equal(layout.linear(x, weight), F.linear(x, weight))  # 160 < 1000
        got = layout.linear(x.double(), weight.double(), training=False)
    assert got.dtype == torch.float64 and calls == []
    with pytest.raises(ValueError, match="min_weights must be a positive int, got 0"):
        WeightLayout(0)
    assert repr(layout) == "WeightLayout(min_weights=1000)"


def test_without_the_operators_the_lm_gets_no_layout(monkeypatch):
    monkeypatch.setattr(prepacked, "_available", False)
    model = _lm()
    assert prepack_linears(model, min_weights=1) == 0 and model.output_layout is None


@needs_onednn
def test_int8_still_applies_to_tied_models_prepacked_or_not():
    model, src, src_len = _translator(seed=4)
    with torch.no_grad():
        reference = _step_logits(model, src, src_len)
    for first_prepacked in (False, True):
        quantized = copy.deepcopy(model)
        if first_prepacked:
            prepack_linears(quantized, min_weights=1)
        quantize_int8(quantized)
        assert type(quantized.decoder.dense) is Int8Linear
        assert quantized.encoder.embedding.weight is quantized.decoder.embedding.weight
        with torch.no_grad():
            got = _step_logits(quantized, src, src_len)
        assert (got - reference).abs().max() < 0.05 * reference.abs().max()
    lm = _lm(seed=5)
    ids = torch.randint(0, 300, (2, 5), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        want = lm(ids)
    prepack_linears(lm, min_weights=1)
    assert quantize_int8(lm) == 2 * 4 + 1  # the blocks' layers and the tied output
    assert (
        isinstance(lm.output_layout, Int8WeightLayout) and type(lm.blocks[0].ffn[0]) is Int8Linear
    )
    with torch.no_grad():
        got = lm(ids)
    assert (got - want).abs().max() < 0.05 * want.abs().max()
