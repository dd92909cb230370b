"""Test-set scoring, written once: translate a split's sources and score them against
its references (sacreBLEU's BLEU statistics, which add up over shards, and chrF).

``Translator.evaluate`` (``translate eval``, the demo's test report; greedy or beam) and
the trainer's ``evaluate_split`` (validation BLEU, its statistics all-reduced across
ranks) both call :func:`translate_and_score`, which decodes through the one path,
:func:`attnkit.inference.decoding.translate`.
"""

from __future__ import annotations

from torch import nn

from attnkit._validate import optional, positive_int, real
from attnkit.i18n import _
from attnkit.inference import decoding
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
    beam: int | None = None,
    length_penalty: float = 0.6,
    shortlist=None,
) -> tuple[list[str], list[int]]:
    """Translations of ``sources`` and their BLEU statistics against ``refs``.

    Args:
        model: an ``EncoderDecoder``.
        data: a ``TranslationData`` (see :func:`~attnkit.inference.decoding.translate`);
            its ``bleu_tokenize`` says how BLEU tokenizes ("none" for the book's words,
            "13a" for subword text; "none" when it has none).
        sources, refs: source sentences and their reference translations, as many of each.
        max_len: the most decoder steps per sentence (default ``data.max_len + 2``).
        batch_size: sentences per decoding batch.
        beam: None for greedy decoding, else beam search's beam size.
        length_penalty: beam search's GNMT alpha.
        shortlist: a vocabulary ``Shortlist`` for decoding, or None.

    Shape:
        decoded in batches of src (B, S) long, src_len (B,), B <= ``batch_size``.

    Returns:
        ``(hyps, stats)``: the translations' text in input order, and the ten BLEU
        statistics of ``metrics.bleu_stats`` (they add up over shards). No sources: no
        translations and zero statistics.
    """
    if len(sources) != len(refs):
        message = _("{sources} sources but {refs} references")
        raise ValueError(message.format(sources=len(sources), refs=len(refs)))
    optional(positive_int, "max_len", max_len)
    positive_int("batch_size", batch_size)
    optional(positive_int, "beam", beam)
    real("length_penalty", length_penalty, at_least=0.0)
    if not sources:
        return [], [0] * 10
    found = decoding.translate(
        model, data, sources,
        beam=beam, length_penalty=length_penalty, max_len=max_len, batch_size=batch_size,
        shortlist=shortlist,
    )  # fmt: skip
    hyps = [h.text for h in found]
    return hyps, bleu_stats(hyps, refs, getattr(data, "bleu_tokenize", "none"))
