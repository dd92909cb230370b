"""Choosing the next token from a language model's logits: greedy, or sampled with a
temperature, top-k and top-p (nucleus).

Shape legend: B rows, V vocabulary.

- **Greedy** (``temperature=0``; the book's ``predict_ch8``) takes the argmax.
- **Sampling** (``temperature > 0``) draws from ``softmax(logits / temperature)``
  restricted to the ``top_k`` most likely tokens and then to the nucleus, the smallest set
  of most likely tokens whose mass is >= ``top_p`` (Holtzman et al., 2019), renormalized:
  ``next_token_probs``. The draws are made on the CPU from a ``torch.Generator`` (``seed``
  gives one of its own), so a seed gives the same sample on any device, for the same logits.

``token_picker`` checks the options once and returns ``pick(logits (B, V)) -> ids (B,)``,
what ``attnkit.inference.generation`` calls at every step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from attnkit._validate import non_negative_int, optional, positive_int, real
from attnkit.i18n import N_, _
from attnkit.inference.row_top import row_argmax

__all__ = ["check_top_p", "next_token_probs", "token_picker"]


def check_top_p(top_p: float | None) -> float | None:
    """``top_p`` if it is None or a number in (0, 1] (ValueError/TypeError otherwise)."""
    return optional(
        real, "top_p", top_p, above=0.0, at_most=1.0,
        expected=N_("a number in (0, 1] (the nucleus: the smallest set with mass >= top_p)"),
    )  # fmt: skip


def next_token_probs(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Tensor:
    """The distribution a sampled next token is drawn from.

    Args:
        logits: next-token scores.
        temperature: > 0; the scores are divided by it.
        top_k: keep the k highest scores (ties with the k-th kept too); None: all.
        top_p: then keep the nucleus, the smallest set of most likely tokens whose mass
            is >= top_p, in (0, 1]; None or 1: all.

    Shape:
        logits (..., V); returns (..., V).

    Returns:
        float32 probabilities, exactly 0 outside the kept tokens, summing to 1.
    """
    temperature = real("temperature", temperature, above=0.0)
    top_k = optional(positive_int, "top_k", top_k)
    top_p = check_top_p(top_p)
    scores = logits.float() / temperature  # (..., V)
    if top_k is not None and top_k < scores.shape[-1]:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]  # (..., 1)
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)  # (..., V)
    if top_p is not None and top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
        mass_before = sorted_p.cumsum(-1) - sorted_p  # mass of the more likely tokens
        mass_before[..., 0] = 0.0
        keep = torch.zeros_like(probs, dtype=torch.bool)
        keep.scatter_(-1, order, mass_before < top_p)  # (..., V): the nucleus
        probs = probs.masked_fill(~keep, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def token_picker(
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
) -> Callable[[Tensor], Tensor]:
    """``pick(logits (B, V)) -> next ids (B,)`` on the CPU: the argmax at
    ``temperature=0``, else a draw from ``next_token_probs`` with ``generator`` (or one
    seeded with ``seed``; neither: torch's global RNG). The options are checked here."""
    temperature = real("temperature", temperature, at_least=0.0, expected=N_(">= 0 (0 = greedy)"))
    top_k = optional(positive_int, "top_k", top_k)
    top_p = check_top_p(top_p)
    seed = optional(non_negative_int, "seed", seed)
    if seed is not None and generator is not None:
        raise ValueError(_("give seed or generator, not both"))
    if generator is not None and not isinstance(generator, torch.Generator):
        message = _("generator must be a torch.Generator, got {type}")
        raise TypeError(message.format(type=type(generator).__name__))
    if seed is not None:
        generator = torch.Generator().manual_seed(seed)

    def pick(logits: Tensor) -> Tensor:
        if temperature == 0:
            return row_argmax(logits).cpu()
        probs = next_token_probs(logits, temperature, top_k, top_p).cpu()  # (B, V)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    return pick
