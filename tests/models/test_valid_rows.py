"""The encoder's FFN over the valid positions only: the same outputs at every valid
position, in inference only, and only where padding is worth skipping."""

from __future__ import annotations

import pytest
import torch

from attnkit.inference.decoding import greedy_decode
from attnkit.models import transformer_step, valid_rows
from attnkit.models.transformer import TransformerConfig, build_transformer


def _model_and_batch(seed: int = 0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(d_model=16, num_heads=4, num_layers=2, d_ff=32, pre_norm=seed % 2 == 1)
    model = build_transformer(cfg, 13, 11).eval()
    src = torch.randint(0, 13, (5, 9))
    src_len = torch.tensor([9, 4, 1, 6, 2])  # 31 of 45 positions valid: 31% padding
    return model, src, src_len


def test_valid_rows_are_the_flat_valid_positions_when_padding_is_worth_skipping():
    lens = torch.tensor([3, 1, 4])
    assert valid_rows.valid_rows(lens, 3, 4).tolist() == [0, 1, 2, 4, 8, 9, 10, 11]
    assert valid_rows.valid_rows(torch.tensor([4, 4, 3]), 3, 4) is None  # 1/12 padding
    assert valid_rows.valid_rows(None, 3, 4) is None
    assert valid_rows.valid_rows(torch.ones(3, 4, dtype=torch.long), 3, 4) is None  # per query


@pytest.mark.parametrize("seed", [0, 1])  # post-norm, pre-norm
def test_the_encoder_skips_the_padding_in_inference_with_the_same_valid_outputs(seed, monkeypatch):
    model, src, src_len = _model_and_batch(seed)
    seen = []
    real = valid_rows.on_valid_rows
    monkeypatch.setattr(valid_rows, "on_valid_rows", lambda *a: seen.append(1) or real(*a))
    with torch.no_grad():
        packed = model.encoder(src, src_len)
    assert len(seen) == 2  # each block's FFN
    a = greedy_decode(model, src, src_len, bos_id=1, eos_id=2, max_len=7)
    monkeypatch.setattr(valid_rows, "MIN_PADDING", 1.1)  # never skip
    with torch.no_grad():
        padded = model.encoder(src, src_len)
    b = greedy_decode(model, src, src_len, bos_id=1, eos_id=2, max_len=7)
    assert len(seen) == 4  # the two greedy encodings skipped, the padded ones did not
    valid = torch.arange(9)[None] < src_len[:, None]  # (B, S)
    torch.testing.assert_close(packed[valid], padded[valid], rtol=1e-6, atol=1e-6)
    assert torch.isfinite(packed).all()
    assert not torch.equal(packed[~valid], padded[~valid])  # the padding was skipped
    # decoding reads the padded positions only as masked keys: the same translations
    assert a.tokens == b.tokens


def test_training_autograd_and_hooks_run_every_row(monkeypatch):
    model, src, src_len = _model_and_batch()
    seen = []
    real = valid_rows.on_valid_rows
    monkeypatch.setattr(valid_rows, "on_valid_rows", lambda *a: seen.append(1) or real(*a))
    model.encoder(src, src_len)  # autograd on
    model.train()
    with torch.no_grad():
        model.encoder(src, src_len)
    model.eval()
    handle = model.encoder.blks[0].ffn.register_forward_hook(lambda *a: None)
    with torch.no_grad():
        model.encoder(src, src_len)
    handle.remove()
    assert len(seen) == 1  # the hooked block ran as a module, the other skipped its padding
    assert transformer_step.hooked(model.encoder.blks[0]) is False
