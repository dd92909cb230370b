"""Exercises of d2l 0.17 section 10.1 (attention cues): a random matrix made into
attention weights by a row-wise softmax."""

from __future__ import annotations

import torch

from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["random_softmax"]


def _row_checks(scores: torch.Tensor) -> dict:
    """Softmax each row of ``scores`` (queries, keys) and measure what the weights are:
    row sums, order, and how far log w - s is from constant along a row (the softmax is
    exp(s) normalised, so within a row w_i / w_j = exp(s_i - s_j) whatever the scores)."""
    weights = torch.softmax(scores, dim=-1)  # each row over the keys
    shift = weights.log() - scores  # (queries, keys): constant along each row
    ratio = weights.max(-1).values / weights.min(-1).values  # (queries,)
    return {
        "weights": weights,
        "row_sum_error": float((weights.sum(-1) - 1).abs().max()),
        "same_order": bool((scores.argsort(-1) == weights.argsort(-1)).all()),
        "shift_error": float((shift.max(-1).values - shift.min(-1).values).max()),
        "max_ratio": float(ratio.max()),
        "score_range": float((scores.max(-1).values - scores.min(-1).values).max()),
    }


@topic
def random_softmax(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.1.2: a random 10 x 10 matrix (the book's: uniform in [0, 1)), softmax over each
    row: every row is a distribution that keeps its scores' order, and within a row the
    weights' ratio is e to the scores' difference. A second matrix with spread scores
    (normal, sd 3) shows the same law giving sharp rows."""
    check_args(small, seed)
    from attnkit.viz import show_heatmaps

    g = torch.Generator().manual_seed(seed)
    book = _row_checks(torch.rand(10, 10, generator=g, dtype=torch.float64))
    spread = _row_checks(3 * torch.randn(10, 10, generator=g, dtype=torch.float64))
    weights = book["weights"]
    fig = show_heatmaps(
        weights.float().reshape(1, 1, 10, 10),
        xlabel=gettext("keys"),
        ylabel=gettext("queries"),
        figsize=(3, 3),
    )
    values = {
        "row_sum_error": max(book["row_sum_error"], spread["row_sum_error"]),
        "min_weight": float(weights.min()),
        "max_weight": float(weights.max()),
        "same_order": book["same_order"] and spread["same_order"],
        "shift_error": max(book["shift_error"], spread["shift_error"]),
        "max_ratio_in_row": book["max_ratio"],
        "score_range": book["score_range"],
        "spread_max_ratio": spread["max_ratio"],
        "spread_score_range": spread["score_range"],
        "spread_max_weight": float(spread["weights"].max()),
    }
    finding = (
        f"rows sum to 1 within {values['row_sum_error']:.1e}; within a row log w - s is "
        f"constant to {values['shift_error']:.1e}, so the largest ratio in a row is e to the "
        f"row's score range: {book['max_ratio']:.2f} for uniform scores in [0, 1) (weights "
        f"{values['min_weight']:.3f}-{values['max_weight']:.3f}), {spread['max_ratio']:.3g} "
        f"for scores of sd 3 (largest weight {values['spread_max_weight']:.2f})"
    )
    return TopicResult("attention_cues_random_softmax", finding, values, {"weights": fig})
