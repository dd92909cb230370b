"""Exercises of d2l 0.17 sections 8.4-8.7 and 1.0's 9.5.1, 9.5.2, 9.5.6, 9.5.7 (the
character RNN), asserted on the small run (seed 0) and on the full-size record."""

from __future__ import annotations

import itertools
import math

from attnkit.tour.stats import supports


def test_8_4_1_and_8_5_1_one_hot_is_a_lookup_and_outputs_are_vocab_sized(values):
    v = values("8.4.1")
    assert v["output_dim"] == v["vocab_size"] == 28
    assert v["output_shape"] == [70, 28]  # bookkeeping: (time steps x batch, V)
    assert v["prob_sum_error"] < 1e-12  # bookkeeping: a softmax sums to 1
    v = values("8.5.1")
    assert v["value_max_difference"] == 0.0 and v["grad_max_difference"] == 0.0
    # half the vocabulary never occurs: those rows get exactly 0, the rows read do not
    assert v["n_unused"] >= 10 and v["unused_rows_grad"] == 0.0
    assert v["used_rows_grad_min"] > 0.1
    # the model's own recurrent layer on one-hot inputs (its states are not all ~0)
    assert v["model_max_difference"] < 1e-12 and v["model_state_max"] > 0.1


def test_8_4_2_8_4_3_and_1_0_9_5_1_influence_of_the_past_fades_geometrically(values):
    v = values("1.0/9.5.1")
    assert 0.1 < v["change_0"] < 1
    assert 0 < v["change_at_40"] < 1e-4 * v["change_0"]
    assert 0 < v["change_at_num_steps"] < 1e-3 * v["change_0"]
    assert 0 < v["grad_at_num_steps_over_0"] < 1e-2
    assert 0 < v["grad_at_40_over_0"] < v["grad_at_num_steps_over_0"] * 1e-2
    assert 3 <= v["reach_1pct"] < v["num_steps"]
    # the decay is geometric: over 20-step spans the gradient shrinks by similar factors
    g = v["grad_norm"]
    first, second = g[20] / g[0], g[40] / g[20]
    assert 0.1 < math.log(first) / math.log(second) < 10
    # the carried state is read: resetting it every num_steps tokens costs perplexity
    assert 1.005 < v["perplexity_reset"] / v["perplexity"] < 1.5


def test_1_0_9_5_2_a_shorter_window_does_not_shorten_the_memory(values):
    v = values("1.0/9.5.2")
    assert v["short_change_at_10"] > 1e-4 and v["short_change_at_10"] > 0.2 * v["change_at_10"]
    assert 5 < v["short_reach_1pct"] and v["short_reach_1pct"] >= v["reach_1pct"] - 3
    assert 1.005 < v["short_perplexity_reset"] / v["short_perplexity"] < 1.5


def test_8_5_2_tuning_embedding_and_other_text(values):
    v = values("8.5.2")
    ppl = v["held_out_perplexity"]
    assert len(ppl) == 5 and all(2 < p < v["vocab_size"] for p in ppl.values())
    assert v["best"] != "base" and 1.0 < v["improvement"] < ppl["base"] - 2
    assert v["improvement"] == ppl["base"] - min(ppl.values())
    assert ppl["2x steps"] < ppl["base"]  # training longer helps at this budget
    gain = v["embedding_gain"]
    assert gain["n"] == v["n"] == len(v["onehot_perplexity"]) == len(v["embedding_perplexity"])
    assert gain["agree"] == gain["n"] and 1.0 < gain["min"] <= gain["mean"] < 10
    if not values.small:  # 5 seeds: enough for the sign test and the t interval
        assert gain["n"] >= 5 and supports(gain)
    tv = v["letter_tv"]  # another kind of text: its letters differ more than the held-out's
    assert 0 < tv["held_out"] < 0.8 * tv["other"] < 0.5
    assert 1.0 < v["other_over_own"] < 2.0
    assert v["other_text_perplexity"] > v["base_perplexity"] == ppl["base"]
    assert math.isclose(v["other_text_perplexity"] / ppl["base"], v["other_over_own"])


def test_8_5_3_greedy_loops_sampling_varies_alpha_interpolates(values):
    v = values("8.5.3")
    n = v["prefixes"]
    loops = v["looping"]
    assert loops["greedy"] >= n - 2 and loops["alpha1"] == loops["alpha2"] == loops["alpha4"] == 0
    d = v["distinct_4grams"]
    assert 0 < d["greedy"] < d["alpha4"] < d["alpha2"] < d["alpha1"] <= 1
    assert d["alpha2"] > 0.5 * d["alpha1"]  # α = 2 keeps more than half the variety
    p = v["model_perplexity"]
    assert 1 < p["greedy"] < p["alpha4"] < p["alpha2"] < p["alpha1"] < 28  # V = 28


def test_8_5_4_clipping_matters_only_where_the_gradient_explodes(values):
    v = values("8.5.4")
    n, book_n = v["n"], v["book_n"]
    # the book's settings: 512 hidden units, 35 time steps, batch 32, lr 1, θ = 1
    assert v["book"] == {"num_hiddens": 512, "num_steps": 35, "batch_size": 32, "lr": 1.0}
    firsts = v["book_tanh_first_clipped_step"]
    assert len(firsts) == book_n and all(1 <= s <= 10 for s in firsts)
    assert 0 < v["book_tanh_clipped_share"] <= 0.2  # clipping acts, on few steps
    assert v["book_tanh_diverged_unclipped"] == book_n and v["book_tanh_diverged_clipped"] == 0
    assert v["book_tanh_failed_clipped"] == 0  # clipped runs end below the unigram perplexity
    assert v["book_tanh_max_norm"] > 5.0
    assert v["book_tanh_unclipped_ppl"] > 1e3 * v["book_tanh_clipped_ppl"]
    gain = v["book_clipping_gain"]  # log10(unclipped / clipped perplexity) per seed
    assert gain["n"] == book_n and gain["agree"] == book_n and gain["min"] > 3
    if not values.small:
        assert book_n >= 5 and supports(gain)
    # 64 hidden units at the same lr 1: clipping never acts, so it changes nothing
    assert 0 < v["tanh_lr1_max_norm"] < 1.0 and v["tanh_lr1_gap"] == 0.0
    assert v["tanh_lr1_failed_unclipped"] == 0
    assert v["tanh_lr3_failed_unclipped"] == n and 5.0 < v["tanh_lr3_max_norm"]
    assert v["tanh_lr3_unclipped_ppl"] > 1e3 * v["tanh_lr3_clipped_ppl"]


def test_8_5_6_relu_rnn_with_and_without_clipping(values):
    v = values("8.5.6")
    n, book_n = v["n"], v["book_n"]
    assert v["relu_lr1_failed_unclipped"] == 0 and v["relu_lr3_failed_clipped"] == 0
    assert v["relu_lr3_failed_unclipped"] == 0
    assert v["relu_minus_tanh_failed_lr3"] == -v["tanh_lr3_failed_unclipped"] == -n
    assert v["book_relu_diverged_unclipped"] == 0 < v["book_tanh_diverged_unclipped"] == book_n
    assert v["book_relu_diverged_clipped"] == 0
    assert v["relu_max_norm"] > 2.0 > 1.0 > v["tanh_lr1_max_norm"]  # ReLU's gradient spikes
    assert v["relu_lr1_clipped_steps"] > 0  # so clipping acts with ReLU
    relu_n = v["book_relu_n"]
    assert 1 <= v["book_relu_seeds_clipped"] <= relu_n and v["book_relu_max_norm"] > 1.0
    assert 2 < v["relu_lr1_ppl"] < v["unigram_perplexity"]
    # the ReLU clipping gain at 512 units is reported as "not enough to call it an effect"
    assert v["book_relu_clipping_gain"]["n"] == relu_n
    assert not supports(v["book_relu_clipping_gain"])


def test_8_5_5_undetached_state_costs_grow_gradient_barely_changes(values):
    v = values("8.5.5")
    assert v["error_without_retain"].startswith("Trying to backward through the graph")
    assert "inplace operation" in v["error_with_retain"]
    ops, det = v["backward_ops_not_detached"], v["backward_ops_detached"]
    assert len(ops) == len(det) == v["minibatches"]
    assert len(set(det)) == 1 and ops[0] == det[0] == v["ops_first"]
    steps = {b - a for a, b in itertools.pairwise(ops)}
    assert len(steps) == 1 and steps.pop() > 0.5 * ops[0]  # linear growth
    nodes = v["nodes_not_detached"]
    assert len({b - a for a, b in itertools.pairwise(nodes)}) == 1 and v["nodes_last"] > nodes[0]
    assert len(set(v["nodes_detached"])) == 1
    # the undetached gradient is backpropagation through every minibatch (parameters fixed)
    assert v["full_bptt_max_difference"] < 1e-6
    # some gradient crosses the boundaries, a few percent of the truncated one
    assert 0.002 < v["crossing_share_mean"] < 0.1 and v["crossing_share_max"] < 0.5
    assert 0.99 < v["cosine_mean"] < 1.0
    # held-out perplexity, paired over seeds: the 95% interval of the change is within 1%
    change, d, u = v["perplexity_change"], v["perplexity_detached"], v["perplexity_not_detached"]
    assert change["n"] == v["n"] == len(d) == len(u) and all(2 < p < 28 for p in d + u)
    assert change["low"] <= change["mean"] <= change["high"]
    bound = max(abs(change["low"]), abs(change["high"])) / (sum(d) / len(d))
    assert math.isclose(v["perplexity_change_relative"], bound)
    assert 0 < v["perplexity_change_relative"] < 0.01


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
    clipped = v["clipped_steps"]  # clipping acted rarely; the unclipped twins end alike
    assert clipped["sgd"]["layers1"] == 0 and v["max_grad_norm"]["sgd"]["layers1"] < 1.0
    assert all(0 <= c <= 0.05 * v["steps"] for opt in clipped.values() for c in opt.values())
    for opt, diff in v["unclipped_minus_clipped_deep"].items():
        assert abs(diff) < 0.1 * ppl[opt]["layers3"]
        assert math.isclose(v["unclipped_deep_perplexity"][opt] - ppl[opt]["layers3"], diff)


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


def test_the_answers_that_cite_each_other_agree(values):
    """Where an answer cites another (8.4.4's list, 8.5.2, 8.5.5, 8.6.2, 8.7.2, 1.0's 9.5.1
    and 9.5.2), the cited values say what the citing answer says."""
    memory, clip = values("1.0/9.5.1"), values("8.5.4")
    # "falls below 1% within about a dozen characters" (8.4.4, 8.5.2, 8.5.5, 1.0's 9.5.1)
    assert 8 <= memory["reach_1pct"] <= 16 and memory["short_reach_1pct"] <= 16
    # "at the book's settings training needs clipping; it acts on a few steps" (8.4.4, 8.7.2)
    assert clip["book_tanh_diverged_unclipped"] == clip["book_n"]
    assert clip["book_tanh_diverged_clipped"] == 0 and clip["book_tanh_clipped_share"] <= 0.2
    # "at 64 hidden units clipping never acts at lr 1" (8.4.4, 8.6.2, 8.7.2) ...
    deep = values("8.6.2")
    assert clip["tanh_lr1_max_norm"] < 1.0 and deep["clipped_steps"]["sgd"]["layers1"] == 0
    # ... "and only lr 3 diverges" (8.7.2); "ReLU trained without clipping" (8.7.2, 8.5.6)
    assert clip["tanh_lr3_failed_unclipped"] == clip["n"] and clip["tanh_lr1_failed_unclipped"] == 0
    assert clip["relu_lr1_failed_unclipped"] == clip["relu_lr3_failed_unclipped"] == 0
    assert clip["book_relu_diverged_unclipped"] == 0
    # "the state is carried and read beyond num_steps, though gradients stop" (8.4.4, 9.5.1-2)
    short = values("1.0/9.5.2")
    assert (
        short["short_reach_1pct"] > 5
        and short["short_perplexity_reset"] > short["short_perplexity"]
    )
    assert memory["perplexity_reset"] > memory["perplexity"]
    # "the gradient crossing the boundaries changes it by a few percent and the perplexity by
    # under 1%" (8.4.4, 9.5.2), "because the influence fades within num_steps" (8.5.5)
    detach = values("8.5.5")
    assert detach["crossing_share_mean"] < 0.1 and detach["perplexity_change_relative"] < 0.01
    assert detach["num_steps"] == memory["num_steps"] > memory["reach_1pct"]
    # "the book's perplexity near 1 is on training text a large RNN can memorise" (8.5.2)
    overfit = values("8.6.1")
    assert overfit["big_train"] < 0.5 * overfit["big_held_out"]
