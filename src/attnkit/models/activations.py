"""The feed-forward activations a config can name, one table for every model.

    relu       max(0, x)                                   the book's Transformer
    gelu       x Φ(x), exact (erf)                          BERT, nanoGPT
    gelu-tanh  x/2 (1 + tanh(√(2/π) (x + 0.044715 x³)))     GPT-2 ("gelu_new")
    silu       x σ(x) (swish)                               Marian / OPUS-MT

``activation_module(name)`` gives the ``nn.Module`` a block holds; ``activation_function
(name)`` the plain function the lean decoding step calls; ``check_activation`` validates a
config field. ``HF_ACTIVATIONS`` maps Hugging Face's ``activation_function`` names onto ours.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import one_of

__all__ = [
    "ACTIVATIONS",
    "HF_ACTIVATIONS",
    "activation_function",
    "activation_module",
    "check_activation",
]

# name -> (module factory, function); the function is the module's forward exactly
_TABLE: dict[str, tuple[Callable[[], nn.Module], Callable[[Tensor], Tensor]]] = {
    "relu": (nn.ReLU, F.relu),
    "gelu": (nn.GELU, F.gelu),
    "gelu-tanh": (partial(nn.GELU, approximate="tanh"), partial(F.gelu, approximate="tanh")),
    "silu": (nn.SiLU, F.silu),
}
ACTIVATIONS: tuple[str, ...] = tuple(_TABLE)

# Hugging Face's ACT2FN names (transformers.activations) -> ours; the rest do not map
HF_ACTIVATIONS: dict[str, str] = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu-tanh",
    "gelu_pytorch_tanh": "gelu-tanh",
    "gelu_fast": "gelu-tanh",  # the same tanh form, written with other constants
    "silu": "silu",
    "swish": "silu",
}


def check_activation(name: str, value: object) -> str:
    """``value`` if it is one of ``ACTIVATIONS``, else a ValueError/TypeError naming ``name``."""
    return one_of(name, value, ACTIVATIONS)


def activation_module(name: str) -> nn.Module:
    """A new module computing activation ``name`` (one of ``ACTIVATIONS``)."""
    return _TABLE[check_activation("activation", name)][0]()


def activation_function(name: str) -> Callable[[Tensor], Tensor]:
    """The function computing activation ``name``: (...) -> (...), elementwise."""
    return _TABLE[check_activation("activation", name)][1]
