"""Exercises of d2l 0.17 sections 10.5-10.7 and 1.0's 11.6.3, 11.8 and 11.9, asserted at
small size (seed 0)."""

from __future__ import annotations

import itertools
import math


def test_10_5_1_heads_attend_differently(values):
    v = values("10.5.1")
    assert v["head_distance"] > 0.1


def test_10_5_2_pruning_the_least_important_heads_costs_least(values):
    v = values("10.5.2")
    for low, high in zip(v["prune_least_increase"], v["prune_most_increase"], strict=True):
        assert low < 0.5 * high
        assert high > 0.1
    for small, large in zip(v["smallest_increase"], v["largest_increase"], strict=True):
        assert large > 3 * small and large > 0.02
    assert len(v["head_loss_increase"][0]) == v["heads"] == 8


def test_10_6_1_pure_attention_stacks_collapse_residuals_do_not(values):
    v = values("10.6.1")
    assert v["pure_worst"] < 1e-3
    assert v["residual_worst"] > 0.3
    assert min(v["start"]) > 0.5


def test_10_6_2_learned_positions_stop_at_their_table(values):
    v = values("10.6.2")
    assert v["learned_beyond_context"] and all(x is None for x in v["learned_beyond_context"])
    assert v["mean_perplexity"]["learned"]["1"] < 0.6 * v["unigram_perplexity"]


def test_10_7_1_each_block_adds_the_same_counted_cost(values):
    v = values("10.7.1")
    f1, f2, f4 = v["flops"]
    assert f2 - f1 == v["flops_per_block"] > 0
    assert f4 - f2 == 2 * (f2 - f1)
    assert 2.5 < v["flops_4_over_1"] < 4
    assert v["params"][0] < v["params"][1] < v["params"][2]


def test_10_7_2_additive_attention_writes_far_more(values):
    v = values("10.7.2")
    assert v["written_ratio_longest"] > 20
    assert v["total_ratio_longest"] > 1.5
    assert v["written_ratio_longest"] > v["written_ratio_shortest"]


def test_10_7_3_an_unmasked_lm_cheats_and_cannot_generate(values):
    v = values("10.7.3")
    causal, unmasked = v["causal"], v["unmasked"]
    assert unmasked["train_loss"] < causal["train_loss"] - 0.5
    assert unmasked["generation_loss"] > causal["generation_loss"] + 1
    assert causal["generation_loss"] < v["unigram_loss"] < unmasked["generation_loss"]


def test_10_7_4_attention_cost_is_quadratic(values):
    v = values("10.7.4")
    assert v["full_flops_growth"] == v["growth"] ** 2
    assert v["longest_weights_mib"] == 4 * v["longest"] ** 2 / 2**20
    for n, row in v["costs"].items():
        assert row["full_flops"] == 4 * int(n) ** 2 * v["head_dim"]


def test_10_7_5_local_and_linear_attention_grow_linearly(values):
    v = values("10.7.5")
    assert math.isclose(v["local_flops_growth"], v["growth"], rel_tol=1e-9)
    assert math.isclose(v["linear_flops_growth"], v["growth"], rel_tol=0.05)
    assert v["window_equals_full_error"] < 1e-5
    assert v["longest_full_over_local"] == v["longest"] / (2 * v["window"])


def test_1_0_11_6_3_relative_positions_are_translation_invariant_and_learn(values):
    v = values("1.0/11.6.3")
    assert v["toeplitz_error"] < 1e-5
    assert v["shift_error"] < 1e-5
    assert v["relative_worst_1x"] > 0.9
    assert v["relative_worst_4x"] > 0.9
    assert v["none_best_1x"] < 0.5


def test_1_0_11_8_1_vit_cost_grows_faster_than_its_tokens(values):
    v = values("1.0/11.8.1")
    assert v["token_growth"] == ((v["sizes"][-1] // 4) ** 2 + 1) / ((v["sizes"][0] // 4) ** 2 + 1)
    steps = v["flops_per_doubling"]
    assert all(r > 4 for r in steps) and all(a < b for a, b in itertools.pairwise(steps))
    assert v["flops_growth"] > v["token_growth"]


def test_1_0_11_9_4_decoder_only_costs_more_for_a_pair(values):
    v = values("1.0/11.9.4")
    assert v["ratio_longest"] > 1.5
    assert v["ratio_longest"] > v["ratio_shortest"]
    assert math.isclose(v["weights_ratio"], 8 / 3)


def test_1_0_11_8_2_mean_pooling_is_behind_cls_at_this_budget(values):
    v = values("1.0/11.8.2")
    assert v["mean_vs_cls"]["agree"] == 0 and v["mean_vs_cls"]["n"] == v["seeds"]
    assert v["mean_accuracy"]["mean"] < v["mean_accuracy"]["cls"]


def test_1_0_11_8_3_every_cls_model_learns_and_the_lr_gain_is_paired(values):
    v = values("1.0/11.8.3")
    assert v["cls_models_worst"] > 0.3
    acc = v["accuracy"]
    diffs = [a - b for a, b in zip(acc["cls_lr3e-3"], acc["cls"], strict=True)]
    assert math.isclose(v["lr_gain"]["mean"], sum(diffs) / len(diffs), abs_tol=1e-12)
    assert v["lr_gain"]["n"] == v["seeds"]
