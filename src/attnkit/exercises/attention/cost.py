"""Exercise 11.3.3 of d2l 1.0: how the cost of scaled dot-product attention grows with the
widths of queries, keys and values and with their numbers; and its memory traffic.
Counted with ``attnkit.tour.cost.count_ops`` on the explicit computation (the one that
materialises the weights), checked against exact formulas at several sizes.
"""

from __future__ import annotations

import torch

from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["attention_cost", "explicit_attention_ops"]


def explicit_attention_ops(b: int, n: int, m: int, d: int, dv: int):
    """count_ops of DotProductAttention with the weights materialised: b batches, n
    queries, m keys and values, query/key width d, value width dv."""
    from attnkit.attention import DotProductAttention
    from attnkit.tour.cost import count_ops

    layer = DotProductAttention().eval()
    q, k, v = torch.randn(b, n, d), torch.randn(b, m, d), torch.randn(b, m, dv)
    return count_ops(lambda: layer(q, k, v, need_weights=True))


@topic
def attention_cost(*, small: bool = False, seed: int = 0) -> TopicResult:
    """11.3.3: FLOPs = 2 b n m d (scores) + 2 b n m dv (weighted sum), exactly; the
    elements written outside the products are the scaled scores and the weights, 2 b n m
    (the products write their outputs, b n m scores and b n dv outputs, themselves)."""
    check_args(small, seed)
    torch.manual_seed(seed)
    base = dict(b=2, n=16, m=24, d=8, dv=4)
    doublings = ["b", "n", "m", "d", "dv"]
    sizes = [base] + [{**base, key: base[key] * 2} for key in doublings]
    if not small:
        sizes += [{**base, key: base[key] * 8} for key in doublings]
    rows = []
    for s in sizes:
        c = explicit_attention_ops(**s)
        bnm = s["b"] * s["n"] * s["m"]
        # the closed forms: two products; the scaled scores and the weights, b n m each
        rows.append({**s, "flops": c.flops, "formula": 2 * bnm * (s["d"] + s["dv"]),
                     "elements": c.elementwise, "elements_formula": 2 * bnm})  # fmt: skip
    base_row = rows[0]
    growth = {key: {"flops": row["flops"] / base_row["flops"],
                    "elements": row["elements"] / base_row["elements"]}
              for key, row in zip(doublings, rows[1:6])}  # fmt: skip
    # the elements written per (batch, query, key): the constant of the b n m term
    big = explicit_attention_ops(b=1, n=128, m=128, d=4, dv=4)
    values = {
        "rows": rows,
        "flops_formula_exact": all(r["flops"] == r["formula"] for r in rows),
        "largest_formula_error": max(abs(r["flops"] - r["formula"]) for r in rows),
        "largest_elements_error": max(abs(r["elements"] - r["elements_formula"]) for r in rows),
        "growth_when_doubled": growth,
        "elements_per_score_large_n": big.elementwise / (128 * 128),
    }
    finding = (
        f"At {len(rows)} sizes the counted FLOPs equal 2 b n m (d + dv) and the elements "
        "written outside the products 2 b n m, exactly. Doubling "
        "each size from b=2, n=16, m=24, d=8, dv=4: FLOPs x "
        + ", ".join(f"{k} {v['flops']:.2f}" for k, v in growth.items())
        + "; elements written x "
        + ", ".join(f"{k} {v['elements']:.2f}" for k, v in growth.items())
        + f"; at n = m = 128 and d = dv = 4 the computation writes "
        f"{values['elements_per_score_large_n']:.1f} elements per query-key pair."
    )
    return TopicResult("attention_cost_attention_cost", finding, values, {})
