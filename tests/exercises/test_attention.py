"""Exercises of d2l 0.17 sections 10.1-10.4 and 1.0's 11.1-11.3, asserted at small size."""

from __future__ import annotations

import math


def test_10_1_2_random_softmax_rows_are_distributions(values):
    v = values("10.1.2")
    assert v["row_sum_error"] < 1e-12 and v["min_weight"] > 0
    assert v["same_order"] is True
    assert 1 < v["max_ratio_in_row"] < math.e


def test_10_1_1_the_query_decides_what_is_pooled(values):
    v = values("10.1.1")
    assert v["pooling_change"] < 1e-6
    assert v["attention_change"] > 1.0
    assert v["argmax_query1"] == 1 and v["argmax_query2"] != v["argmax_query1"]


def test_10_2_1_more_data_helps_only_with_a_shrinking_width(values):
    v = values("10.2.1")
    assert v["shrinking_falls"] is True
    assert v["last"]["shrinking"] < 0.25 * v["first"]["shrinking"]
    assert 0.85 < v["fixed_1_last_ratio"] <= 1.0  # the bias floor: more data barely helps
    assert v["last"]["fixed_1"] > 20 * v["last"]["shrinking"]
    assert v["last"]["shrinking"] < v["last"]["fixed_03"] < v["last"]["fixed_1"]


def test_10_2_2_learned_w_is_a_narrow_rough_kernel(values):
    v = values("10.2.2")
    assert v["learned_w"] > 5
    assert v["losses"][-1] < 0.5 * v["losses"][0]
    assert v["roughness_learned"] > 10 * v["roughness_fixed"]


def test_10_2_3_leave_one_out_width_beats_the_default(values):
    v = values("10.2.3")
    s = v["cv_beats_default"]
    assert s["agree"] == s["n"] == v["seeds"] and s["min"] > 0.1
    assert 0.1 < v["median_width"] < 0.5
    assert v["mse_cv_mean"] < 1.6 * v["mse_oracle_mean"] < v["mse_default_mean"]


def test_10_2_4_per_key_widths_overfit_but_beat_the_book_recipe(values):
    v = values("10.2.4")
    assert v["row_sum_error"] < 1e-5 and v["parameters"] == 50
    assert v["mean_mse"]["single_w"] < v["mean_mse"]["per_key"] < v["mean_mse"]["book"]
    assert v["vs_book"]["agree"] == v["seeds"]
    assert v["widths_range"][0] < 0.5 * v["widths_range"][1]


def test_10_3_1_random_keys_separate_additive_and_dot(values):
    v = values("10.3.1")
    assert v["ones_keys_max_diff"] < 1e-6 and v["ones_keys_uniform_error"] < 1e-6
    assert v["random_keys_max_diff"] > 0.05


def test_10_3_2_bilinear_score_for_different_widths(values):
    v = values("10.3.2")
    assert v["bilinear_vs_einsum"] < 1e-5
    assert v["bilinear_masked_mass"] == 0.0
    assert tuple(v["bilinear_output_shape"]) == (2, 1, 4)


def test_10_3_3_vector_sum_cannot_attend_by_query(values):
    v = values("10.3.3")
    assert v["vector_sum_query_spread"] < 1e-6


def test_10_4_1_lstm_bahdanau_queries_with_h_and_trains(values):
    v = values("10.4.1")
    assert v["lstm_query_error"] < 1e-12
    assert v["generic_vs_library"] < 1e-6
    for name in ("gru", "lstm"):
        assert max(v["train_loss"][name]) < 0.75 * v["uniform_loss"]
    assert v["lstm_loss_higher"] == v["seeds"]
    assert v["params"]["lstm"] > v["params"]["gru"]


def test_10_4_2_dot_score_is_cheaper_per_batch(values):
    v = values("10.4.2")
    h = v["hidden"]
    assert v["dot_score_error"] < 1e-12
    assert v["attention_params_saved"] == 2 * h * h + h
    assert v["dot_over_additive_flops"] < 0.95 and v["dot_over_additive_total"] < 0.95
    assert max(v["train_loss"]["gru_dot"]) < 0.75 * v["uniform_loss"]


def test_11_1_1_narrow_distance_kernel_is_exact_lookup(values):
    v = values("1.0/11.1.1")
    w = v["nearest_weight_by_width"]
    assert w["2.0"] < w["0.5"] < w["0.1"] <= w["0.02"]
    assert w["0.02"] > 0.999 and w["2.0"] < 0.2


def test_11_1_2_gradient_is_the_covariance(values):
    v = values("1.0/11.1.2")
    assert v["max_error"] < 1e-12
    assert v["max_asymmetry"] < 1e-12
    assert v["min_eigenvalue"] > -1e-12


def test_11_1_3_soft_search_beats_keywords(values):
    v = values("1.0/11.1.3")
    assert v["trained_accuracy"] > 0.8
    assert v["trained_accuracy"] > v["keyword_accuracy"] + 0.2
    assert v["untrained_accuracy"] < 0.1
    assert 0.3 < v["keyword_accuracy"] < 0.8


def test_11_1_4_squeeze_excitation_is_sigmoid_gated_attention(values):
    v = values("1.0/11.1.4")
    assert v["se_vs_attention"] < 1e-12
    lo, hi = v["gate_sum_range"]
    assert 0 < lo <= hi < v["channels"] and abs(lo - 1) > 0.5


def test_11_2_1_parzen_difference_has_the_nw_sign(values):
    v = values("1.0/11.2.1")
    assert v["identity_error"] < 1e-12
    assert v["sign_agreement"] == 1.0
    assert v["factor_range"][0] > 0


def test_11_2_2_self_inclusion_collapses_the_width(values):
    v = values("1.0/11.2.2")
    assert v["max_width_with_self"] < 0.1
    assert v["max_train_mse_with_self"] < 0.5 * v["noise_variance"]
    assert v["min_width_loo"] > 0.1
    assert v["mean"]["leave_one_out"]["train"] > 0.5 * v["noise_variance"]
    s = v["loo_test_better"]
    assert s["agree"] == s["n"] and s["min"] > 0.05


def test_11_2_3_unit_sphere_gaussian_is_dot_product(values):
    v = values("1.0/11.2.3")
    assert v["distance_error"] < 1e-12
    assert v["weight_error"] < 1e-12
    assert v["off_sphere_difference"] > 0.1


def test_11_2_4_width_rate_depends_on_dimension(values):
    v = values("1.0/11.2.4")
    assert abs(v["width_exponent"]["d1"] + 0.2) < 0.05
    assert abs(v["mse_exponent"]["d1"] + 0.8) < 0.1
    assert v["mse_exponent"]["d3"] > v["mse_exponent"]["d1"]  # slower in higher dimension
    for i in range(len(v["sizes"])):
        assert v["best_mse"]["d1"][i] < v["best_mse"]["d2"][i] < v["best_mse"]["d3"][i]
        assert v["best_width"]["d1"][i] < v["best_width"]["d2"][i] < v["best_width"]["d3"][i]


def test_11_3_1_distance_attention_from_key_norms(values):
    v = values("1.0/11.3.1")
    assert v["weight_error"] < 1e-12 and v["output_error"] < 1e-12
    assert v["masked_weight"] == 0.0
    assert v["direct_over_efficient_elements"] > 5


def test_11_3_3_attention_flops_formula(values):
    v = values("1.0/11.3.3")
    assert v["flops_formula_exact"] is True and v["largest_formula_error"] == 0
    g = v["growth_when_doubled"]
    for key in ("b", "n", "m"):
        assert g[key]["flops"] == 2.0 and abs(g[key]["elements"] - 2.0) < 0.05
    assert g["d"]["flops"] == (2 * 8 + 4) / (8 + 4) and g["dv"]["flops"] == (8 + 8) / (8 + 4)
    assert g["d"]["elements"] == 1.0 and g["dv"]["elements"] == 1.0
    assert 1.0 <= v["elements_per_score_large_n"] < 4
