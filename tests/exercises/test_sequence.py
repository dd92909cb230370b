"""Exercises of d2l 0.17 sections 8.1-8.3 and 1.0's 9.1-9.3 (with 1.0's 9.2.3), asserted at
small size (seed 0): each experiment runs once a session (``tests.shared_runs``)."""

from __future__ import annotations

import itertools
import math


def test_8_1_1_lags_noise_free_and_architectures(values):
    v = values("8.1.1")
    taus = v["mse_by_tau"]
    # more than 4 lags help, the test error levels off well before 64
    assert 4 < v["enough_lags"] <= 32
    assert taus["tau1"] > taus["tau2"] > taus["tau4"] > taus["tau16"]
    assert all(m > v["noise_variance"] for m in taus.values())  # never below the noise
    assert v["gain_4_to_16"]["agree"] == v["gain_4_to_16"]["n"] == v["seeds"]
    # no noise: x_t = 2 cos(w) x_{t-1} - x_{t-2}, fitted exactly with two lags
    assert v["noise_free_mse_tau2"] < 1e-20 < 1e-6 < v["noise_free_mse_tau1"]
    c1, c2 = v["noise_free_coef"]
    assert abs(c1 - v["two_cos_omega"]) < 1e-9 and abs(c2 + 1) < 1e-9
    # four features reaching 15 steps back (window means) beat lags 1-4 in every draw
    assert v["means_vs_lags"]["agree"] == v["means_vs_lags"]["n"]
    assert v["four_means"] < min(v["four_lags"], v["four_sparse"])
    # k steps ahead: the linear models degrade least
    assert v["linear_vs_mlp_64"]["mean"] > 0
    lin16, lin4, mlp, deep = v["k_linear16"], v["k_linear4"], v["k_mlp"], v["k_deep"]
    for k in ("k4", "k16", "k64"):
        assert lin16[k] < min(lin4[k], mlp[k], deep[k])
    assert deep["k16"] > mlp["k16"]
    assert all(lin4[a] < lin4[b] for a, b in (("k1", "k4"), ("k4", "k16"), ("k16", "k64")))


def test_8_1_2_past_winners_selection_regression_survivorship(values):
    v = values("8.1.2")
    # no real differences: a large past edge, none after (within 3 standard errors)
    assert v["noise_past_excess"] > 0.01
    assert abs(v["noise_future_excess"]) < 3 * v["noise_future_sd"] / math.sqrt(v["seeds"])
    assert abs(v["noise_future_excess"]) < 0.1 * v["noise_past_excess"]
    # small real differences: the edge shrinks by about var(mu) / (var(mu) + sd^2 / 36)
    assert 0 < v["shrink_measured"] < 1
    assert abs(v["shrink_measured"] - v["shrink_theory"]) < 0.1
    assert v["skill_future_excess"] < v["skill_past_excess"]
    s = v["survivor_bias_seeds"]
    assert s["agree"] == s["n"] == v["seeds"] and v["survivor_bias"] > 0.001


def test_8_1_3_text_is_as_predictable_backwards(values):
    v = values("8.1.3")
    assert v["train_gap"] < 1e-3  # maximum likelihood: the same up to the two ends
    assert v["largest_test_gap"] < 0.01
    fwd, bwd = v["test_bits_forward"], v["test_bits_backward"]
    assert fwd["o2"] > fwd["o3"] > fwd["o5"] > 1.0  # a real model: higher orders do better
    assert v["test_fwd_5"] == fwd["o5"] and v["test_bwd_5"] == bwd["o5"]


def test_8_2_1_subwords_between_words_and_characters(values):
    v = values("8.2.1")
    t = v["tokenizers"]
    assert v["word_unknown"] > 0.01 and t["char"]["unknown"] == 0
    for kind in ("bpe", "unigram"):
        assert 1.0 < t[kind]["tokens_per_word"] < t["char"]["tokens_per_word"]
        assert t[kind]["unknown"] == 0 and t[kind]["vocab"] == v["pieces"]
    assert t["char"]["vocab"] < v["pieces"] < t["word"]["vocab"]
    assert v["round_trip"] is True
    assert "▁un" in v["examples"]["bpe"]


def test_8_2_2_vocab_size_against_min_freq(values):
    v = values("8.2.2")
    w = v["word_vocab"]
    assert v["size_is_unk_plus_frequent_words"] is True
    assert w["m0"] == w["m1"] == v["word_types"] + 1
    assert v["drop_1_to_2"] == v["hapaxes"] == w["m1"] - w["m2"] > 0
    sizes = [w[f"m{m}"] for m in (1, 2, 3, 5, 10, 20, 50, 100)]
    assert all(a > b for a, b in itertools.pairwise(sizes))
    assert abs(v["removed_at_3"] - (1 - w["m3"] / w["m1"])) < 1e-12 and v["removed_at_3"] > 0.3
    coverage = v["token_coverage"]
    assert coverage["m2"] > 0.9 and abs(coverage["m2"] - (1 - v["hapax_share_of_tokens"])) < 1e-12
    assert v["char_vocab"]["m1"] == 28 and v["char_vocab"]["m100"] >= 26


def test_8_3_1_ngram_counts_to_store(values):
    v = values("8.3.1")
    d, n = v["distinct"], v["tokens"]
    assert d["n1"] < d["n2"] < d["n3"] < d["n4"] <= n - 3
    assert v["total_counts"] == sum(d.values()) <= v["position_bound"] == 4 * n - 6
    assert v["log10_vocab_power_4"] > 10  # V^4 is astronomically more
    assert v["singleton_share"]["n4"] > 0.5
    growth = v["distinct_per_token_by_prefix"]
    assert growth["n1"][0] > growth["n1"][1] > growth["n1"][2]  # words: sublinear
    assert min(growth["n4"]) > 0.7  # 4-grams: nearly one new per token


def test_8_3_3_zipf_exponents_fall_with_n(values):
    v = values("8.3.3")
    a = v["alpha"]
    assert 0.8 < a["n1"] < 1.3
    assert v["decreasing"] is True and a["n3"] > 0.2
    assert all(f["last_rank"] - v["first_rank"] >= 100 for f in v["fits"].values())


def test_8_3_5_random_offset_coverage(values):
    v = values("8.3.5")
    T = v["num_steps"]
    assert abs(v["read_first"] - 1 / T) < 0.03
    assert v["first_ramp_error"] < 0.05
    assert v["read_last"] == 0.0
    assert v["edge_ratio"] < 0.4 and v["read_middle"] > 0.9
    assert abs(v["start_middle_mean"] - v["read_middle"] / T) < 1e-3
    assert 0.95 < v["circular_min_ratio"] <= 1 <= v["circular_max_ratio"] < 1.05
    assert abs(v["circular_edge_ratio"] - 1) < 0.03


def test_8_3_6_padding_random_bucketed_packed(values):
    v = values("8.3.6")
    assert v["random_efficiency"] < 0.5
    assert v["bucket_efficiency"] > 0.9
    assert v["packed_efficiency"] > 0.98
    assert v["longest"] > v["p99_length"] > v["median_length"]


def test_1_0_9_2_3_other_corpora(values):
    v = values("1.0/9.2.3")
    assert 0.8 < v["main_alpha_1"] < 1.3
    assert v["bigram_flatter_everywhere"] is True
    assert v["generated_word_vocab"] < v["main_word_vocab"] / 5
    assert v["french_extra_chars"] > 0 and v["english_accented"] == 0
    assert v["generated_alpha_2"] > v["main_alpha_2"] + 0.1
    assert v["generated_french_vocab"] > v["generated_word_vocab"]
    lo, hi = v["natural_alpha_1"]
    assert 0.8 < lo <= v["main_alpha_1"] <= hi < 1.3
    assert len(v["corpora"]) >= 3 and v["tatoeba_here"] is False  # small: no fra.txt read
