"""Which head resolves the pronoun, and does the translator need it: attention accuracy per
layer x head (Clark et al. 2019; Voita et al. 2018) and ablation (Michel et al. 2019).

For each row with ``antecedent`` and ``distractor`` (:mod:`attnkit.inference.contrast`),
one teacher-forced pass over the ``correct`` target records every attention map
(:func:`attnkit.inference.attention_maps.attention_maps`). Per kind of attention, layer and
head, the row is a *win* when the query attends more to the antecedent than to the
distractor, a *loss* when less, a *tie* when equally (to a word = the sum over its pieces;
from a word of several pieces = the mean of their rows):

- ``encoder``: encoder self-attention, the query is the source pronoun;
- ``cross``: encoder-decoder attention at the pronoun's target position: the decoder step
  that predicts the first target token where ``correct`` and ``contrastive`` differ (the
  step that chooses ``il`` or ``elle``), over the source candidates;
- ``decoder``: decoder self-attention at that step over the candidates' words in the
  target (``antecedent_target``/``distractor_target`` columns, earlier positions only; a
  French noun phrase with its article, ``la rue``, counts the article that shows the
  gender).

A Bahdanau model has one ``cross`` map (1 layer, 1 head); a plain GRU seq2seq none.
**Antecedent accuracy** is wins / rows with its Wilson interval; the **distractor rate**
is losses / rows; the **sign test** (wins against losses, ties dropped, two-sided exact
binomial) says whether the head prefers either, and its Bonferroni bound multiplies it by
the number of heads looked at. The best head is the one with the most wins.

**Ablation**: a head's output is zeroed (its slice of the input of the attention's output
projection ``W_o``, through a forward pre-hook: no change to the model or its state) and
every row rescored; a head's *cost* is the accuracy lost. The best head's cost is compared
with the median cost of the other heads; McNemar's exact test on the rows (one-sided: the
best head's ablation turns more rows wrong than the median head's) says whether the
difference is more than chance.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch

from attnkit.i18n import _
from attnkit.inference.contrast_rows import (
    Rate,
    bare,
    find_words,
    pronoun_index,
    score_pairs,
    words,
)

__all__ = [
    "KINDS",
    "ablate_head",
    "ablation",
    "best_head",
    "head_analysis",
    "mcnemar_one_sided",
    "sign_test",
    "transformer_heads",
]

KINDS = ("encoder", "cross", "decoder")


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial p-value of ``wins`` against ``losses`` at 1/2."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def mcnemar_one_sided(b: int, c: int) -> float:
    """P(X >= b) for X ~ Binomial(b + c, 1/2): ``b`` rows one way, ``c`` the other."""
    n = b + c
    if n == 0:
        return 1.0
    return sum(math.comb(n, i) for i in range(b, n + 1)) / 2**n


def transformer_heads(model) -> list[tuple[str, int, int]]:
    """(kind, layer, head) of every attention head of an attnkit Transformer (0-based);
    [] for a model of another kind."""
    enc, dec = getattr(model.encoder, "blks", None), getattr(model.decoder, "blks", None)
    if enc is None or dec is None:
        return []
    out = []
    for kind, blocks, name in (("encoder", enc, "attention"), ("decoder", dec, "attention1"),
                               ("cross", dec, "attention2")):  # fmt: skip
        for layer, block in enumerate(blocks):
            heads = getattr(block, name).num_heads
            out += [(kind, layer, h) for h in range(heads)]
    return out


def _attention_module(model, kind: str, layer: int):
    if kind == "encoder":
        return model.encoder.blks[layer].attention
    name = {"decoder": "attention1", "cross": "attention2"}[kind]
    return getattr(model.decoder.blks[layer], name)


@contextlib.contextmanager
def ablate_head(model, kind: str, layer: int, head: int) -> Iterator[None]:
    """Within the block, head ``head`` of ``kind``'s attention in ``layer`` (0-based) of a
    Transformer outputs zeros: its slice of ``W_o``'s input is zeroed by a forward
    pre-hook (one-position decoding then runs the modules, which honour it)."""
    attention = _attention_module(model, kind, layer)
    H = attention.num_heads
    if not 0 <= head < H:
        raise ValueError(_("head must be in [0, {heads}), got {head}").format(heads=H, head=head))

    def zero(module, args):
        x = args[0]  # (B, Q, D): the H heads' outputs side by side
        width = x.shape[-1] // H
        x = x.clone()
        x[..., head * width : (head + 1) * width] = 0
        return (x, *args[1:])

    handle = attention.W_o.register_forward_pre_hook(zero)
    try:
        yield
    finally:
        handle.remove()


def _word_pieces(labels: list[str], subwords: bool) -> tuple[list[str], list[list[int]]]:
    """(bare word per word, its token indices) of a token sequence."""
    from attnkit.inference.attention_maps import word_groups

    groups = word_groups(labels) if subwords else [[i] for i in range(len(labels))]
    text = ["".join(labels[i] for i in g).replace("\u2581", " ").strip() for g in groups]
    return [bare(t) for t in text], groups


def _span(words_: list[str], groups: list[list[int]], phrase: str) -> tuple[int, list[int]] | None:
    """(first word index, token indices) of ``phrase`` in the words, or None."""
    i = find_words(words_, phrase)
    if i is None:
        return None
    n = len(words(phrase))
    return i, [p for g in groups[i : i + n] for p in g]


def _row_outcomes(translator, row, correct: list[int], contrastive: list[int]) -> dict:
    """{kind: sign tensor (L, H)} for one row (kinds that apply only)."""
    data = translator.data
    subwords = getattr(data, "tokenizer", None) is not None
    maps = translator.maps(row.source, correct, finished=True)
    found = {}
    src_words, src_groups = _word_pieces(maps.source, subwords)
    ante, dist = _span(src_words, src_groups, row.antecedent), _span(src_words, src_groups,
                                                                     row.distractor)  # fmt: skip
    if ante is None or dist is None:
        return found
    step = next((i for i, (a, b) in enumerate(zip(correct, contrastive)) if a != b),
                min(len(correct), len(contrastive)))  # fmt: skip

    def sign(rows_: torch.Tensor, a: list[int], d: list[int]) -> torch.Tensor:
        return torch.sign(rows_[..., a].sum(-1) - rows_[..., d].sum(-1))

    if maps.encoder_self is not None:
        after = max(ante[0], dist[0]) + 1
        p = pronoun_index(src_words, row.pronoun, after)
        if p is not None:
            query = maps.encoder_self[:, :, src_groups[p], :].mean(2)  # (L, H, S)
            found["encoder"] = sign(query, ante[1], dist[1])
    if maps.cross is not None and step < maps.cross.shape[2]:
        found["cross"] = sign(maps.cross[:, :, step, :], ante[1], dist[1])
    if maps.decoder_self is not None and row.antecedent_target:
        out_words, out_groups = _word_pieces(maps.outputs, subwords)
        ta, td = (_span(out_words, out_groups, row.antecedent_target),
                  _span(out_words, out_groups, row.distractor_target))  # fmt: skip
        if ta is not None and td is not None and max(ta[1] + td[1]) < step:
            keys = maps.decoder_self[:, :, step, :]  # decoder input j + 1 is output j
            found["decoder"] = sign(keys, [j + 1 for j in ta[1]], [j + 1 for j in td[1]])
    return found


def head_analysis(translator, rows, ids: list[tuple[list[int], list[int]]]) -> dict | None:
    """Per kind: wins, losses and ties per (layer, head) over the rows with candidates,
    their accuracy, Wilson interval, distractor rate and sign test; ``best``: the head
    with the most wins. None for a model without attention maps (GRU seq2seq)."""
    counts: dict[str, list[torch.Tensor]] = {}
    used = {kind: 0 for kind in KINDS}
    candidates = 0
    for row, (correct, contrastive) in zip(rows, ids):
        if not row.antecedent:
            continue
        candidates += 1
        for kind, s in _row_outcomes(translator, row, correct, contrastive).items():
            c = counts.setdefault(kind, [torch.zeros_like(s) for _ in range(3)])
            c[0] += s > 0
            c[1] += s < 0
            c[2] += s == 0
            used[kind] += 1
    if not counts:
        return None
    heads_seen = sum(c[0].numel() for c in counts.values())
    tables = {}
    for kind, (w, lo, t) in counts.items():
        L, H = w.shape
        n = used[kind]
        cells = [[_cell(int(w[i, j]), int(lo[i, j]), int(t[i, j]), n, heads_seen)
                  for j in range(H)] for i in range(L)]  # fmt: skip
        tables[kind] = {"layers": L, "heads": H, "rows": n, "cells": cells}
    skipped = {k: candidates - used[k] for k in tables}
    return {"kinds": tables, "rows_with_candidates": candidates, "skipped": skipped,
            "best": best_head(tables)}  # fmt: skip


def _cell(wins: int, losses: int, ties: int, n: int, heads_seen: int) -> dict:
    lo, hi = Rate(wins, n).interval
    p = sign_test(wins, losses)
    return {"wins": wins, "losses": losses, "ties": ties, "accuracy": wins / n, "low": lo,
            "high": hi, "distractor_rate": losses / n, "p_value": p,
            "p_bonferroni": min(1.0, p * heads_seen)}  # fmt: skip


def best_head(tables: dict) -> dict | None:
    """The head with the most wins (fewest losses on a tie) across ``tables``' kinds:
    {kind, layer, head (1-based), rows, and its cell's numbers}."""
    best = None
    for kind, table in tables.items():
        for i, row in enumerate(table["cells"]):
            for j, cell in enumerate(row):
                key = (cell["wins"] / table["rows"], -cell["losses"] / table["rows"])
                if best is None or key > best[0]:
                    best = (key, {"kind": kind, "layer": i + 1, "head": j + 1,
                                  "rows": table["rows"], **cell})  # fmt: skip
    return None if best is None else best[1]


def ablation(translator, rows, ids, report, *, best: dict | None = None,
             batch_size: int = 64) -> dict:  # fmt: skip
    """Each Transformer head ablated in turn (see the module docstring): per head the
    accuracy, its cost, the mean margin and the margin lost (nats); the best head
    (``best``: a :func:`best_head` entry; None: the costliest head by margin) against the
    median of the others, by accuracy (McNemar) and by margin (paired sign test)."""
    model, data = translator.model, translator.data
    base = [c - w for c, w in report.scores]
    base_acc = report.accuracy().value
    sources = [r.source for r in rows for _ in range(2)]
    targets = [t for pair in ids for t in pair]
    heads = []
    margins: dict[tuple[str, int, int], list[float]] = {}
    for kind, layer, head in transformer_heads(model):
        with ablate_head(model, kind, layer, head):
            flat = score_pairs(model, data, sources, targets, batch_size)
        m = [c - w for c, w in zip(flat[::2], flat[1::2])]
        margins[(kind, layer + 1, head + 1)] = m
        accuracy = sum(x > 0 for x in m) / len(m)
        heads.append({"kind": kind, "layer": layer + 1, "head": head + 1, "accuracy": accuracy,
                      "cost": base_acc - accuracy, "mean_margin": sum(m) / len(m),
                      "margin_cost": (sum(base) - sum(m)) / len(m)})  # fmt: skip
    if not heads:
        return {}
    key = lambda h: (h["kind"], h["layer"], h["head"])  # noqa: E731
    if best is None:
        chosen = max(heads, key=lambda h: h["margin_cost"])
    else:
        chosen = next(h for h in heads if key(h) == key(best))
    others = [h for h in heads if h is not chosen]
    median = _median(others, "cost") if others else chosen
    median_m = _median(others, "margin_cost") if others else chosen
    a, m = margins[key(chosen)], margins[key(median)]
    b = sum(y > 0 >= x for x, y in zip(a, m))  # wrong without the best head only
    c = sum(x > 0 >= y for x, y in zip(a, m))
    a, m = margins[key(chosen)], margins[key(median_m)]
    lower = sum(x < y for x, y in zip(a, m))  # rows whose margin the best head's loss cuts more
    higher = sum(x > y for x, y in zip(a, m))
    return {
        "accuracy": base_acc,
        "mean_margin": sum(base) / len(base),
        "heads": heads,
        "best": chosen,
        "median": median,
        "median_margin": median_m,
        "cost_difference": chosen["cost"] - median["cost"],
        "margin_difference": chosen["margin_cost"] - median_m["margin_cost"],
        "discordant": [b, c],
        "p_value": mcnemar_one_sided(b, c),
        "margin_rows": [lower, higher],
        "margin_p_value": mcnemar_one_sided(lower, higher),
        "test": _(
            "accuracy: McNemar's exact test, one-sided; margin: paired sign test over "
            "rows, one-sided"
        ),
    }


def _median(heads: list[dict], measure: str) -> dict:
    """The head whose ``measure`` is the median (the lower middle one of an even count)."""
    ordered = sorted(heads, key=lambda h: h[measure])
    return ordered[(len(ordered) - 1) // 2]
