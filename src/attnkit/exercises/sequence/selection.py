"""Exercise 8.1.2 of d2l 0.17 (1.0: 9.1.2): choosing a security by its past returns.
Simulated monthly returns show selection on noise (the winners' future is average),
regression to the mean when real differences are small (their future edge shrinks by the
predicted factor) and survivorship (a database of survivors overstates past returns)."""

from __future__ import annotations

import torch

from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic

__all__ = ["past_winners"]

PAST, FUTURE = 36, 12  # months
MEAN, SD = 0.005, 0.05  # monthly return: mean 0.5%, standard deviation 5%
SKILL_SD = 0.005  # the spread of the true mean returns in the "small real differences" market
TOP = 0.05  # the investor buys the best 5% by past mean return
DELIST = 0.75  # a security whose price falls by a quarter is delisted and leaves the database


def _market(n: int, skill_sd: float, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(past returns (n, PAST), future returns (n, FUTURE)) of n securities whose true mean
    monthly returns are MEAN + N(0, skill_sd²), each month's return that plus N(0, SD²)."""
    mu = MEAN + skill_sd * torch.randn(n, 1, generator=g, dtype=torch.float64)
    r = mu + SD * torch.randn(n, PAST + FUTURE, generator=g, dtype=torch.float64)
    return r[:, :PAST], r[:, PAST:]


def _winners(past: torch.Tensor, future: torch.Tensor) -> tuple[float, float]:
    """(past, future) mean monthly excess return of the top TOP by past mean return, over
    the market's average in the same months."""
    score = past.mean(1)
    top = score.topk(int(TOP * len(score))).indices
    return (
        float(past[top].mean() - past.mean()),
        float(future[top].mean() - future.mean()),
    )


@topic
def past_winners(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.1.2: buy the top 5% by 36 months of returns, watch the next 12 months."""
    check_args(small, seed)
    n = 2000 if small else 10000
    seeds = list(range(seed, seed + 20))  # cheap: 20 seeds at both sizes
    noise_past, noise_future, skill_past, skill_future, bias = [], [], [], [], []
    for s in seeds:
        g = torch.Generator().manual_seed(s)
        # (a) no security is better than another: every true mean is MEAN
        p, f = _winners(*_market(n, 0.0, g))
        noise_past.append(p)
        noise_future.append(f)
        # (b) small real differences: regression to the mean
        p, f = _winners(*_market(n, SKILL_SD, g))
        skill_past.append(p)
        skill_future.append(f)
        # (c) survivorship: only securities whose price never fell below DELIST stay listed
        past, _ = _market(n, 0.0, g)
        price = torch.cumprod(1 + past, 1)  # (n, PAST)
        alive = (price.min(1).values > DELIST).tolist()
        survivors = past[torch.tensor(alive)]
        bias.append(float(survivors.mean() - past.mean()))
    # E[mu | past mean] = MEAN + k (past mean - MEAN), k = var(mu) / (var(mu) + SD² / PAST)
    shrink_theory = SKILL_SD**2 / (SKILL_SD**2 + SD**2 / PAST)
    shrink = sum(skill_future) / sum(skill_past)
    # each seed's measured shrink minus the theory's: the interval should cover 0
    shrink_error = seed_summary([f / p - shrink_theory for f, p in zip(skill_future, skill_past)])
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    future_noise_sd = (sum((x - mean(noise_future)) ** 2 for x in noise_future)
                       / (len(seeds) - 1)) ** 0.5  # fmt: skip
    survivorship = seed_summary(bias)
    # the winners' excess over the market, per seed: in the past (selected on it) and after
    past_edge, future_edge = seed_summary(noise_past), seed_summary(noise_future)
    values = {
        "securities": n,
        "seeds": len(seeds),
        "noise_past_excess": mean(noise_past),
        "noise_future_excess": mean(noise_future),
        "noise_future_sd": future_noise_sd,
        "noise_future_positive": sum(f > 0 for f in noise_future),
        "noise_past_seeds": past_edge,
        "noise_future_seeds": future_edge,
        "noise_future_words": describe_seeds(future_edge),
        "skill_past_excess": mean(skill_past),
        "skill_future_excess": mean(skill_future),
        "shrink_measured": shrink,
        "shrink_theory": shrink_theory,
        "shrink_error_seeds": shrink_error,
        "survivor_bias": mean(bias),
        "survivor_bias_seeds": survivorship,
        "survivor_bias_words": describe_seeds(survivorship),
    }
    finding = (
        f"no real differences: the top 5% beat the market by {mean(noise_past):.4f}/month in "
        f"the past, {mean(noise_future):+.5f} after; small real differences: the edge shrinks "
        f"by {shrink:.3f} (theory {shrink_theory:.3f}); survivors overstate the past mean "
        f"return by {mean(bias):.4f}/month"
    )
    return TopicResult("sequence_selection_past_winners", finding, values)
