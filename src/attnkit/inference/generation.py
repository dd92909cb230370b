"""Text from a trained language model: warm up on a prefix, then predict token by token.

Greedy (the book's ``predict_ch8``) or sampled at a temperature with a seeded generator.
"""

from __future__ import annotations

import torch
from torch import nn

from attnkit.data.text import Vocab

__all__ = ["generate", "model_device"]


def model_device(model, device: torch.device | str | None = None) -> torch.device:
    """``device`` if given, else the device of the model's first parameter (a module's or
    a scratch model's ``params``), else the CPU."""
    if device is not None:
        return torch.device(device)
    params = list(model.parameters()) if isinstance(model, nn.Module) else list(model.params)
    return params[0].device if params else torch.device("cpu")


def _prefix_tokens(prefix: str, vocab: Vocab, token: str, unknown: str) -> list[str]:
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    toks = list(prefix) if token == "char" else prefix.split()
    if not toks:
        raise ValueError(f"prefix must contain at least one {token} token, got {prefix!r}")
    missing = sorted({t for t in toks if t not in vocab})
    if missing and unknown == "error":
        raise ValueError(
            f"prefix {prefix!r} has tokens outside the vocabulary: {missing}; expected tokens "
            f"from the {len(vocab)}-token vocabulary (e.g. {vocab.idx_to_token[1:8]}). "
            "Normalize the prefix like the corpus, or pass unknown='unk' to map them to <unk>"
        )
    if unknown not in ("error", "unk"):
        raise ValueError(f"unknown must be 'error' or 'unk', got {unknown!r}")
    return toks


@torch.no_grad()
def generate(
    model,
    vocab: Vocab,
    prefix: str,
    num_preds: int = 50,
    *,
    temperature: float = 0.0,
    device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
    token: str = "char",
    unknown: str = "error",
) -> str:
    """Warm up on ``prefix`` one token at a time, then predict ``num_preds`` tokens.

    ``temperature == 0`` is greedy (argmax, the book's ``predict_ch8``); ``> 0`` samples
    from ``softmax(logits / temperature)`` with ``generator``. Tokens of the prefix
    outside the vocabulary raise ``ValueError`` (``unknown='unk'`` maps them to <unk>).
    Returns the prefix followed by the prediction (words joined by spaces).
    """
    if isinstance(num_preds, bool) or not isinstance(num_preds, int) or num_preds < 0:
        raise ValueError(f"num_preds must be a non-negative int, got {num_preds!r}")
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    toks = _prefix_tokens(prefix, vocab, token, unknown)
    device = model_device(model, device)
    was_training = isinstance(model, nn.Module) and model.training
    if isinstance(model, nn.Module):
        model.eval()
    try:
        state = model.begin_state(batch_size=1, device=device)
        outputs = [vocab[toks[0]]]
        for tok in toks[1:]:  # warm-up: feed the prefix, keep the state
            _, state = model(torch.tensor([[outputs[-1]]], device=device), state)
            outputs.append(vocab[tok])
        for _ in range(num_preds):
            logits, state = model(torch.tensor([[outputs[-1]]], device=device), state)  # (1, V)
            if temperature == 0:
                nxt = int(logits.argmax(dim=1).reshape(()))
            else:
                probs = torch.softmax(logits.reshape(-1).float() / temperature, dim=0).cpu()
                nxt = int(torch.multinomial(probs, 1, generator=generator))
            outputs.append(nxt)
    finally:
        if was_training:
            model.train()
    words = vocab.to_tokens(outputs)
    if token == "char":
        return prefix + "".join(words[len(toks) :])
    return " ".join([*toks, *words[len(toks) :]])
