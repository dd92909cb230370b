"""Fixtures of the translation tests: the drawn spy (tiny_data and tiny_model: tests/conftest.py)."""

from __future__ import annotations

import importlib

import pytest
import torch

# 2 cores shared with other jobs: one thread avoids oversubscription (tiny models anyway).
torch.set_num_threads(1)


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
