"""PrepackedLinear: nn.Linear's values, parameters and state dict, with oneDNN's packed
weight in CPU inference and F.linear everywhere else; the packing follows weight changes."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnkit.inference import prepacked
from attnkit.inference.prepacked import PrepackedLinear, prepack_linears

needs_onednn = pytest.mark.skipif(
    not prepacked.available(), reason="this PyTorch has no oneDNN prepacked linear operators"
)


def _linear(d_in=16, d_out=24, bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.Linear(d_in, d_out, bias=bias).eval()


def _count_packed_calls(monkeypatch) -> list[int]:
    calls = []
    real = torch.ops.mkldnn._linear_pointwise

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(prepacked, "_LINEAR", spy)
    return calls


@needs_onednn
@settings(max_examples=30, deadline=None)
@given(
    rows=st.sampled_from([(1,), (4,), (2, 3), (64,), (1, 1), (0,)]),
    bias=st.booleans(),
    d_in=st.integers(1, 40),
    d_out=st.integers(1, 40),
)
def test_values_equal_the_float64_linear(rows, bias, d_in, d_out):
    layer = _linear(d_in, d_out, bias)
    packed = PrepackedLinear(copy.deepcopy(layer))
    x = torch.randn(*rows, d_in)
    with torch.no_grad():
        got = packed(x)
        want = F.linear(
            x.double(), layer.weight.double(), None if not bias else layer.bias.double()
        )
    assert got.shape == (*rows, d_out) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_inference_runs_the_packed_kernel_and_training_the_plain_one(monkeypatch):
    layer = PrepackedLinear(_linear())
    calls = _count_packed_calls(monkeypatch)
    x = torch.randn(5, 16)
    with torch.no_grad():
        layer(x)
    assert len(calls) == 1
    out = layer(x)  # autograd records: F.linear, and gradients flow to the parameters
    assert len(calls) == 1
    out.sum().backward()
    torch.testing.assert_close(layer.weight.grad, torch.ones(24, 1) * x.sum(0))
    with torch.inference_mode():
        layer(x)
    assert len(calls) == 2
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(x).dtype == torch.bfloat16  # autocast: nn.Linear's behaviour
    layer.train()
    with torch.no_grad():
        layer(x)
    assert len(calls) == 2  # training mode: F.linear
    with torch.no_grad(), pytest.raises(RuntimeError, match="same dtype"):
        layer(x.double())  # another dtype than the weight's: F.linear's own error
    assert len(calls) == 2


@needs_onednn
def test_a_changed_weight_is_packed_again():
    layer = PrepackedLinear(_linear())
    x = torch.randn(3, 16)
    with torch.no_grad():
        before = layer(x)
        layer.weight.mul_(2.0)  # in place, as an optimizer step: the version changes
        after = layer(x)
        torch.testing.assert_close(after, F.linear(x, layer.weight, layer.bias))
        assert not torch.allclose(before, after)
        layer.load_state_dict({"weight": torch.zeros(24, 16), "bias": torch.zeros(24)})
        assert torch.equal(layer(x), torch.zeros(3, 24))
        layer.load_state_dict({"weight": torch.ones(24, 16), "bias": torch.zeros(24)})
        layer.weight.data.mul_(3.0)  # through .data: no version bump, so ...
        layer.train().eval()  # ... a mode change drops the packed weight
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
        layer.to(torch.bfloat16)  # new tensors: packed again, in bf16
        got = layer(x.bfloat16())
    want = F.linear(x.bfloat16(), layer.weight, layer.bias)
    assert got.dtype == torch.bfloat16 and torch.allclose(got.float(), want.float(), rtol=1e-2)


@needs_onednn
def test_parameters_made_in_inference_mode_work():
    with torch.inference_mode():
        layer = PrepackedLinear(_linear())
        x = torch.randn(3, 16)
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))


def test_it_is_the_same_linear_layer():
    layer = _linear()
    packed = PrepackedLinear(layer)
    assert isinstance(packed, nn.Linear)
    assert packed.weight is layer.weight and packed.bias is layer.bias
    assert list(packed.state_dict()) == ["weight", "bias"]
    assert repr(packed) == "PrepackedLinear(in_features=16, out_features=24, bias=True)"
    assert PrepackedLinear(_linear(bias=False)).bias is None


def test_copies_and_pickles_leave_the_packed_weight_behind():
    layer = PrepackedLinear(_linear())
    x = torch.randn(2, 16)
    with torch.no_grad():
        want = layer(x)  # packs (when available)
    twin = copy.deepcopy(layer)
    buffer = io.BytesIO()
    torch.save(layer, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    restored = pickle.loads(pickle.dumps(layer))
    for other in (twin, loaded, restored):
        assert other._packed is None and other.weight is not layer.weight
        with torch.no_grad():
            torch.testing.assert_close(other(x), want)


def test_prepack_linears_replaces_plain_linears_only_and_keeps_the_state_dict():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(4, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 8), nn.LazyLinear(3))
    )
    model(torch.randn(1, 4))  # the lazy layer gets its weights (an nn.Linear now)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(5, 4)
    with torch.no_grad():
        want = model(x)
    replaced = prepack_linears(model, min_weights=1)
    if not prepacked.available():
        assert replaced == 0
        return
    assert replaced == 3
    assert all(type(m) is not nn.Linear for m in model.modules())
    assert list(model.state_dict()) == list(state)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    with torch.no_grad():
        torch.testing.assert_close(model(x), want)
    assert prepack_linears(model, min_weights=1) == 0  # already prepacked


@needs_onednn
def test_small_layers_stay_plain():
    model = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 1024), nn.Linear(1024, 256))
    assert prepack_linears(model) == 2  # 256 x 256 < MIN_WEIGHTS <= 1024 x 256
    assert [type(m).__name__ for m in model] == ["Linear", "PrepackedLinear", "PrepackedLinear"]


def test_errors_name_the_argument():
    with pytest.raises(TypeError, match=r"linear must be a torch\.nn\.Linear, got Conv1d"):
        PrepackedLinear(nn.Conv1d(2, 2, 1))
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module, got str"):
        prepack_linears("model")
    with pytest.raises(ValueError, match="min_weights must be a positive int, got 0"):
        prepack_linears(nn.Linear(2, 2), min_weights=0)


def test_without_the_operators_nothing_is_replaced(monkeypatch):
    monkeypatch.setattr(prepacked, "_available", False)
    model = nn.Sequential(nn.Linear(2, 2))
    assert prepack_linears(model) == 0 and type(model[0]) is nn.Linear
    layer = PrepackedLinear(_linear())
    x = torch.randn(2, 16)
    with torch.no_grad():
        assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))
    assert layer._packed is None
