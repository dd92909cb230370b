"""An int8 output layer's largest logits per row recomputed in float32 from the unrounded
weight (``Int8Linear.exact_top``, set by ``quantize_int8``): the int8 product picks the
candidates, float32 decides among them."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from torch import nn

from attnkit.inference import int8
from attnkit.inference.int8 import Int8Linear, quantize_int8
from attnkit.inference.row_top import CHUNK, exact_top
from attnkit.models.transformer import TransformerConfig, build_transformer

pytestmark = pytest.mark.skipif(
    not int8.available(), reason="this PyTorch has no oneDNN int8 linear operators"
)


@pytest.mark.parametrize("width", [40, 9 * CHUNK + 5])  # topk's own, and through chunks
def test_exact_top_recomputes_each_rows_largest_logits_and_nothing_else(width):
    torch.manual_seed(0)
    x, weight, bias = torch.randn(6, 24), torch.randn(width, 24), torch.randn(width)
    rounded = weight + 0.05 * torch.randn(width, 24)  # an approximate product's weights
    logits = x @ rounded.t() + bias  # (6, V)
    top = logits.topk(3, dim=1).indices  # (6, 3)
    before = logits.clone()
    assert exact_top(logits, x, weight, bias, 3) is logits  # in place
    want = (x.double() @ weight.double().t() + bias.double()).gather(1, top)  # float64
    torch.testing.assert_close(logits.gather(1, top).double(), want, rtol=1e-6, atol=1e-5)
    untouched = torch.ones_like(logits, dtype=torch.bool).scatter_(1, top, False)
    assert torch.equal(logits[untouched], before[untouched])
    assert not torch.equal(logits.gather(1, top), before.gather(1, top))
    with pytest.raises(ValueError, match="k must be a positive int, got 0"):
        exact_top(logits, x, weight, bias, 0)
    small = torch.randn(2, 3)  # k beyond the width: the whole row, exactly
    exact_top(small, x[:2], weight[:3], None, 5)
    torch.testing.assert_close(small, x[:2] @ weight[:3].t())


def test_a_column_int8_overestimated_past_every_candidate_is_recomputed_too():
    """float32 logits (1.000, .999, .998, .997, .9985): column 0 wins. The approximate ones
    put column 4 fifth but above every candidate's exact value, so it is recomputed too."""
    exact_logits = torch.tensor([[1.000, 0.999, 0.998, 0.997, 0.9985]])
    weight, x = torch.diag(exact_logits[0]), torch.ones(1, 5)  # x @ weight.T = exact_logits
    approximate = torch.tensor([[1.003, 1.002, 1.001, 1.0005, 1.0002]])
    got = exact_top(approximate.clone(), x, weight, None, 4)
    torch.testing.assert_close(got, exact_logits)
    assert int(got.argmax()) == 0
    below = torch.tensor([[1.003, 1.002, 1.001, 1.0005, 0.5]])  # the fifth stays below: kept
    assert float(exact_top(below, x, weight, None, 4)[0, 4]) == 0.5


def test_exact_top_names_what_does_not_fit():
    logits, x, weight = torch.zeros(2, 6), torch.zeros(2, 3), torch.zeros(6, 3)
    with pytest.raises(ValueError, match=r"weight must be \(6, 3\) for logits \(2, 6\), "
                       r"got \(7, 3\)"):  # fmt: skip
        exact_top(logits, x, torch.zeros(7, 3), None, 2)
    with pytest.raises(ValueError, match=r"x must be \(2, 3\) for logits \(2, 6\), got \(3, 3\)"):
        exact_top(logits, torch.zeros(3, 3), weight, None, 2)
    with pytest.raises(ValueError, match=r"bias must be \(6,\) for logits \(2, 6\), got \(5,\)"):
        exact_top(logits, x, weight, torch.zeros(5), 2)
    with pytest.raises(TypeError, match=r"logits must be a float32 tensor, got torch\.bfloat16"):
        exact_top(logits.bfloat16(), x, weight, None, 2)
    with pytest.raises(TypeError, match=r"x must be a float32 tensor, got list"):
        exact_top(logits, [[0.0]], weight, None, 2)
    with pytest.raises(ValueError, match=r"logits must have 2 dimensions, got shape \(12,\)"):
        exact_top(logits.reshape(-1), x, weight, None, 2)


def _flipped_by_rounding() -> tuple[nn.Linear, torch.Tensor]:
    """A layer whose int8 rounding flips its argmax: with x = (1, 1, 1), float32 gives row 0
    1.0040 and row 1 1.0070; each row's scale is 1/127, so row 0's 0.0040 rounds up to
    1/127 and row 1's two 0.0035s round to 0: int8 gives 1.0079 against 1.0."""
    linear = nn.Linear(3, 2, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[1.0, 0.0040, 0.0], [1.0, 0.0035, 0.0035]]))
    return linear, torch.ones(1, 3)


def test_float32_decides_among_the_int8_candidates():
    linear, x = _flipped_by_rounding()
    layer = Int8Linear(linear)
    with torch.no_grad():
        assert int(layer(x).argmax()) == 0  # int8 alone: the rounding's choice
        layer.exact_top(linear.weight, k=2)
        out = layer(x)
        assert int(out.argmax()) == 1  # float32's choice
        torch.testing.assert_close(out, linear(x), rtol=1e-6, atol=1e-6)
        part = layer.rows(torch.tensor([1]))  # a shortlist's rows keep it
        torch.testing.assert_close(part(x), linear(x)[:, 1:], rtol=1e-6, atol=1e-6)
        layer.exact_top(None)
        assert int(layer(x).argmax()) == 0
    with pytest.raises(TypeError, match=r"weight must be a float32 CPU tensor of shape \(2, 3\), "
                       r"got torch\.float32 \(3, 2\) on cpu"):  # fmt: skip
        layer.exact_top(linear.weight.t())
    with pytest.raises(TypeError, match=r"got torch\.float64 \(2, 3\) on cpu"):
        layer.exact_top(linear.weight.double())
    with pytest.raises(ValueError, match="k must be"):
        layer.exact_top(linear.weight, k=0)
    with pytest.raises(ValueError, match="weight must be this layer's weight before rounding"):
        layer.exact_top(linear.weight.flip(0))  # another layer's: its top would be wrong


@pytest.mark.parametrize("tied", [True, False])
def test_quantize_int8_keeps_the_output_layers_float_weight_by_reference(tied):
    config = TransformerConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32,
                               dropout=0.0, tie_embeddings=tied)  # fmt: skip
    model = build_transformer(config, 50, 50)
    weight = model.decoder.dense.weight
    quantize_int8(model)
    kept, k = model.decoder.dense._exact
    assert k == int8.EXACT_TOP and kept.data_ptr() == weight.data_ptr()  # no copy
    if tied:
        assert kept.data_ptr() == model.decoder.embedding.weight.data_ptr()
    others = [m for m in model.modules() if isinstance(m, Int8Linear)]
    assert sum(m._exact is not None for m in others) == 1  # the output layer only
    twin = copy.deepcopy(model)  # a copy keeps one table, not two
    if tied:
        assert twin.decoder.dense._exact[0] is twin.decoder.embedding.weight
    old = copy.copy(model.decoder.dense.__dict__)
    del old["_exact"]  # a layer pickled before exact_top existed
    layer = Int8Linear.__new__(Int8Linear)
    layer.__setstate__(old)
    x = torch.randn(2, 16)
    with torch.no_grad():
        torch.testing.assert_close(twin.decoder.dense(x), model.decoder.dense(x))
        assert layer._exact is None and layer(x).shape == (2, 50)
        again = pickle.loads(pickle.dumps(model))
        torch.testing.assert_close(again.decoder.dense(x), model.decoder.dense(x))
        assert again.decoder.dense._exact is not None


def test_a_tied_output_layouts_largest_logits_are_float32s():
    from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig

    torch.manual_seed(0)
    model = DecoderLM(DecoderLMConfig(vocab_size=300, d_model=32, num_heads=4, num_layers=1,
                                      context_length=16)).eval()  # fmt: skip
    quantize_int8(model)
    h = torch.randn(5, 32)
    with torch.no_grad():
        got = model._logits(h)
        layer = model.output_layout._layer
        assert layer._exact[0] is model.embedding.weight  # the table itself, not a copy
        layer._exact = None
        approximate = model._logits(h)  # (5, 300)
    exact = h @ model.embedding.weight.t()  # (5, 300)
    top = approximate.topk(int8.EXACT_TOP, dim=1).indices  # int8's candidates
    torch.testing.assert_close(got.gather(1, top), exact.gather(1, top), rtol=1e-6, atol=1e-6)
    rest = torch.ones_like(got, dtype=torch.bool).scatter_(1, top, False)
    assert torch.equal(got[rest & (approximate <= got.max(dim=1, keepdim=True).values)],
                       approximate[rest & (approximate <= got.max(dim=1, keepdim=True).values)])  # fmt: skip
    assert torch.equal(got.argmax(dim=1), exact.argmax(dim=1))


def test_a_loaded_state_keeps_the_exact_top_only_where_the_float_weight_still_matches():
    config = TransformerConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0)
    torch.manual_seed(0)
    model, other = build_transformer(config, 50, 50), build_transformer(config, 50, 50)
    quantize_int8(model)
    quantize_int8(other)
    model.load_state_dict(model.state_dict())  # the same weights: kept
    assert model.decoder.dense._exact is not None
    model.load_state_dict(other.state_dict())  # another model's: its old float weight stale
    assert model.decoder.dense._exact is None
    x = torch.randn(3, 16)
    with torch.no_grad():
        other.decoder.dense.exact_top(None)
        torch.testing.assert_close(model.decoder.dense(x), other.decoder.dense(x))
    tied = build_transformer(TransformerConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32,
                                               tie_embeddings=True), 50, 50)  # fmt: skip
    twin = build_transformer(TransformerConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32,
                                               tie_embeddings=True), 50, 50)  # fmt: skip
    quantize_int8(tied)
    quantize_int8(twin)
    tied.load_state_dict(twin.state_dict())  # the table is loaded in place: still the weight
    kept, _ = tied.decoder.dense._exact
    assert torch.equal(kept, twin.decoder.embedding.weight)
