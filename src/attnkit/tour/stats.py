"""Claims over seeds, one way for the tour and the exercises: paired differences per seed,
each positive when that seed agrees with the claim, summarized by tests their seeds can
support.

- the **exact sign test**: the chance of ``agree`` or more positive seeds out of ``n`` if
  each sign were a coin flip (ties count against the claim). With every seed agreeing it is
  ``2**-n``: 3 seeds can never say more than 0.125, 5 seeds are the fewest that reach 0.05
  (``seeds_for``);
- the **Student-t interval** for the mean difference (``level``, two-sided), which takes
  the spread of a few seeds for what it is (with 3 seeds the 95% interval is mean ± 2.48 sd);
- the **Student-t predictive** chance that one new seed's difference is 0 or less (the
  chance that a fresh run disagrees): heavy-tailed with few seeds, never "< 1e-6" from 3.

``supports(s)`` is what a claim "B beats A over seeds" asserts: the sign test at 0.05 and
the interval above 0. The t distribution is computed exactly for whole degrees of freedom
(Abramowitz and Stegun 26.7.3-4), so the module needs no SciPy.
"""

from __future__ import annotations

import math

from attnkit._validate import integer, real
from attnkit.i18n import _

__all__ = [
    "describe_seeds",
    "seed_summary",
    "seeds_for",
    "sign_test",
    "supports",
    "t_cdf",
    "t_quantile",
]


def t_cdf(t: float, dof: int) -> float:
    """P(T <= t) for Student's t with ``dof`` (a whole number >= 1) degrees of freedom."""
    if not isinstance(dof, int) or dof < 1:
        raise ValueError(f"dof must be an int >= 1, got {dof!r}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    theta = math.atan(abs(t) / math.sqrt(dof))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if dof % 2:  # odd: A = 2/π (θ + sin θ cos θ (1 + 2/3 cos² θ + ...))
        term, total = 1.0, 1.0 if dof > 1 else 0.0
        for k in range(1, (dof - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        inside = 2 / math.pi * (theta + s * math.cos(theta) * total)
    else:  # even: A = sin θ (1 + 1/2 cos² θ + 1·3/(2·4) cos⁴ θ + ...)
        term, total = 1.0, 1.0
        for k in range(1, dof // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        inside = s * total
    inside = min(max(inside, 0.0), 1.0)  # P(|T| < |t|)
    return 0.5 + inside / 2 if t >= 0 else 0.5 - inside / 2


def t_quantile(p: float, dof: int) -> float:
    """The t with ``t_cdf(t, dof) == p`` (0 < p < 1), by bisection to 1e-12."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p!r}")
    low, high = -1.0, 1.0
    while t_cdf(low, dof) > p:
        low *= 2
    while t_cdf(high, dof) < p:
        high *= 2
    while high - low > 1e-12 * max(1.0, abs(high)):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, dof) < p else (low, mid)
    return (low + high) / 2


def sign_test(agree: int, n: int) -> float:
    """The exact one-sided sign test: P(at least ``agree`` of ``n`` fair coins land heads)."""
    n = integer("n", n, minimum=1)
    agree = integer("agree", agree, minimum=0, maximum=n)
    return sum(math.comb(n, k) for k in range(agree, n + 1)) / 2**n


def seeds_for(alpha: float = 0.05) -> int:
    """The fewest seeds whose unanimous agreement the sign test puts at ``alpha`` or below."""
    alpha = real("alpha", alpha, above=0, below=1)
    return math.ceil(math.log2(1 / alpha))


def seed_summary(diffs: list[float], level: float = 0.95) -> dict[str, float]:
    """Paired differences over seeds, each positive when that seed agrees with the claim.

    ``n``, ``agree`` (how many are positive), ``mean``, ``sd`` (n - 1), ``min``;
    ``p_no_effect``: the exact sign test; ``low``/``high``: the Student-t interval for the
    mean at ``level`` (None with one seed); ``p_new_against``: the Student-t predictive
    chance that a new seed's difference is <= 0 (None with one seed); ``level``.
    """
    if not diffs or not all(
        isinstance(d, float | int) and not isinstance(d, bool) and math.isfinite(d) for d in diffs
    ):
        raise ValueError(f"diffs must be a non-empty list of finite numbers, got {diffs!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    n = len(diffs)
    agree = sum(d > 0 for d in diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    low = high = p_new = None
    if n > 1:
        half = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
        spread = sd * math.sqrt(1 + 1 / n)
        p_new = t_cdf(-mean / spread, n - 1) if spread > 0 else float(mean <= 0)
    return {"n": n, "agree": agree, "mean": mean, "sd": sd, "min": min(diffs),
            "p_no_effect": sign_test(agree, n), "low": low, "high": high,
            "p_new_against": p_new, "level": level}  # fmt: skip


def supports(s: dict, alpha: float = 0.05) -> bool:
    """Whether a ``seed_summary`` supports "the difference is positive": the sign test at
    ``alpha`` and the t interval above 0 (which needs at least ``seeds_for(alpha)`` seeds)."""
    if not isinstance(s, dict) or not {"p_no_effect", "low"} <= s.keys():
        raise TypeError(
            _("s must be a seed_summary dict, got {type}").format(type=type(s).__name__)
        )
    alpha = real("alpha", alpha, above=0, below=1)
    return s["p_no_effect"] <= alpha and s["low"] is not None and s["low"] > 0


def describe_seeds(s: dict, unit: str = "") -> str:
    """``seed_summary`` in words, in the language in force (``unit`` is inserted as given:
    pass it translated): "5/5 seeds (difference mean 0.35, sd 0.1, min 0.2; 95% interval
    for the mean 0.23 to 0.47 (t); sign test p = 0.031; a new seed disagrees with chance
    0.01 (t predictive))"."""
    if s["n"] < 2:
        return _("{agree}/{n} seeds (difference {mean:.3g}{unit}; one seed: no test)").format(
            agree=s["agree"], n=s["n"], mean=s["mean"], unit=unit
        )
    if s["sd"] == 0:  # every seed the same: a t interval or predictive says nothing
        return _(
            "{agree}/{n} seeds (every difference {mean:.3g}{unit}, no spread; sign test "
            "p = {p_no_effect:.2g})"
        ).format(agree=s["agree"], n=s["n"], mean=s["mean"], unit=unit,
                 p_no_effect=s["p_no_effect"])  # fmt: skip
    return _(
        "{agree}/{n} seeds (difference mean {mean:.3g}{unit}, sd {sd:.2g}, min {min:.3g}; "
        "{level:.0%} interval for the mean {low:.3g} to {high:.3g} (t); sign test "
        "p = {p_no_effect:.2g}; a new seed disagrees with chance {p_new_against:.2g} "
        "(t predictive))"
    ).format(agree=s["agree"], n=s["n"], mean=s["mean"], unit=unit, sd=s["sd"], min=s["min"],
             level=s["level"], low=s["low"], high=s["high"], p_no_effect=s["p_no_effect"],
             p_new_against=s["p_new_against"])  # fmt: skip
