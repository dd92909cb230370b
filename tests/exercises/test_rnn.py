"""Exercises of d2l 0.17 sections 8.4-8.7 and 1.0's 9.5.1, 9.5.2, 9.5.6, 9.5.7 (the
character RNN), asserted at small size (seed 0)."""

from __future__ import annotations

import itertools
import math


def test_8_4_1_and_8_5_1_one_hot_is_a_lookup_and_outputs_are_vocab_sized(values):
    v = values("8.4.1")
    assert v["output_dim"] == v["vocab_size"] == 28
    assert v["output_shape"] == [70, 28]
    assert v["prob_sum_error"] < 1e-12
    v = values("8.5.1")
    assert v["value_max_difference"] == 0.0 and v["grad_max_difference"] == 0.0
    assert v["n_unused"] >= 0 and v["unused_rows_grad"] == 0.0
    assert v["model_max_difference"] == 0.0
    assert v["onehot_rank"] == v["vocab_size"]


def test_8_4_2_8_4_3_and_1_0_9_5_1_influence_of_the_past_fades_geometrically(values):
    v = values("1.0/9.5.1")
    assert values("8.4.2") is v or values("8.4.2") == v
    assert 0.1 < v["change_0"] < 1
    assert 0 < v["change_at_40"] < 1e-4 * v["change_0"]
    assert v["change_at_num_steps"] < 1e-3 * v["change_0"]
    assert v["grad_at_num_steps_over_0"] < 1e-2
    assert 0 < v["grad_at_40_over_0"] < v["grad_at_num_steps_over_0"] * 1e-2
    assert 3 <= v["reach_1pct"] < v["num_steps"]
    # the decay is geometric: over 20-step spans the gradient shrinks by similar factors
    g = v["grad_norm"]
    first, second = g[20] / g[0], g[40] / g[20]
    assert 0.1 < math.log(first) / math.log(second) < 10


def test_1_0_9_5_2_a_shorter_window_does_not_shorten_the_memory(values):
    v = values("1.0/9.5.2")
    assert v["short_change_at_10"] > 1e-4 and v["short_change_at_10"] > 0.2 * v["change_at_10"]
    assert v["short_reach_1pct"] >= v["reach_1pct"] - 3


def test_8_5_2_tuning_embedding_and_other_text(values):
    v = values("8.5.2")
    ppl = v["held_out_perplexity"]
    assert len(ppl) == 5 and all(2 < p < v["vocab_size"] for p in ppl.values())
    assert v["best"] != "base" and v["improvement"] > 1.0
    assert ppl["2x steps"] < ppl["base"]  # training longer helps at this budget
    gain = v["embedding_gain"]
    assert gain["agree"] == gain["n"] and gain["min"] > 1.0  # the embedding is better here
    assert v["other_text"] == "docstrings of Python's standard library"
    assert 1.0 < v["other_over_own"] < 2.0
    assert values("1.0/9.5.6")["other_text_perplexity"] == v["other_text_perplexity"]


def test_8_5_3_greedy_loops_sampling_varies_alpha_interpolates(values):
    v = values("8.5.3")
    n = v["prefixes"]
    assert v["looping"]["greedy"] >= n - 2 and v["looping"]["alpha1"] == 0
    d = v["distinct_4grams"]
    assert d["greedy"] < 0.2 < d["alpha4"] < d["alpha2"] < d["alpha1"]
    p = v["model_perplexity"]
    assert p["greedy"] < p["alpha4"] < p["alpha2"] < p["alpha1"]


def test_8_5_4_clipping_matters_only_where_the_gradient_explodes(values):
    v = values("8.5.4")
    assert v["tanh_lr1_max_norm"] < 1.0 and v["tanh_lr1_gap"] == 0.0  # clipping never fired
    assert v["tanh_lr1_failed_unclipped"] == 0
    assert v["tanh_lr3_failed_unclipped"] == v["n"] and v["tanh_lr3_max_norm"] > 5.0
    assert v["tanh_lr3_unclipped_ppl"] > 1e3 * v["tanh_lr3_clipped_ppl"]


def test_8_5_6_relu_rnn_with_and_without_clipping(values):
    v = values("8.5.6")
    assert v["relu_lr1_failed_unclipped"] == 0 and v["relu_lr3_failed_clipped"] == 0
    assert v["relu_minus_tanh_failed_lr3"] < 0
    assert v["relu_lr3_failed_unclipped"] < v["n"]
    assert v["relu_max_norm"] > 2.0 > 1.0 > v["tanh_lr1_max_norm"]  # ReLU's gradient spikes
    assert v["relu_lr1_ppl"] < v["unigram_perplexity"]


def test_8_5_5_undetached_state_costs_grow_and_gradients_do_not_change(values):
    v = values("8.5.5")
    assert v["error_without_retain"].startswith("Trying to backward through the graph")
    assert "inplace operation" in v["error_with_retain"]
    ops, det = v["backward_ops_not_detached"], v["backward_ops_detached"]
    assert len(set(det)) == 1 and ops[0] == det[0]
    steps = {b - a for a, b in itertools.pairwise(ops)}
    assert len(steps) == 1 and steps.pop() > 0.5 * ops[0]  # linear growth
    nodes = v["nodes_not_detached"]
    assert len({b - a for a, b in itertools.pairwise(nodes)}) == 1 and v["nodes_last"] > nodes[0]
    assert v["current_grad_max_difference"] == 0.0 and v["loss_max_difference"] == 0.0


def test_8_6_1_a_larger_rnn_overfits_little_text(values):
    v = values("8.6.1")
    assert v["big_gap"] > 2 * v["small_gap"] > 0
    assert v["big_rise"] > 0.5 and v["big_train"] < 0.5 * v["big_held_out"]


def test_8_6_2_deeper_rnn(values):
    v = values("8.6.2")
    ppl = v["perplexity"]
    assert all(2 < p < 20 for opt in ppl.values() for p in opt.values())
    assert v["sgd_deep_minus_shallow"] > 0  # with SGD, depth does not help
    assert v["deep_sgd_minus_adam"] > 0  # Adam trains the deep model further


def test_8_6_3_rnn_autoregressive_matches_the_mlp(values):
    v = values("8.6.3")
    assert 0.04 < v["rnn_1_step"] < 0.07  # near the noise variance 0.04
    assert all(abs(d) < 0.02 for k, d in v["rnn_minus_mlp"].items() if k != "k64")
    assert v["rnn_64_over_1"] > 3  # errors compound


def test_8_7_1_powers_and_power_iteration(values):
    v = values("8.7.1")
    assert v["eig_power_rel_error"] < 1e-10 and v["norm_power_rel_error"] < 1e-10
    assert v["bound_holds_fraction"] == 1.0
    assert 0.9 < v["rate_over_log_ratio_median"] < 1.1
    assert abs(v["p_cos_below_eps"] - v["p_cos_below_eps_approx"]) < 0.01
