"""Exercises of d2l 0.17 section 10.1 (attention cues): a random matrix made into
attention weights by a row-wise softmax."""

from __future__ import annotations

import torch

from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["random_softmax"]


@topic
def random_softmax(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.1.2: a random 10 x 10 matrix, softmax over each row: every row is a
    distribution (non-negative, sums to 1), and the softmax keeps each row's order."""
    check_args(small, seed)
    from attnkit.viz import show_heatmaps

    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(10, 10, generator=g, dtype=torch.float64)  # (queries, keys)
    weights = torch.softmax(scores, dim=-1)  # each row over the keys
    row_sums = weights.sum(-1)
    # the softmax is monotone in each row: the ranks of scores and weights agree
    same_order = bool((scores.argsort(-1) == weights.argsort(-1)).all())
    # scores in [0, 1) differ by < 1, so no weight can exceed e^1 times another in its row
    ratio = float((weights.max(-1).values / weights.min(-1).values).max())
    fig = show_heatmaps(
        weights.float().reshape(1, 1, 10, 10),
        xlabel=gettext("keys"),
        ylabel=gettext("queries"),
        figsize=(3, 3),
    )
    values = {
        "row_sum_error": float((row_sums - 1).abs().max()),
        "min_weight": float(weights.min()),
        "max_weight": float(weights.max()),
        "same_order": same_order,
        "max_ratio_in_row": ratio,
    }
    finding = (
        f"rows sum to 1 within {values['row_sum_error']:.1e}; weights "
        f"{values['min_weight']:.3f}-{values['max_weight']:.3f}, the largest ratio within "
        f"a row {ratio:.2f} < e"
    )
    return TopicResult("attention_cues_random_softmax", finding, values, {"weights": fig})
