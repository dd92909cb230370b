"""Every topic of ``attnkit tour`` at small sizes: each finding asserted, not just drawn."""

from __future__ import annotations

import itertools
import math

import pytest
from matplotlib.figure import Figure

from attnkit.tour import TOPICS, TopicResult, get_topic, run_topic

_CACHE: dict[str, TopicResult] = {}


def result(name: str) -> TopicResult:
    if name not in _CACHE:
        _CACHE[name] = run_topic(name, small=True, seed=0)
    return _CACHE[name]


@pytest.mark.parametrize("name", list(TOPICS))
def test_every_topic_has_a_finding_and_figures(name, tmp_path):
    r = result(name)
    assert r.name == name and len(r.finding) > 40 and r.values
    assert r.figures and all(isinstance(f, Figure) for f in r.figures.values())
    assert r.seconds < 60
    written = r.save(tmp_path)
    assert len(written) == len(r.figures)
    assert all(p.name.startswith(f"{name}_") and p.stat().st_size > 1000 for p in written)
    r.close()


def test_cues_query_changes_attention_not_pooling():
    v = result("cues").values
    assert v["pooling_change"] == 0.0
    assert v["attention_change"] > 0.5
    assert v["argmax_query1"] != v["argmax_query2"]


def test_kernels_converge_and_learned_width_is_rougher():
    v = result("kernels").values
    assert set(v["mse"]) == {"gaussian", "laplacian", "boxcar", "constant", "epanechnikov"}
    assert len(set(round(e, 6) for e in v["mse"]["constant"])) == 1  # width-independent
    conv = v["convergence_mse"]
    assert all(b < a for a, b in itertools.pairwise(conv)) and conv[-1] < conv[0] / 5
    assert v["learned_w"] > 1.0 and v["losses"][-1] < v["losses"][0]
    assert v["roughness_learned"] > 10 * v["roughness_fixed"]


def test_scoring_exercises():
    v = result("scoring").values
    assert v["ones_keys_max_diff"] < 1e-6  # identical keys: both uniform
    assert v["random_keys_max_diff"] > 0.05
    assert v["bilinear_vs_einsum"] < 1e-5
    assert v["bilinear_masked_mass"] == 0.0
    assert v["vector_sum_query_spread"] < 1e-6  # the weights ignore the query


def test_scaling_variance_linear_and_gradients_vanish():
    v = result("scaling").values
    assert all(abs(r - 1) < 0.1 for r in v["variance_over_d"])
    raw, scaled = v["jacobian_unscaled"], v["jacobian_scaled"]
    assert raw[-1] < raw[0] / 3  # saturation: the softmax gradient vanishes
    assert max(scaled) / min(scaled) < 1.2  # with 1/sqrt(d) it does not
    assert v["max_weight_unscaled"][-1] > 0.85 > v["max_weight_scaled"][-1]


def test_self_attention_matrix_form_equals_library():
    v = result("self-attention").values
    assert v["max_diff_one_head"] < 1e-5
    assert v["max_diff_weights"] < 1e-5
    assert v["max_diff_multi_head"] < 1e-5


def test_multihead_heads_differ_and_parameters():
    v = result("multihead").values
    assert v["head_distance"] > 0.1  # heads attend to different keys
    assert len(v["head_entropy"]) == 4 and max(v["head_entropy"]) > min(v["head_entropy"])
    assert v["additive_output_shape"] == (2, 6, 16) and v["additive_head_distance"] > 0
    counts = list(v["params"].values())
    assert counts[0] == counts[1] == 4 * 64 * 64 and counts[2] > counts[0]


def test_positions_rotation_and_uniqueness():
    v = result("positions").values
    assert max(v["rotation_error"].values()) < 1e-5
    assert max(v["fit_gap"].values()) < 1e-4  # fitted on either half: the same matrix
    assert v["unique_rows"] == v["max_len"] and v["min_pairwise_distance"] > 0.1
    assert v["omega"] == sorted(v["omega"], reverse=True)  # frequency falls
    assert v["sign_changes"] == sorted(v["sign_changes"], reverse=True)
    assert v["binary"] == ["000", "001", "010", "011", "100", "101", "110", "111"]


def test_architectures_path_length_and_sequential_ops():
    v = result("architectures").values
    assert v["path_length"]["self-attention"] == 1
    assert v["path_length"]["rnn"] == v["path_n"]
    n = v["path_n"]
    assert v["path_length"]["cnn"] == math.ceil((n - 1) / 1)  # k = 3 reaches 1 further a layer
    assert v["path_length"]["cnn_k5"] == math.ceil((n - 1) / 2)
    ops = v["sequential_ops"]
    assert ops[8]["self-attention"] == ops[32]["self-attention"]
    assert ops[8]["cnn"] == ops[32]["cnn"]
    assert ops[32]["rnn"] > 3 * ops[8]["rnn"] - 10  # grows with n
    assert v["theoretical_crossover_n"] == 64
    assert all(t > 0 for ts in v["times"].values() for t in ts)
    # the measured growth in n (self-attention's n² against the RNN's n) is the topic's
    # printed finding; a unit test does not assert timings (a busy machine reorders them)
    assert set(v["slopes"]) == set(v["times"]) and all(map(math.isfinite, v["slopes"].values()))


def test_norms_by_hand_and_residuals():
    v = result("norms").values
    # by hand: each row of X has mean m and variance 0.25 -> (x - m) / sqrt(0.25 + 1e-5)
    s = 0.5 / math.sqrt(0.25 + 1e-5)
    assert [x for row in v["layernorm"] for x in row] == pytest.approx([-s, s, -s, s], abs=1e-6)
    assert [x for row in v["batchnorm"] for x in row] == pytest.approx([-s, -s, s, s], abs=1e-6)
    assert v["layernorm_by_hand_error"] < 1e-6 and v["batchnorm_by_hand_error"] < 1e-6
    assert v["grad_plain"][-1] < 1e-6 < v["grad_residual"][-1]
    assert all(b < a for a, b in zip(v["grad_plain"], v["grad_plain"][1:]))


def test_gates_extremes():
    v = result("gates").values
    assert v["gru_reset1_vs_rnn"] < 1e-5
    assert v["gru_reset0_vs_mlp"] < 1e-5 and v["gru_reset0_state_effect"] < 1e-6
    assert v["gru_update1_copy"] < 1e-5
    assert v["lstm_keep_cell"] < 1e-5
    assert v["lstm_output0_max_h"] < 1e-6 and v["lstm_output0_max_c"] > 0.1


def test_bptt_gradients_and_truncation():
    v = result("bptt").values
    for rho, slope in v["log_slopes"].items():
        assert slope == pytest.approx(math.log(rho), abs=0.02)
    rel = v["relative_error"]
    assert rel["truncated k=1"] > rel["truncated k=5"] > rel["truncated k=10"]
    assert rel["randomized, mean of draws"] < 0.2 < rel["randomized, one draw (rms)"]
    for curve in v["perplexity"].values():
        assert curve[-1] < curve[0] < 30


def test_autoregressive_degrades_with_k():
    v = result("autoregressive").values
    mse = list(v["k_step_mse"].values())
    assert mse[0] < 0.1 and all(b > a for a, b in itertools.pairwise(mse))
    assert v["multistep_mse"] > mse[0] * 3


def test_seq2seq_attention_helps_and_transformer_maps():
    s = result("seq2seq").values
    for arch in ("seq2seq", "bahdanau"):
        assert s[arch]["seconds_per_epoch"] > 0 and 0 <= s[arch]["val_bleu"] <= 100
    # the same data and sizes: attention translates better, and each epoch costs more
    assert s["bahdanau"]["val_bleu"] > s["seq2seq"]["val_bleu"]
    assert s["bahdanau"]["seconds_per_epoch"] > s["seq2seq"]["seconds_per_epoch"]
    assert s["alignment_shape"][:2] == (1, 1)
    t = result("transformer").values
    assert t["encoder_self_shape"][:2] == (2, 4) and t["cross_shape"][:2] == (2, 4)
    assert t["decoder_causal_leak"] == 0.0
    assert t["encoder_features_shape"][0] == 1 and t["decoder_alone_tokens"] == 5


def test_topic_arguments_are_validated():
    with pytest.raises(ValueError, match="unknown topic 'nope'"):
        get_topic("nope")
    with pytest.raises(TypeError, match="small must be a bool"):
        run_topic("cues", small="yes")
    with pytest.raises(ValueError, match="seed must be >= 0"):
        run_topic("cues", seed=-1)
    with pytest.raises(TypeError, match="seed must be an int"):
        get_topic("gates")(seed=1.5)


def test_import_attnkit_does_not_import_the_tour():
    import subprocess
    import sys

    code = "import sys, attnkit; print('attnkit.tour' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
