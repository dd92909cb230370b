"""Exercises of d2l 0.17 sections 9.5-9.8 (machine translation data, encoder-decoder,
seq2seq, beam search), asserted at small size (seed 0)."""

from __future__ import annotations

import math


def test_9_5_1_vocabulary_grows_sublinearly(values):
    v = values("9.5.1")
    assert v["nondecreasing"] is True
    assert 1.0 <= v["max_target_growth"] < 2.0  # doubling the pairs: < 2x the vocabulary
    assert v["last_target_growth"] < v["target_growth_per_doubling"][0]
    assert v["last_target_growth"] < 1.3
    assert v["target_larger"] is True
    assert v["off_by_one"] == 1 and v["first"]["pairs_read"] == v["first"]["num_examples"] + 1
    assert v["first"]["target_types"] > v["first"]["target"]  # min_freq=2 drops singletons


def test_9_5_2_no_spaces_whitespace_tokens_are_sentences(values):
    v = values("9.5.2")
    n = v["sentences"]
    assert n["held_out"] * 4 == n["train"]
    ws = v["whitespace_without_spaces"]
    assert ws["unseen_rate"] > 0.95 and ws["vocab"] > 0.9 * n["train"]
    assert v["characters"]["vocab"] < 60 and v["characters"]["unseen_rate"] == 0.0
    assert 100 < v["words_with_spaces"]["vocab"] < 1000
    assert v["words_with_spaces"]["unseen_rate"] < 0.01
    assert 0.6 < v["segmenter_exact_sentences"] < 1.0
    assert v["segmenter_word_recall"] > 0.9


def test_9_6_1_feed_forward_encoder_feeds_a_gru_decoder(values):
    v = values("9.6.1")
    assert (
        v["shapes"]["bag"]["encoder_state"][0] == 1 and v["shapes"]["bag"]["encoder_state"][2] == 32
    )
    assert v["shapes"]["bag"]["decoder_state"][2] == 64
    s = v["bag_vs_zeros"]
    assert s["agree"] == s["n"] == v["seeds"] and s["min"] > 0.1
    assert all(len(v["bleu"][k]) == v["seeds"] for k in ("bag", "zeros", "bridge"))
    assert all(b < z for b, z in zip(v["val_loss"]["bag"], v["val_loss"]["zeros"]))


def test_9_7_1_wider_model_has_higher_bleu(values):
    v = values("9.7.1")
    s = v["diff"]
    assert s["agree"] == s["n"] == v["seeds"] and s["mean"] > 3.0
    assert all(w > b for w, b in zip(v["wide"], v["base"]))
    assert 3.0 < v["ops_ratio"] < 4.0
    assert v["flops_per_token"]["wide"] > v["flops_per_token"]["base"] > 0


def test_9_7_2_unmasked_loss_learns_padding(values):
    v = values("9.7.2")
    p = v["probe"]
    assert p["no_mask"]["p_pad_at_padding"] > 0.9
    assert p["base"]["p_pad_at_padding"] < 0.01
    assert p["no_mask"]["p_pad_at_real"] < 0.05
    assert p["no_mask"]["loss_all"] < p["no_mask"]["loss_real"]  # easy padding flatters it
    assert p["base"]["loss_all"] > p["base"]["loss_real"]  # never trained on padding
    assert abs(v["output_length"]["no_mask"] - v["output_length"]["base"]) < 1.0
    assert 3 < v["reference_length"] < 10
    assert v["diff"]["n"] == v["seeds"] and len(v["no_mask"]) == v["seeds"]


def test_9_7_3_bridge_carries_the_source(values):
    v = values("9.7.3")
    assert v["shapes"]["bridge"]["encoder_state"][0] == 2
    assert v["shapes"]["bridge"]["encoder_state"][2] == 32
    assert v["shapes"]["bridge"]["decoder_state"][0] == 1
    assert v["shapes"]["bridge"]["decoder_state"][2] == 64
    s = v["bridge_vs_zeros"]
    assert s["agree"] == s["n"] == v["seeds"] and s["min"] > 0.05
    assert all(b < z for b, z in zip(v["val_loss"]["bridge"], v["val_loss"]["zeros"]))
    assert len(v["bleu"]["bridge"]) == v["seeds"]


def test_9_7_4_teacher_forcing_beats_free_running(values):
    v = values("9.7.4")
    s = v["teacher_forcing_wins"]
    assert s["agree"] == s["n"] == v["seeds"] and s["mean"] > 2.0
    r = v["carried_over_reset"]
    assert r["agree"] == r["n"] and r["mean"] > 0.5
    loss = v["val_loss_teacher_forced"]
    for tf, free, reset in zip(loss["base"], loss["free_running"], loss["free_running_reset"]):
        assert tf < free < reset
    assert all(len(b) == v["seeds"] for b in v["bleu"].values())
    assert v["train_loss_last"]["base"] < v["train_loss_last"]["free_running"]


def test_9_7_5_lstm_costs_more_and_trains(values):
    v = values("9.7.5")
    assert 1.0 < v["ops_ratio"] < 4 / 3
    assert v["flops_per_token"]["lstm"] > v["flops_per_token"]["base"]
    assert v["params"]["lstm"] > v["params"]["base"]
    log_v = math.log(300)  # about the target vocabulary: the loss of uniform guesses
    assert v["train_loss_last"]["lstm"] < log_v / 2 and v["train_loss_last"]["base"] < log_v / 2
    assert v["diff"]["n"] == v["seeds"] and len(v["lstm"]) == v["seeds"]
    assert v["diff"]["agree"] == 0  # equal epochs: the GRU fits faster on every seed


def test_9_8_1_never_pruning_beam_is_exhaustive(values):
    v = values("9.8.1")
    assert v["k_never_prunes"] == v["vocab"] ** (v["steps"] - 1) == 125
    assert v["missed"]["k_full"] == 0 and v["max_gap"]["k_full"] < 1e-4
    assert v["missed"]["k1"] >= 1 and v["max_gap"]["k1"] > 0.01
    assert v["missed"]["k1"] >= v["missed"]["k_full"]
    assert v["min_gap"] > -1e-4
    assert v["candidates_scored"]["k_full"] > 10 * v["candidates_scored"]["k1"]


def test_9_8_2_beam_size_raises_model_score_and_cost(values):
    v = values("9.8.2")
    assert v["log_prob_nondecreasing"] is True
    assert v["log_prob_gain_8_over_1"] > 0.05
    assert 4.0 < v["steps_ratio_8_over_1"] <= 8.0
    k1, n = v["raw"]["k1"], v["val_sentences"]
    # greedy runs one decoder step per output token + <eos> (unfinished: no <eos>)
    assert abs(k1["decoder_steps"] - n * (k1["length"] + 1)) <= n
    assert v["bleu_range"] >= 0
    assert v["normalised"]["k8"]["length"] >= v["raw"]["k8"]["length"] - 1e-9


def test_9_8_3_beam_beats_greedy_on_score_and_repeats(values):
    v = values("9.8.3")
    assert v["steps"] == 40
    assert v["beam_beats_greedy"] == v["prefixes"]
    assert v["beam_minus_greedy"] > 0.1
    lp = v["log_prob"]
    assert lp["sampled"] < lp["greedy"] < lp["beam8"]
    rep = v["repeated_4grams"]
    assert rep["beam8"] > rep["sampled"] + 0.2 and rep["greedy"] > rep["sampled"]
