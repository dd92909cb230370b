"""Attention maps of a translated sentence, their pictures, and the demo end to end (tiny)."""

from __future__ import annotations

import pytest
import torch

from attnkit.data.translation import load_translation_data
from attnkit.inference.attention_maps import attention_maps, plot_attention_maps
from attnkit.models.registry import build_model


@pytest.fixture(scope="module")
def data():
    return load_translation_data(num_pairs=1200, seed=1)


def test_transformer_maps_shapes_labels_and_rows(data, tmp_path):
    torch.manual_seed(0)
    cfg = {"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32, "dropout": 0.0}
    model = build_model("transformer", cfg, len(data.src_vocab), len(data.tgt_vocab))
    sentence = " ".join(data.test[0][0])
    maps = attention_maps(model, data, sentence, tokens=[4, 5, 6])
    S, T = len(maps.source), len(maps.outputs)
    assert maps.source[-1] == "<eos>" and S == len(data.test[0][0]) + 1
    assert maps.decoder_inputs[0] == "<bos>" and T == 4  # 3 tokens + <eos>
    assert maps.encoder_self.shape == (2, 2, S, S)
    assert maps.decoder_self.shape == (2, 2, T, T)
    assert maps.cross.shape == (2, 2, T, S)
    for w in (maps.encoder_self, maps.decoder_self, maps.cross):
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    assert (maps.decoder_self.triu(1) == 0).all()
    js = maps.to_json()
    assert len(js["cross"][0][0]) == T and len(js["cross"][0][0][0]) == S
    names = plot_attention_maps(maps, tmp_path / "a.png")
    assert len(names) == 3 and (tmp_path / "a.png").stat().st_size > 5000
    names = plot_attention_maps(maps, tmp_path / "grid.png", all_heads=True)
    assert len(names) == 3 * 2 * 2


def test_unfinished_hypothesis_has_no_eos_row(data):
    """A search stopped at its step limit: rows are the tokens produced, none labelled <eos>."""
    torch.manual_seed(0)
    cfg = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.0}
    model = build_model("transformer", cfg, len(data.src_vocab), len(data.tgt_vocab))
    sentence = " ".join(data.test[0][0])
    maps = attention_maps(model, data, sentence, tokens=[4, 5, 6], finished=False)
    assert maps.outputs == data.tgt_vocab.to_tokens([4, 5, 6])
    assert maps.decoder_inputs == ["<bos>", *data.tgt_vocab.to_tokens([4, 5])]
    assert maps.cross.shape == (1, 2, 3, len(maps.source))
    # greedy decoding that hits max_len reports the same way
    greedy = attention_maps(model, data, sentence, max_len=2)
    assert len(greedy.outputs) == len(greedy.decoder_inputs) <= 2
    assert "<eos>" not in greedy.outputs[:-1]
    assert greedy.outputs[-1] == "<eos>" or len(greedy.outputs) == 2


def test_bahdanau_maps_single_alignment(data):
    torch.manual_seed(0)
    model = build_model(
        "bahdanau",
        {"embed_size": 8, "num_hiddens": 8, "num_layers": 1, "dropout": 0.0},
        len(data.src_vocab),
        len(data.tgt_vocab),
    )
    maps = attention_maps(model, data, " ".join(data.test[1][0]), tokens=[5, 6])
    assert maps.encoder_self is None and maps.cross.shape == (1, 1, 3, len(maps.source))
    torch.testing.assert_close(maps.cross.sum(-1), torch.ones(1, 1, 3))
