"""Exercises of d2l 0.17 sections 8.1-8.3 and 1.0's 9.1-9.3 (with 1.0's 9.2.3), asserted at
both sizes (the ``values`` fixture: the small run here, seed 0, and the full-size record).
A claim over seeds asserts ``supports`` (an exact sign test and a Student-t interval,
which need at least 5 seeds); shapes, lengths and names are bookkeeping, not claims."""

from __future__ import annotations

import itertools

from attnkit.tour.stats import supports


def test_8_1_1_lags_noise_free_and_architectures(values):
    v = values("8.1.1")
    taus = v["mse_by_tau"]
    # more than 4 lags help in a test over the noise draws; the error levels off before 64
    assert 4 < v["enough_lags"] <= 32
    assert supports(v["gain_4_to_16"]) and v["gain_4_to_16"]["n"] == v["seeds"] >= 5
    assert taus["tau1"] > taus["tau2"] > taus["tau4"] > taus["tau16"]
    assert all(m > v["noise_variance"] for m in taus.values())  # never below the noise
    # no noise: x_t = 2 cos(w) x_{t-1} - x_{t-2}, fitted exactly with two lags
    assert v["noise_free_mse_tau2"] < 1e-20 < 1e-6 < v["noise_free_mse_tau1"]
    c1, c2 = v["noise_free_coef"]
    assert abs(c1 - v["two_cos_omega"]) < 1e-9 and abs(c2 + 1) < 1e-9
    # four features reaching 15 steps back (window means) beat lags 1-4 and lags 1, 2, 4, 8
    assert supports(v["means_vs_lags"]) and supports(v["means_vs_sparse"])
    assert v["four_means"] < min(v["four_lags"], v["four_sparse"])
    # k steps ahead: the 16-lag linear model beats the book's MLP 16 and 64 steps ahead
    # (full size: 6 seeds, a test; small size: 2 seeds, too few for one, each agrees)
    for s in v["linear16_vs_mlp"].values():
        assert s["n"] == v["arch_seeds"]
        assert s["agree"] == s["n"] if values.small else supports(s)
    # more capacity does not help: the deeper MLP's mean error 16 steps ahead is the larger
    deep = v["deep_vs_mlp_16"]
    assert deep["mean"] < 0 and not supports(deep)
    assert v["k_deep"]["k16"] > v["k_mlp"]["k16"]
    lin4 = v["k_linear4"]
    assert all(lin4[a] < lin4[b] for a, b in (("k1", "k4"), ("k4", "k16"), ("k16", "k64")))


def test_8_1_4_latent_models_cite_the_lags_of_8_1_1(values):
    """8.1.4's answer: an autoregression on raw observations needs many lags to average
    the noise away (8.1.1), where a latent state would carry a summary."""
    v = values("8.1.1")
    assert v["enough_lags"] > 4 and v["best_tau_vs_sine"] > 4
    assert supports(v["means_vs_lags"])  # a summary of older values beats more raw lags


def test_8_1_2_past_winners_selection_regression_survivorship(values):
    v = values("8.1.2")
    # no real differences: a large past edge (selected on noise), none after
    past, future = v["noise_past_seeds"], v["noise_future_seeds"]
    assert supports(past) and past["mean"] > 0.01
    assert future["low"] < 0 < future["high"]  # the 95% interval of the future edge covers 0
    assert abs(future["mean"]) < 0.1 * past["mean"]
    # small real differences: the edge shrinks by var(mu) / (var(mu) + sd^2 / 36)
    assert abs(v["shrink_measured"] - v["shrink_theory"]) < 0.03
    err = v["shrink_error_seeds"]
    assert err["n"] == v["seeds"] and err["low"] < 0 < err["high"]
    assert 0 < v["skill_future_excess"] < v["skill_past_excess"]
    assert supports(v["survivor_bias_seeds"]) and v["survivor_bias"] > 0.001


def test_8_1_3_text_is_as_predictable_backwards(values):
    v = values("8.1.3")
    assert v["train_gap"] < 1e-3  # maximum likelihood: the same up to the two ends
    assert v["largest_test_gap"] < 0.01
    fwd, bwd = v["test_bits_forward"], v["test_bits_backward"]
    assert fwd["o2"] > fwd["o3"] > fwd["o5"] > 1.0  # a real model: higher orders do better
    assert bwd["o2"] > bwd["o3"] > bwd["o5"] > 1.0


def test_8_2_1_subwords_between_words_and_characters(values):
    v = values("8.2.1")
    t = v["tokenizers"]
    assert v["word_unknown"] > 0.01 and t["char"]["unknown"] == 0
    for kind in ("bpe", "unigram"):
        assert 1.0 < t[kind]["tokens_per_word"] < t["char"]["tokens_per_word"]
        assert t[kind]["unknown"] == 0
        assert t[kind]["vocab"] == v["pieces"]  # bookkeeping: the size asked for
    assert t["char"]["vocab"] < v["pieces"] < t["word"]["vocab"]
    assert v["round_trip"] is True
    assert "▁un" in v["examples"]["bpe"]


def test_8_2_2_vocab_size_against_min_freq(values):
    v = values("8.2.2")
    w = v["word_vocab"]
    # Vocab's size against an independent count of the words seen at least min_freq times
    assert w == {m: 1 + n for m, n in v["words_at_least"].items()}
    assert w["m0"] == w["m1"] == v["word_types"] + 1
    assert v["drop_1_to_2"] == v["hapaxes"] > 0
    sizes = [w[f"m{m}"] for m in (1, 2, 3, 5, 10, 20, 50, 100)]
    assert all(a > b for a, b in itertools.pairwise(sizes))
    assert v["removed_at_3"] > 0.3
    # the text encoded by the min_freq-2 vocabulary against the count of words seen once
    coverage = v["token_coverage"]
    assert coverage["m2"] > 0.9 and abs(coverage["m2"] - (1 - v["hapax_share_of_tokens"])) < 1e-12
    assert v["char_vocab"]["m1"] == 28 and v["char_vocab"]["m100"] >= 26


def test_8_3_1_ngram_counts_to_store(values):
    v = values("8.3.1")
    d, n = v["distinct"], v["tokens"]
    assert d["n1"] < d["n2"] < d["n3"] < d["n4"] <= n - 3
    assert v["total_counts"] < v["position_bound"]  # repeated n-grams: fewer than positions
    assert v["log10_vocab_power_4"] > 10  # V^4 is astronomically more
    assert v["singleton_share"]["n4"] > 0.5
    growth = v["distinct_per_token_by_prefix"]
    assert growth["n1"][0] > growth["n1"][1] > growth["n1"][2]  # words: sublinear
    assert min(growth["n4"]) > 0.7  # 4-grams: nearly one new per token


def test_8_3_3_zipf_exponents_fall_with_n(values):
    v = values("8.3.3")
    a = v["alpha"]
    assert 0.8 < a["n1"] < 1.3
    assert a["n1"] > a["n2"] > a["n3"] > 0.2
    assert all(f["last_rank"] - v["first_rank"] >= 100 for f in v["fits"].values())


def test_8_3_4_reading_long_sequences_cites_8_3_5_and_8_3_6(values):
    """8.3.4's answer points to 8.3.5 (the book's offsets are not uniform; rotating the
    corpus makes them so) and 8.3.6 (bucketing and packing waste less than random batches)."""
    offsets, padding = values("8.3.5"), values("8.3.6")
    assert offsets["edge_ratio"] < 0.5 < 0.95 < offsets["circular_edge_ratio"]
    assert padding["random_efficiency"] < padding["bucket_efficiency"]
    assert padding["random_efficiency"] < padding["packed_efficiency"]


def test_8_3_5_random_offset_coverage(values):
    v = values("8.3.5")
    T = v["num_steps"]
    assert abs(v["read_first"] - 1 / T) < 0.03
    assert v["first_ramp_error"] < 0.05
    assert v["read_last"] == 0.0
    assert v["edge_ratio"] < 0.4 and v["read_middle"] > 0.9
    assert abs(v["start_middle_mean"] - v["read_middle"] / T) < 1e-3
    assert 0.95 < v["circular_min_ratio"] and v["circular_max_ratio"] < 1.05
    assert abs(v["circular_edge_ratio"] - 1) < 0.03


def test_8_3_6_padding_random_bucketed_packed(values):
    v = values("8.3.6")
    assert v["random_efficiency"] < 0.5
    assert v["bucket_efficiency"] > 0.9
    assert v["packed_efficiency"] > 0.98
    assert v["longest"] > v["p99_length"] > v["median_length"]


def test_1_0_9_2_3_other_corpora(values):
    v = values("1.0/9.2.3")
    m = v["measures"]
    assert 0.8 < v["main_alpha_1"] < 1.3
    assert all(c["alpha_2"] < c["alpha_1"] for c in m.values())  # bigrams flatter everywhere
    assert v["generated_word_vocab"] < v["main_word_vocab"] / 5
    assert v["french_extra_chars"] > 0 and v["english_accented"] == 0
    assert v["generated_alpha_2"] > v["main_alpha_2"] + 0.1
    assert v["generated_french_vocab"] > v["generated_word_vocab"]
    lo, hi = v["natural_alpha_1"]
    assert 0.8 < lo and hi < 1.3
    # bookkeeping: the main corpus and the two generated sides, at least
    assert v["main"] == v["corpora"][0] and len(v["corpora"]) >= 3
    assert v["tatoeba_here"] == any(name.startswith("Tatoeba") for name in v["corpora"])


def test_1_0_9_2_3_cites_the_zipf_fit_of_8_3_3(values):
    """1.0's 9.2.3 compares other corpora with 8.3.3's fit: on the same corpus, its first
    words give about the exponents 8.3.3 fits on the whole text."""
    corpora, zipf = values("1.0/9.2.3"), values("8.3.3")
    assert corpora["main"] == zipf["corpus"]
    assert abs(corpora["main_alpha_1"] - zipf["alpha"]["n1"]) < 0.15
    assert corpora["main_alpha_2"] < corpora["main_alpha_1"]
    assert zipf["alpha"]["n2"] < zipf["alpha"]["n1"]
