"""Exercise 9.1.4 of d2l 0.17 (1.0's 10.2.4): a GRU that keeps only some of its parts.
The tour's ``gate_ablation`` (``attnkit.tour.gates``) trains the full GRU, the GRU without
its update gate (Z = 0) and without its reset gate (R = 1) on a long-range and a
short-range task, over seeds; here at the exercise's sizes, with the paired comparisons
summarized by ``attnkit.tour.stats``."""

from __future__ import annotations

import math

from attnkit.tour.base import TopicResult, describe_seeds, seed_summary, topic
from attnkit.tour.gates import gate_ablation

__all__ = ["FAIL", "gate_parts"]

FAIL = 0.5  # held-out loss / Var(target) above this: the task is not learned


@topic
def gate_parts(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.1.4: held-out loss / Var(target) of each variant on both tasks, per seed; the
    log ratio "no update" / full on the long task and "no reset" / full on the short
    one, paired over seeds; how many seeds fail the long task without the update gate."""
    n_seeds, steps, T = (5, 100, 12) if small else (8, 300, 12)
    ab = gate_ablation(seeds=n_seeds, steps=steps, T=T, seed=seed)
    loss = ab["loss"]
    long_gap = seed_summary(
        [math.log(a / b) for a, b in zip(loss["long"]["no update"], loss["long"]["full"])]
    )
    short_gap = seed_summary(
        [math.log(a / b) for a, b in zip(loss["short"]["no reset"], loss["short"]["full"])]
    )
    values = {
        "seeds": n_seeds, "steps": steps, "T": T, "fail": FAIL, "loss": loss,
        "long_no_update_over_full": long_gap, "short_no_reset_over_full": short_gap,
        "long_no_update_failed": sum(x > FAIL for x in loss["long"]["no update"]),
        "long_full_max": max(loss["long"]["full"]),
        "short_max": max(x for variant in loss["short"].values() for x in variant),
    }  # fmt: skip
    finding = (
        f"{n_seeds} seeds, {steps} Adam steps, T = {T}; held-out loss / Var(target). Long "
        f"range: without the update gate {values['long_no_update_failed']}/{n_seeds} seeds "
        f"fail (> {FAIL}), the full GRU at most {values['long_full_max']:.3f}; no update / "
        f"full: " + describe_seeds(long_gap, " in log ratio") + f". Short range: every "
        f"variant at most {values['short_max']:.3f}; no reset / full: "
        + describe_seeds(short_gap, " in log ratio")
        + "."
    )
    return TopicResult("gated_ablation_gate_parts", finding, values)
