"""Distance-based attention, d2l 1.0's 11.3.1: score(q, k) = -||q - k||^2 / 2, computed as
qᵀk - ||k||^2 / 2 (the -||q||^2 / 2 term is the same for every key, so the softmax drops
it): one matrix product and the keys' squared norms, never the (B, Q, K, D) differences.
Also serves 1.0's 11.1.1 (approximate key matching as in a database): as the width shrinks,
the distance softmax becomes an exact nearest-key lookup.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.attention.masking import masked_softmax
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["DistanceAttention", "direct_distance_weights", "distance_attention"]


class DistanceAttention(nn.Module):
    """Like ``DotProductAttention`` with score qᵀk / s^2 - ||k||^2 / (2 s^2), which gives the
    same weights as the Gaussian score -||q - k||^2 / (2 s^2); ``width`` is s."""

    def __init__(self, width: float = 1.0) -> None:
        super().__init__()
        self.width = width
        self.attention_weights: Tensor | None = None

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor, valid_lens=None) -> Tensor:
        # queries (B, Q, D), keys (B, K, D), values (B, K, Dv), valid_lens (B,) or (B, Q)
        half_sq_norms = (keys * keys).sum(-1).unsqueeze(1) / 2  # (B, 1, K): K numbers per row
        scores = (torch.bmm(queries, keys.transpose(1, 2)) - half_sq_norms) / self.width**2
        self.attention_weights = masked_softmax(scores, valid_lens)  # (B, Q, K)
        return torch.bmm(self.attention_weights, values)  # (B, Q, Dv)


def direct_distance_weights(queries, keys, valid_lens, width: float = 1.0) -> Tensor:
    """The definition, by brute force: softmax of -||q - k||^2 / (2 s^2), (B, Q, K, D)."""
    diff = queries.unsqueeze(2) - keys.unsqueeze(1)  # (B, Q, K, D)
    return masked_softmax(-(diff * diff).sum(-1) / (2 * width**2), valid_lens)


@topic
def distance_attention(*, small: bool = False, seed: int = 0) -> TopicResult:
    """11.3.1: the efficient form equals the definition (float64, masked), and costs less
    (counted); 11.1.1: a shrinking width turns it into nearest-key lookup."""
    check_args(small, seed)
    from attnkit.tour.cost import count_ops

    g = torch.Generator().manual_seed(seed)
    B, Q, K, D = 2, 6, 10, 8
    q = torch.randn(B, Q, D, generator=g, dtype=torch.float64)
    k = torch.randn(B, K, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, K, 3, generator=g, dtype=torch.float64)
    lens = torch.tensor([4, 10])
    att = DistanceAttention()
    out = att(q, k, v, lens)
    direct = direct_distance_weights(q, k, lens)
    masked_weight = float(att.attention_weights[0, :, 4:].abs().sum())
    err = float((att.attention_weights - direct).abs().max())
    out_err = float((out - torch.bmm(direct, v)).abs().max())
    # counted at several sizes: the efficient form never forms the (B, Q, K, D) differences
    counts = []
    for n, d in [(32, 16), (64, 32)] if small else [(64, 32), (128, 32), (256, 64)]:
        X = torch.randn(1, n, d, generator=g)  # n queries = keys = values of width d
        eff = count_ops(lambda X=X: DistanceAttention()(X, X, X))
        brute = count_ops(lambda X=X: torch.bmm(direct_distance_weights(X, X, None), X))
        counts.append({"n": n, "d": d, "efficient_flops": eff.flops,
                       "efficient_elements": eff.elementwise, "direct_flops": brute.flops,
                       "direct_elements": brute.elementwise})  # fmt: skip
    # 11.1.1: a query near key j; as the width shrinks the weight on key j goes to 1
    keys = torch.randn(1, 50, 4, generator=g, dtype=torch.float64)
    query = keys[:, 7:8] + 0.1 * torch.randn(1, 1, 4, generator=g, dtype=torch.float64)
    nearest = int(torch.cdist(query, keys).argmin())
    lookup = {}
    for s in (2.0, 0.5, 0.1, 0.02):
        lk = DistanceAttention(width=s)
        lk(query, keys, keys)
        lookup[str(s)] = float(lk.attention_weights[0, 0, nearest])
    values = {
        "weight_error": err,
        "output_error": out_err,
        "masked_weight": masked_weight,
        "counts": counts,
        "count_size": [n, d],
        "efficient_flops": eff.flops,
        "direct_flops": brute.flops,
        "efficient_elements": eff.elementwise,
        "direct_elements": brute.elementwise,
        "direct_over_efficient_elements": brute.elementwise / eff.elementwise,
        "direct_over_efficient_by_size": [
            c["direct_elements"] / c["efficient_elements"] for c in counts
        ],
        "nearest_key": nearest,
        "nearest_weight_by_width": lookup,
    }
    finding = (
        f"qᵀk - ||k||^2/2 gives the weights of -||q - k||^2/2 to {err:.1e} (outputs to "
        f"{out_err:.1e}), masked keys weight {masked_weight:.1f}; counted at n = {n} queries "
        f"and keys of width {d}, the definition writes {values['direct_over_efficient_elements']:.1f}x "
        f"the elements (it forms the (n, n, {d}) differences; the efficient form spends "
        f"{eff.flops} FLOPs in its two matrix products, the definition {brute.flops} in its "
        "one, the output, and does the rest elementwise). Weight on the nearest key as the width shrinks "
        + ", ".join(f"s = {s}: {w:.3f}" for s, w in lookup.items())
        + ": soft matching becomes exact lookup."
    )
    return TopicResult("attention_distance_distance_attention", finding, values, {})
