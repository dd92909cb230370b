"""Shared fixtures of the translation tests: a tiny generated corpus, tiny models."""

from __future__ import annotations

import importlib

import pytest
import torch

from attnkit.data.translation import load_translation_data
from attnkit.models.registry import build_model

# 2 cores shared with other jobs: one thread avoids oversubscription (tiny models anyway).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_data():
    """~300 generated EN-FR pairs (seconds to train on)."""
    return load_translation_data(None, num_pairs=300, max_len=12, seed=0)


@pytest.fixture
def tiny_model(tiny_data):
    def make(arch: str = "bahdanau", seed: int = 0, **config):
        torch.manual_seed(seed)
        config = {"embed_size": 16, "num_hiddens": 16, "num_layers": 2, "dropout": 0.1, **config}
        return build_model(arch, config, len(tiny_data.src_vocab), len(tiny_data.tgt_vocab))

    return make


@pytest.fixture
def drawn(monkeypatch):
    """(maps, panel titles) of every plot_attention_maps call the CLI makes."""
    # the module (attnkit.attention_maps is the function re-exported by attnkit)
    module = importlib.import_module("attnkit.inference.attention_maps")
    plot = module.plot_attention_maps
    calls = []

    def spy(maps, path, all_heads=False):
        calls.append((maps, plot(maps, path, all_heads=all_heads)))
        return calls[-1][1]

    monkeypatch.setattr(module, "plot_attention_maps", spy)
    return calls
