"""Fixtures of the inference tests: a tiny generated corpus and tiny models (as in
tests/translate/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from attnkit.data.translation import load_translation_data
from attnkit.models.registry import build_model

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
