"""Exercises of d2l 0.17 sections 9.1-9.4 (1.0's 10.1-10.4), asserted at small size."""

from __future__ import annotations

import math


def test_9_1_1_gates_that_read_only_x_t_prime(values):
    v = values("9.1.1")
    assert v["state_vs_mlp_of_x_t_prime"] < 1e-9
    assert v["grad_elsewhere_max"] < 1e-9
    assert v["grad_at_t_prime"] > 0.1
    assert v["free_grad_elsewhere_max"] > 1e-3


def test_9_1_2_and_9_2_1_hyperparameters(values):
    v = values("9.1.2")
    assert values("9.2.1") is v or values("9.2.1") == v  # one shared run
    table = v["table"]
    vocab_size = 28
    for cell in ("gru", "lstm"):
        assert v["ppl_gain_hidden_x2"][cell] > 1.0
        assert v["ppl_loss_lr_div10"][cell] > 1.2
        assert 2.0 < v["ops_ratio_hidden_x2"][cell] < 4.0
        assert abs(v["ops_ratio_steps_x2"][cell] - 2.0) < 0.01
        assert all(r["ppl"] < vocab_size for r in table[cell].values())
        assert all(r["sample"].startswith("the ") for r in table[cell].values())
    assert table["lstm"]["base"]["ops"] > table["gru"]["base"]["ops"]


def test_9_1_3_rnn_against_gru(values):
    v = values("9.1.3")
    assert 2.0 < v["gru_over_rnn_flops"] < 3.0
    assert v["params"]["gru"] > 2 * v["params"]["rnn"]
    assert all(p < 20 for c in ("rnn", "gru") for p in v["ppl"][c])
    gap = v["rnn_minus_gru"]
    assert gap["n"] == v["seeds"] and len(v["ppl"]["gru"]) == v["seeds"]
    expected = sum(a - b for a, b in zip(v["ppl"]["rnn"], v["ppl"]["gru"])) / v["seeds"]
    assert math.isclose(gap["mean"], expected, rel_tol=1e-9)
    lower = gap["agree"] == gap["n"] and gap["mean"] > 0
    assert v["verdict"] == ("lower in every seed" if lower else "not reliably lower")


def test_9_1_4_update_gate_carries_long_range_memory(values):
    ab = values("9.1.4")["gate_ablation"]
    loss = ab["loss"]
    assert all(x > 0.5 for x in loss["long"]["no update"])
    assert all(x < 0.1 for x in loss["long"]["full"])
    assert all(x < 0.2 for variant in loss["short"].values() for x in variant)
    assert ab["long_no_update_over_full"]["agree"] == ab["seeds"]


def test_9_2_2_character_model_invents_words(values):
    f = values("9.2.2")["real_word_fraction"]
    assert 0.05 < f["gru"] < 1.0
    assert f["uniform characters"] < 0.02


def test_9_2_3_counted_cost_of_rnn_gru_lstm(values):
    v = values("9.2.3")
    t = v["table"]
    for h in v["sizes"]:
        assert t[f"gru h={h}"]["recurrent_over_rnn"] == 3.0
        assert t[f"lstm h={h}"]["recurrent_over_rnn"] == 4.0
        assert t[f"gru h={h}"]["params_over_rnn"] == 3.0
        assert t[f"lstm h={h}"]["params_over_rnn"] == 4.0
        # the RNN's recurrent part: 2 (V + h) h FLOPs per example and step
        assert t[f"rnn h={h}"]["recurrent_flops"] == 2 * v["B"] * v["T"] * (v["V"] + h) * h
    assert all(2.0 < r < 3.2 for r in v["training_over_inference"].values())


def test_9_2_4_cell_exceeds_one_hidden_does_not(values):
    v = values("9.2.4")
    assert v["cell_minus_t"] < 1e-6
    assert v["max_abs_cell"] > v["T"] - 1
    assert v["max_abs_hidden"] < 1.0
    assert v["without_tanh_max"] > 1.0
    assert v["free_max_abs_cell"] > 1.0 and v["free_max_abs_hidden"] < 1.0


def test_9_2_5_lstm_time_series(values):
    v = values("9.2.5")
    mse = v["mse"]
    assert mse["lstm"]["1"] < 1.6 * v["noise_variance"]
    assert mse["lstm"]["64"] > mse["lstm"]["1"] and mse["mlp"]["64"] > mse["mlp"]["1"]
    assert v["lstm_over_mlp"]["4"] < 1.0


def test_9_3_1_two_layer_scratch_equals_torch(values):
    v = values("9.3.1")
    assert v["output_max_diff"] < 1e-12
    assert v["state_max_diff"] < 1e-12
    assert v["grad_max_diff"] < 1e-12
    assert v["ppl_after"] < 0.6 * min(v["ppl_before"], v["vocab_size"])


def test_9_3_2_deep_gru_learns_faster_than_deep_lstm(values):
    v = values("9.3.2")
    gap = v["lstm_minus_gru"]
    assert gap["agree"] == gap["n"] == v["seeds"] and gap["min"] > 0.5
    assert 1.2 < v["lstm_over_gru_flops"] < 4 / 3


def test_9_3_3_all_the_text_is_read_and_helps(values):
    v = values("9.3.3")
    assert v["corpus_chars"] == v["chars_in_lines"] > 10 * 10000
    gap = v["smallest_minus_all"]
    assert gap["agree"] == gap["n"] == v["seeds"]
    assert v["train_chars"]["all"] > 100 * v["train_chars"]["1/128"]


def test_9_3_4_mixing_authors(values):
    v = values("9.3.4")
    assert v["cross_over_own_min"] > 1.0
    assert v["cross_minus_own"]["A"]["agree"] == v["seeds"]
    assert v["cross_minus_own"]["B"]["agree"] == v["seeds"]
    assert v["mixed_over_cross_max"] < 1.0
    assert v["mixed_over_own_max"] > 1.0


def test_9_4_1_directions_of_different_widths(values):
    v = values("9.4.1")
    assert v["H_shape"][-1] == v["h_f"] + v["h_b"] == 8
    assert v["output_weight_shape"] == [10, 8]
    assert v["forward_half_grad_later_inputs"] == 0.0
    assert v["backward_half_grad_last_input"] > 1e-4
    assert v["torch_bidirectional_shape"][-1] == 8


def test_9_4_2_bidirectional_two_layers_sees_both_sides(values):
    v = values("9.4.2")
    assert v["output_shape"][0] == v["T"] and v["output_shape"][2] == 32
    assert v["state_shape"][0] == 4 and v["state_shape"][2] == 16
    assert v["layer2_input_weight_shape"] == [48, 32]
    assert v["bi_minus_uni"]["agree"] == v["seeds"]
    assert all(a > 0.9 for a in v["accuracy"]["bidirectional"])
    assert all(a < 0.3 for a in v["accuracy"]["unidirectional"])


def test_9_4_3_contextual_vectors(values):
    v = values("9.4.3")
    assert v["embedding_spread"] < 1e-6
    assert v["context_spread"] > 0.1
    p = v["probe"]
    assert p["bidirectional"]["left"] > 0.7 and p["bidirectional"]["right"] > 0.7
    assert p["embedding"]["left"] < 0.35 and p["embedding"]["right"] < 0.35
    assert p["unidirectional"]["right"] < 0.35
