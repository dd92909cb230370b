"""The attention chapter's arguments (d2l 0.17, chapters 8-10) as runnable experiments.

Each topic is a function ``topic(*, small=False, seed=0) -> TopicResult``: it prints
nothing, returns its finding, the measured values and its figures. ``run_topic`` looks
one up by name; ``attnkit tour TOPIC`` is the command line. Not imported by
``import attnkit`` (the topic modules load on first use).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from attnkit.tour.base import TopicResult, check_args

__all__ = ["TOPICS", "TopicResult", "get_topic", "run_topic", "topic_names"]

# name -> (module, function, one-line description); in the chapter's order
TOPICS: dict[str, tuple[str, str, str]] = {
    "cues": ("pooling", "cues", "attention cues: pooling without a query vs steered by a query"),
    "kernels": (
        "pooling",
        "kernels",
        "kernel regression: five kernels, widths, convergence, the learned width",
    ),
    "scoring": (
        "scoring_and_scaling",
        "scoring",
        "scoring exercises: random keys, the bilinear score, the vector-sum score",
    ),
    "scaling": (
        "scoring_and_scaling",
        "scaling",
        "why 1/sqrt(d): q.k variance, softmax saturation, gradients",
    ),
    "self-attention": (
        "selfattn",
        "self_attention",
        "self-attention in matrix form equals the library's, one head and many",
    ),
    "multihead": (
        "selfattn",
        "multihead",
        "heads attend to different things; additive heads; parameter counts",
    ),
    "positions": (
        "positions",
        "positions",
        "sinusoidal positions: offsets are rotations, uniqueness, binary analogy",
    ),
    "architectures": (
        "architectures",
        "architectures",
        "CNN vs RNN vs self-attention: time, sequential ops, maximum path length",
    ),
    "norms": ("architectures", "norms", "LayerNorm vs BatchNorm; gradients with/without residuals"),
    "gates": ("recurrent", "gates", "GRU and LSTM gates forced to their extremes"),
    "bptt": ("recurrent", "bptt", "backpropagation through time: gradient norms, truncation"),
    "autoregressive": (
        "recurrent",
        "autoregressive",
        "noisy sine, tau-lag model: one-step vs k-step-ahead predictions",
    ),
    "seq2seq": ("translation", "seq2seq", "seq2seq with and without Bahdanau attention"),
    "transformer": (
        "translation",
        "transformer",
        "the trained Transformer: maps per layer and head, encoder/decoder alone",
    ),
}


def topic_names() -> list[str]:
    return list(TOPICS)


def get_topic(name: str) -> Callable[..., TopicResult]:
    """The topic function called ``name`` (ValueError naming the topics otherwise)."""
    if not isinstance(name, str):
        raise TypeError(f"topic name must be a str, got {type(name).__name__}")
    if name not in TOPICS:
        raise ValueError(f"unknown topic {name!r}; choose one of: {', '.join(TOPICS)}")
    module, function, _ = TOPICS[name]
    return getattr(importlib.import_module(f"attnkit.tour.{module}"), function)


def run_topic(name: str, *, small: bool = False, seed: int = 0) -> TopicResult:
    """Run topic ``name``; its ``seconds`` is the wall-clock time taken."""
    check_args(small, seed)
    return get_topic(name)(small=small, seed=seed)
