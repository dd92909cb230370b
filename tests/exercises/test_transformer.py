"""Exercises of d2l 0.17 sections 10.5-10.7 and 1.0's 11.6.3, 11.8 and 11.9: every claim
asserted on the small run (seed 0) and on the full-size record (the ``values`` fixture).

Cost claims compare the counts (``attnkit.tour.cost.count_ops``, recorded attention weights)
with closed forms written here, independently of the experiment's own arithmetic; claims
over seeds use ``attnkit.tour.stats.supports`` (sign test and t interval, at least 5 seeds)
at full size, where the experiments run 5 seeds, and the direction in every seed at small
size."""

from __future__ import annotations

import itertools
import math

from attnkit.tour.stats import supports


def _block_flops(tokens: int, width: int, ffn: int) -> int:
    """One Transformer block on ``tokens`` positions (one sequence): the Q, K, V and output
    projections 2 T 4D², the feed-forward network 2 T 2 D F, the scores and the weighted
    sum 2 T² D each (every query against every key: a causal mask saves nothing counted)."""
    return 2 * tokens * (4 * width * width + 2 * width * ffn) + 4 * tokens * tokens * width


def test_10_5_1_heads_attend_differently(values):
    v = values("10.5.1")
    assert v["head_distance"] > 0.1


def test_10_5_2_pruning_the_least_important_heads_costs_least(values):
    v = values("10.5.2")
    ratios = []
    for low, high in zip(v["prune_least_increase"], v["prune_most_increase"], strict=True):
        assert 0 < low < high and high > 0.1
        ratios.append(low / high)
    assert v["prune_ratio_max"] == max(ratios) < 0.6
    for small, large in zip(v["smallest_increase"], v["largest_increase"], strict=True):
        assert large > 3 * small and large > 0.02
    s = v["prune_gap"]  # most-important pruning minus least-important pruning, per seed
    assert s["n"] == v["seeds"] == len(v["prune_most_increase"]) and s["agree"] == s["n"]
    if not values.small:  # 5 seeds at full size (1 at small)
        assert supports(s)
    assert len(v["head_loss_increase"][0]) == v["heads"] == 8  # bookkeeping


def test_10_6_1_pure_attention_stacks_collapse_residuals_do_not(values):
    v = values("10.6.1")
    assert 0 <= v["pure_worst"] < 1e-3
    assert v["residual_worst"] > 0.3
    assert min(v["start"]) > 0.5
    s = v["residual_keeps"]  # residual minus pure final distance, per seed
    assert s["n"] == v["seeds"] >= 5 and supports(s)


def test_10_6_2_learned_positions_stop_at_their_table(values):
    v = values("10.6.2")
    C = v["context"]
    # the table runs to its length and refuses one position more (a ValueError, measured)
    assert v["longest_run"] == C
    assert f"exceed the {C} learned positions" in v["refusal"]
    # it learns at the training length
    assert max(v["perplexity"]["learned"]) < 0.6 * v["unigram_perplexity"]
    # extended past its table, the positions past C do worse than the trained ones
    # (log(past / 1x) > 0), while ALiBi, trained alike, holds (paired per seed)
    for name in ("repeat", "untrained"):
        s = v["worse_past"][name]
        assert s["n"] == v["seeds"] and s["agree"] == s["n"]
        assert min(v["past_over_1x"][name]) == v["worst_past_over_1x"][name] > 1
    assert v["alibi_past_over_1x_max"] < min(v["past_over_1x"]["repeat"])
    s = v["vs_alibi"]
    assert s["n"] == v["seeds"] and s["agree"] == s["n"]
    if not values.small:  # 5 seeds of 250 steps at full size (2 of 80 at small)
        assert supports(v["worse_past"]["repeat"]) and supports(v["worse_past"]["untrained"])
        assert supports(s)
        assert min(v["worst_past_over_1x"].values()) > 2 and v["alibi_past_over_1x_max"] < 1.1


def test_10_7_1_each_block_adds_the_same_counted_cost(values):
    v = values("10.7.1")
    (B, T), D, F, V = v["batch"], v["width"], v["ffn"], v["vocab"]
    for depth, counted in zip(v["depths"], v["flops"], strict=True):
        # L blocks on B windows of T characters, and the tied output layer 2 B T D V
        assert counted == depth * B * _block_flops(T, D, F) + 2 * B * T * D * V
    f1, f2, f4 = v["flops"]
    assert f4 - f2 == 2 * (f2 - f1) > 0
    assert v["flops_4_over_1"] == f4 / f1 and 2.5 < v["flops_4_over_1"] < 4
    assert v["params"][0] < v["params"][1] < v["params"][2]  # bookkeeping


def test_10_7_2_additive_attention_writes_far_more(values):
    v = values("10.7.2")
    B, d, h = v["batch"], v["width"], v["hidden"]
    for n, row in v["costs"].items():
        n = int(n)
        # additive: W_q q and W_k k (2 B n d h each), w_v over the (B, n, n, h) tanh
        # (2 B n² h), the weighted sum (2 B n² d); it writes the q + k sums and their tanh
        # (2 B n² h) and the weights (B n²). Dot product: two products (4 B n² d); it writes
        # the scaled queries and keys (2 B n d) and the weights (B n²).
        assert row["additive_flops"] == 4 * B * n * d * h + 2 * B * n * n * (h + d)
        assert row["additive_written"] == B * n * n * (2 * h + 1)
        assert row["dot_flops"] == 4 * B * n * n * d
        assert row["dot_written"] == B * n * (2 * d + n)
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
    d = v["head_dim"]
    for n, row in v["costs"].items():
        n = int(n)
        # Q Kᵀ and W V, 2 n² d each; the scaled scores and the weights, n² elements each
        assert row["full_flops"] == 4 * n * n * d
        assert row["full_written"] == 2 * n * n
        assert row["weights_bytes"] == 4 * n * n  # float32
    assert v["full_flops_growth"] == v["growth"] ** 2
    assert v["longest_weights_mib"] == v["costs"][str(v["longest"])]["weights_bytes"] / 2**20


def test_10_7_5_local_and_linear_attention_grow_linearly(values):
    v = values("10.7.5")
    d, w = v["head_dim"], v["window"]
    for n, row in v["costs"].items():
        n = int(n)
        # local: n / w blocks of w queries against 2 w keys, two products: 8 n w d;
        # linear: φ(K)ᵀ V and φ(Q)(φ(K)ᵀ V), 2 n d² each, and the normaliser 2 n d;
        # it writes φ(Q), φ(K) (elu, + 1: 4 n d), the key sum (d) and the division (n d)
        assert row["local_flops"] == 8 * n * w * d
        assert row["linear_flops"] == 4 * n * d * d + 2 * n * d
        assert row["linear_written"] == 5 * n * d + d
    assert math.isclose(v["local_flops_growth"], v["growth"], rel_tol=1e-9)
    assert math.isclose(v["linear_flops_growth"], v["growth"], rel_tol=0.05)
    assert 0 <= v["window_equals_full_error"] < 1e-5
    assert v["longest_full_over_local"] == v["longest"] / (2 * w)


def test_1_0_11_6_3_relative_positions_are_translation_invariant_and_learn(values):
    v = values("1.0/11.6.3")
    assert 0 <= v["toeplitz_error"] < 1e-5
    assert 0 <= v["shift_error"] < 1e-5
    assert v["relative_worst_1x"] > 0.9
    assert v["relative_worst_4x"] > 0.9
    assert v["none_best_1x"] < 0.5
    s = v["gain"]  # relative minus no positions, accuracy at 1x, per seed
    assert s["n"] == v["seeds"] and s["agree"] == s["n"]
    if not values.small:  # 5 seeds at full size (2 at small)
        assert supports(s)


def test_1_0_11_8_1_vit_cost_grows_faster_than_its_tokens(values):
    v = values("1.0/11.8.1")
    p, B, D, F = v["patch"], v["batch"], v["width"], v["ffn"]
    for img, row in v["costs"].items():
        patches = (int(img) // p) ** 2
        assert row["tokens"] == patches + 1  # measured at the blocks' input: patches + <cls>
        # the patch projection (2 B P p² D), the blocks on P + 1 tokens, the classifier
        assert row["flops"] == (2 * B * patches * p * p * D
                                + v["blocks"] * B * _block_flops(patches + 1, D, F)
                                + 2 * B * D * v["classes"])  # fmt: skip
    first, last = v["costs"][str(v["sizes"][0])], v["costs"][str(v["largest"])]
    assert v["token_growth"] == last["tokens"] / first["tokens"]
    steps = v["flops_per_doubling"]
    assert all(r > 4 for r in steps) and all(a < b for a, b in itertools.pairwise(steps))
    assert v["flops_growth"] == last["flops"] / first["flops"] > v["token_growth"]


def test_1_0_11_9_4_decoder_only_costs_more_for_a_pair(values):
    v = values("1.0/11.9.4")
    L, D, F, V, heads = v["layers"], v["width"], v["ffn"], v["vocab"], v["heads"]
    for n, row in v["costs"].items():
        n = int(n)
        # encoder-decoder: L encoder blocks on n tokens; L decoder blocks on n tokens, each
        # with cross-attention (4 projections 2 n D², scores and sum 4 n² D); the output 2 n D V.
        # Decoder-only: 2L blocks on 2n tokens and the output on all of them.
        cross = 8 * n * D * D + 4 * n * n * D
        assert row["encdec_flops"] == 2 * L * _block_flops(n, D, F) + L * cross + 2 * n * D * V
        assert row["deconly_flops"] == 2 * L * _block_flops(2 * n, D, F) + 4 * n * D * V
        # attention weights recorded per forward: encoder n², decoder n² + n² (self, cross)
        # per block and head, against (2n)² in each of the 2L decoder-only blocks
        assert row["encdec_weights"] == heads * 3 * L * n * n
        assert row["deconly_weights"] == heads * 2 * L * (2 * n) ** 2
    assert v["ratio_longest"] > 1.5
    assert v["ratio_longest"] > v["ratio_shortest"]
    assert math.isclose(v["weights_ratio"], 8 / 3)


def test_1_0_11_8_2_mean_pooling_is_behind_cls_at_this_budget(values):
    v = values("1.0/11.8.2")
    acc, mean = v["accuracy"], v["mean_accuracy"]
    for name in ("cls", "mean"):
        assert math.isclose(mean[name], sum(acc[name]) / v["seeds"], rel_tol=1e-12)
    # behind on average (paired per seed): a description, not a significance claim
    assert mean["mean"] < mean["cls"]
    s = v["cls_ahead_of_mean"]  # <cls> minus mean pooling, per seed
    assert s["n"] == v["seeds"] and s["mean"] > 0
    assert math.isclose(s["mean"], mean["cls"] - mean["mean"], abs_tol=1e-12)


def test_1_0_11_8_3_the_budget_helps_the_learning_rate_does_not_show(values):
    v = values("1.0/11.8.3")
    acc = v["accuracy"]
    assert v["cls_models_worst"] == min(acc["cls"] + acc["cls_lr3e-3"]) > 0.3  # chance 0.25
    # twice the steps (the same run, read at both points) is better, paired per seed
    s = v["steps_gain"]
    assert s["n"] == v["seeds"] and s["agree"] == s["n"]
    diffs = [a - b for a, b in zip(acc["cls_2x_steps"], acc["cls"], strict=True)]
    assert math.isclose(s["mean"], sum(diffs) / len(diffs), abs_tol=1e-12)
    if not values.small:  # 5 seeds at full size (1 at small)
        assert supports(s)
    # the larger learning rate gains less than the longer training, in every seed, and at
    # full size no test supports any gain from it
    lr = v["lr_gain"]
    assert lr["n"] == v["seeds"] and lr["mean"] < s["mean"]
    assert all(a > b for a, b in zip(acc["cls_2x_steps"], acc["cls_lr3e-3"], strict=True))
    if not values.small:
        assert not supports(lr)


def test_cross_references_agree(values):
    """Where an answer cites another exercise, the cited measurement says what is cited."""
    # 10.6.1: "time and memory grow with n² per layer and per head (see 10.7.4)"
    long = values("10.7.4")
    assert long["full_flops_growth"] == long["growth"] ** 2
    # 10.6.2: learned relative offsets (1.0's 11.6.3) are defined at every length
    assert values("1.0/11.6.3")["relative_worst_4x"] > 0.9
    # 10.7.4: "a learned table stops at its length and, extended, does badly past it, see 10.6.2"
    learned = values("10.6.2")
    assert learned["longest_run"] == learned["context"]
    assert min(learned["worst_past_over_1x"].values()) > 1
    # 1.0's 11.8.3: smaller patches cost quadratically more attention (11.8.1)
    assert all(r > 4 for r in values("1.0/11.8.1")["flops_per_doubling"])
