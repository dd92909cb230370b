"""``evaluating``: eval mode for a block, switching only when a module trains, so layers
that cache a form of their weights (PrepackedLinear) keep it across decoding calls."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnkit.inference import prepacked
from attnkit.inference.decoding import greedy_decode
from attnkit.inference.eval_mode import evaluating
from attnkit.models.transformer import TransformerConfig, build_transformer


def test_a_training_model_is_switched_and_restored_an_evaluating_one_left_alone():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    with evaluating(model):
        assert not any(m.training for m in model.modules())
    assert all(m.training for m in model.modules())
    model[1].eval()  # one module in eval mode, the model training: switched, then all train
    with evaluating(model):
        assert not any(m.training for m in model.modules())
    assert all(m.training for m in model.modules())
    model.eval()
    calls = []
    model.train = lambda mode=True: calls.append(mode)  # type: ignore[method-assign]
    with evaluating(model):
        pass
    assert calls == []  # nothing to switch: train()/eval() never called
    layer = nn.Linear(1, 1)
    with pytest.raises(RuntimeError), evaluating(layer):
        raise RuntimeError
    assert layer.training  # restored on errors too
    bad = pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module, got str")
    with bad, evaluating("model"):  # type: ignore[arg-type]
        pass


@pytest.mark.skipif(not prepacked.available(), reason="this PyTorch lacks oneDNN's packed linear")
def test_decoding_twice_lays_the_prepacked_weights_out_once():
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=64, num_heads=2, num_layers=1, d_ff=2048, dropout=0.0)
    model = build_transformer(cfg, 11, 13).eval()
    assert prepacked.prepack_linears(model) > 0
    layers = [m for m in model.modules() if isinstance(m, prepacked.PrepackedLinear)]
    src, src_len = torch.randint(3, 11, (2, 5)), torch.tensor([5, 3])
    kw = dict(bos_id=1, eos_id=2, max_len=4)
    first = greedy_decode(model, src, src_len, **kw)
    packed = [m._packed for m in layers]
    assert all(p is not None for p in packed)
    second = greedy_decode(model, src, src_len, **kw)
    assert all(m._packed is p for m, p in zip(layers, packed, strict=True))  # not made again
    assert second.tokens == first.tokens
    model.train()  # a training model is switched to eval and back: the layout is made again
    greedy_decode(model, src, src_len, **kw)
    assert model.training and all(m._packed is not p for m, p in zip(layers, packed, strict=True))
