"""Shared by the exercises of d2l 0.17 sections 8.5-8.6 (and 1.0's 9.5-9.6): a tiny
character language model trained the book's way (SGD, sequential partitioning, the state
carried and detached between minibatches, gradient clipping), its held-out perplexity,
and the data it runs on. Not an experiment itself."""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.data.lm import load_corpus, seq_data_iter_sequential
from attnkit.exercises import corpora
from attnkit.models.rnn import RNNLM, build_lm

__all__ = [
    "EmbeddingLM",
    "char_data",
    "evaluate_perplexity",
    "make_lm",
    "reference_model",
    "reference_size",
    "train_char_lm",
]


def char_data(small: bool, max_tokens: int) -> tuple[str, Tensor, Tensor, object]:
    """(data name, training tokens, held-out tokens, vocab): the first ``max_tokens``
    characters of ``corpora.text_lines(small)``, the last 10% of them held out."""
    name, lines = corpora.text_lines(small)
    corpus, vocab = load_corpus(lines, "char", max_tokens)
    data = torch.tensor(corpus)
    cut = int(0.9 * len(data))
    return name, data[:cut], data[cut:], vocab


class EmbeddingLM(nn.Module):
    """``RNNLM`` with a learned embedding table in place of the one-hot input (8.5.2):
    ``forward(inputs (B, T), state)`` -> ``(logits (T*B, V), state)`` like ``RNNLM``."""

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.RNN(embed_size, num_hiddens)
        self.linear = nn.Linear(num_hiddens, vocab_size)

    def forward(self, inputs: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        Y, state = self.rnn(self.embedding(inputs.T), state)  # (T, B, H)
        return self.linear(Y.reshape(-1, Y.shape[-1])), state


def make_lm(vocab_size: int, num_hiddens: int, *, seed: int, activation: str = "tanh",
            num_layers: int = 1, embed_size: int = 0) -> nn.Module:  # fmt: skip
    """A one-hot ``RNNLM`` over ``nn.RNN`` (tanh or relu, ``num_layers``), or an
    ``EmbeddingLM`` when ``embed_size > 0``; initialised from ``seed``."""
    torch.manual_seed(seed)
    if embed_size:
        return EmbeddingLM(vocab_size, embed_size, num_hiddens)
    if activation == "tanh":
        return build_lm("rnn", vocab_size, num_hiddens, num_layers)
    rnn = nn.RNN(vocab_size, num_hiddens, num_layers, nonlinearity=activation)
    return RNNLM(rnn, vocab_size)


def train_char_lm(model: nn.Module, train: Tensor, *, steps: int, lr: float = 1.0,
                  clip: float | None = 1.0, batch_size: int = 32, num_steps: int = 35,
                  seed: int = 0, optimizer: str = "sgd") -> dict:  # fmt: skip
    """``steps`` minibatches of the book's sequential partitioning (epochs repeat with a
    fresh offset from ``seed``), the state carried and detached, the gradient's norm
    clipped to ``clip`` (None: not clipped). Returns the loss and gradient norm of every
    step and whether training diverged (a loss that is not finite stops it)."""
    rng = random.Random(seed)
    opt = (torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam)(model.parameters(), lr)
    losses: list[float] = []
    norms: list[float] = []
    while len(losses) < steps:
        state = None
        for X, Y in seq_data_iter_sequential(train, batch_size, num_steps, rng):  # (B, T)
            if state is not None:
                state = state.detach()
            logits, state = model(X, state)  # (T*B, V)
            loss = F.cross_entropy(logits, Y.T.reshape(-1))
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(
                model.parameters(), clip if clip is not None else math.inf
            )
            losses.append(float(loss.detach()))
            norms.append(float(norm))
            if not math.isfinite(losses[-1]):
                return {"losses": losses, "norms": norms, "diverged": True}
            opt.step()
            if len(losses) == steps:
                break
    return {"losses": losses, "norms": norms, "diverged": False}


@torch.no_grad()
def evaluate_perplexity(model: nn.Module, tokens: Tensor, rows: int = 8) -> float:
    """exp(mean cross-entropy) of next-token prediction over ``tokens``, read as ``rows``
    contiguous rows from a zero state (inf when the model's outputs are not finite)."""
    n = (len(tokens) - 1) // rows * rows
    X = tokens[:n].reshape(rows, -1)  # (rows, L)
    Y = tokens[1 : n + 1].reshape(rows, -1)
    logits, _ = model(X)  # (L*rows, V)
    loss = float(F.cross_entropy(logits, Y.T.reshape(-1)))
    return math.exp(loss) if math.isfinite(loss) and loss < 700 else math.inf


def reference_size(small: bool) -> dict:
    """The sizes every 8.5 experiment shares: hidden units, time steps, batch, SGD steps
    at the book's lr 1 with clipping θ = 1, and how many characters are read."""
    return {"num_hiddens": 64, "num_steps": 20, "batch_size": 32,
            "steps": 120 if small else 400, "max_tokens": 30000 if small else 200000}  # fmt: skip


_REFERENCE: dict[tuple[bool, int], tuple] = {}


def reference_model(small: bool, seed: int) -> tuple[str, nn.Module, object, Tensor, Tensor]:
    """(data name, trained tanh ``RNNLM``, vocab, training tokens, held-out tokens): the
    book's recipe at ``reference_size(small)``, trained once per process and shared by
    the sampling (8.5.3) and memory (1.0's 9.5.1) experiments. Do not train it further."""
    key = (small, seed)
    if key not in _REFERENCE:
        size = reference_size(small)
        name, train, held, vocab = char_data(small, size["max_tokens"])
        model = make_lm(len(vocab), size["num_hiddens"], seed=seed)
        train_char_lm(model, train, steps=size["steps"], num_steps=size["num_steps"],
                      batch_size=size["batch_size"], seed=seed)  # fmt: skip
        model.eval()
        _REFERENCE[key] = (name, model, vocab, train, held)
    return _REFERENCE[key]
