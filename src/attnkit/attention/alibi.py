"""ALiBi (Press, Smith and Lewis, 2021): attention with linear biases instead of positions.

Shape legend: H heads, Q queries, K keys.

No position is added to the inputs. Each head h adds to its scores a penalty linear in the
distance between query i and key j:

    scores[h, i, j] = q_i · k_j / sqrt(Dh) - m_h (i - j)        (j <= i: causal)

with a fixed geometric sequence of slopes: for n heads, a power of two, m_h = r^h
(h = 1 .. n) with r = 2^(-8/n) (8 heads: 1/2, 1/4, ..., 1/256). For other n the paper takes
the slopes of the largest power of two below, 2^⌊log2 n⌋, and then every other slope of
twice that many heads until there are n (``alibi_slopes``, the paper's own code).

The queries are the last Q of K positions (query i sits at position K - Q + i), as with a
key/value cache. Written ``-m_h |i - j|``, the bias is the paper's for the keys a causal
query sees and its symmetric extension for a non-causal one.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor, nn

from attnkit._validate import positive_int
from attnkit.i18n import _

__all__ = ["ALiBi", "alibi_bias", "alibi_slopes"]


def alibi_slopes(num_heads: int) -> list[float]:
    """The paper's slopes m_1 .. m_n for ``num_heads`` = n heads, largest first."""
    n = positive_int("num_heads", num_heads)

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)  # r = 2^(-8/n); m_h = r^h
        return [start ** (h + 1) for h in range(n)]

    if math.log2(n).is_integer():
        return power_of_two(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_two(closest) + alibi_slopes(2 * closest)[0::2][: n - closest]


def alibi_bias(
    slopes: Tensor | int, num_queries: int, num_keys: int, *, dtype=torch.float32, device=None
) -> Tensor:
    """-m_h |i - j| for query i (at position K - Q + i) and key j: (H, Q, K).

    ``slopes``: the (H,) slopes, or a number of heads (then the paper's slopes).
    """
    if not isinstance(slopes, Tensor):
        slopes = torch.tensor(alibi_slopes(slopes), dtype=torch.float64)
    num_queries = positive_int("num_queries", num_queries)
    num_keys = positive_int("num_keys", num_keys)
    if num_keys < num_queries:
        message = _(
            "alibi_bias needs num_keys >= num_queries (the queries are the last Q "
            "keys), got {num_queries} and {num_keys}"
        )
        raise ValueError(message.format(num_queries=num_queries, num_keys=num_keys))
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    i = torch.arange(num_keys - num_queries, num_keys, device=device, dtype=wide)  # (Q,)
    j = torch.arange(num_keys, device=device, dtype=wide)  # (K,)
    distance = (i[:, None] - j[None, :]).abs()  # (Q, K)
    m = slopes.to(device=device, dtype=wide)[:, None, None]  # (H, 1, 1)
    return (-m * distance).to(dtype)  # (H, Q, K)


@functools.lru_cache(maxsize=4)
def _bias_table(num_heads: int, size: int, causal: bool, dtype, device) -> Tensor:
    """The bias of ``size`` queries over ``size`` keys, (1, H, size, size): every smaller
    (Q, K) is its slice ``[..., K - Q : K, :K]``. Shared by the layers of a model (their
    slopes are the same) and kept between calls; ``size`` is a power of two, so a growing
    cache rebuilds it log2(K) times, not once per step."""
    slopes = torch.tensor(alibi_slopes(num_heads), dtype=torch.float64)
    bias = alibi_bias(slopes, size, size, dtype=dtype, device=device)  # (H, size, size)
    if causal:
        future = torch.ones(size, size, dtype=torch.bool, device=device).triu(1)  # j > i
        bias = bias.masked_fill(future, torch.finfo(dtype).min)
    return bias.unsqueeze(0)


class ALiBi(nn.Module):
    """The score bias of one attention layer (no parameters, no state).

    ``forward(Q, K, causal=..., dtype=..., device=...)`` returns the (1, H, Q, K) float
    bias to add to the scores; with ``causal`` the keys after each query are already at
    ``torch.finfo(dtype).min`` (so the bias is the whole mask of a causal layer: a float
    ``attn_mask`` for ``scaled_dot_product_attention``). It is a view of a table built once
    for the largest K seen (rounded up to a power of two) and shared by every layer with
    as many heads: a decoding step costs a slice, not a new bias.
    """

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.num_heads = positive_int("num_heads", num_heads)
        self._slopes = alibi_slopes(self.num_heads)

    @property
    def slopes(self) -> Tensor:
        """m_1 .. m_H, (H,) float64 (the paper's ``alibi_slopes``)."""
        return torch.tensor(self._slopes, dtype=torch.float64)

    def forward(
        self, num_queries: int, num_keys: int, *, causal: bool, dtype: torch.dtype, device
    ) -> Tensor:
        """The bias of Q queries (the last Q of K positions) over K keys.

        Args:
            num_queries: Q.
            num_keys: K (cached positions included).
            causal: fill the scores of keys after each query with the dtype's minimum.
            dtype, device: of the scores.

        Shape:
            Returns (1, H, Q, K).

        Returns:
            -m_h |i - j|, with the future at ``finfo(dtype).min`` when ``causal``.
        """
        if not 1 <= num_queries <= num_keys:
            message = _(
                "ALiBi needs 1 <= num_queries <= num_keys (the queries are the last Q "
                "keys), got {num_queries} and {num_keys}"
            )
            raise ValueError(message.format(num_queries=num_queries, num_keys=num_keys))
        size = max(64, 1 << (num_keys - 1).bit_length())  # the power of two >= K
        table = _bias_table(self.num_heads, size, causal, dtype, torch.device(device))
        return table[:, :, num_keys - num_queries : num_keys, :num_keys]  # (1, H, Q, K)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}"
