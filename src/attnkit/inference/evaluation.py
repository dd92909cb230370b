"""Test-set scoring, written once: translate a split's sources and score them against
its references (sacreBLEU's BLEU statistics, which add up over shards, and chrF).

``Translator.evaluate`` (``translate eval``, the demo's test report) and the trainer's
``evaluate_split`` (validation BLEU, its statistics all-reduced across ranks) both call
:func:`translate_and_score`.
"""

from __future__ import annotations

from torch import nn

from attnkit.inference.decoding import translate
from attnkit.metrics import bleu_stats

__all__ = ["split_texts", "translate_and_score"]


def split_texts(data, split: str) -> tuple[list[str], list[str]]:
    """(source sentences, reference translations) of ``split`` as text: a
    ``TranslationData``'s ``sources``/``references``, or for a duck-typed data object
    with token pairs, the book's tokens joined by spaces."""
    if hasattr(data, "sources"):
        return data.sources(split), data.references(split)
    pairs = list(getattr(data, split))
    return [" ".join(s) for s, _ in pairs], [" ".join(t) for _, t in pairs]


def translate_and_score(
    model: nn.Module,
    data,
    sources: list[str],
    refs: list[str],
    *,
    max_len: int | None = None,
    batch_size: int = 256,
) -> tuple[list[str], list[int]]:
    """Greedy translations of ``sources`` (batched by length, in input order) and the
    BLEU statistics of them against ``refs`` (``metrics.bleu_stats``, tokenized as
    ``data.bleu_tokenize`` says: "none" for the book's words, "13a" for subword text).
    No sources: no translations and zero statistics."""
    if len(sources) != len(refs):
        raise ValueError(f"{len(sources)} sources but {len(refs)} references")
    if not sources:
        return [], [0] * 10
    hyps, _ = translate(model, data, sources, max_len=max_len, batch_size=batch_size)
    return hyps, bleu_stats(hyps, refs, getattr(data, "bleu_tokenize", "none"))
