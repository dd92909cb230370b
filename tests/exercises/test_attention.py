"""Exercises of d2l 0.17 sections 10.1-10.4 and 1.0's 11.1-11.3, asserted at small size."""

from __future__ import annotations

import math

from tests.shared_runs import values


def test_10_1_2_random_softmax_rows_are_distributions():
    v = values("10.1.2")
    assert v["row_sum_error"] < 1e-12 and v["min_weight"] > 0
    assert v["same_order"] is True
    assert 1 < v["max_ratio_in_row"] < math.e
