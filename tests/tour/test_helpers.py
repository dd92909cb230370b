"""The tour's reusable helpers: their results and their argument errors."""

from __future__ import annotations

import math

import pytest
import torch

from attnkit.tour.architectures import graph_depth, path_length
from attnkit.tour.base import TopicResult, timed
from attnkit.tour.pooling import kernel_weights, nw_predict
from attnkit.tour.positions import offset_matrix
from attnkit.tour.recurrent import randomized_grad
from attnkit.tour.scoring_and_scaling import softmax_jacobian_norm, vector_sum_weights
from attnkit.tour.selfattn import AdditiveMultiHead, head_entropy, matrix_form


def test_kernels_and_estimator():
    x = torch.tensor([0.0, 1.0, 2.0])
    w = kernel_weights("boxcar", torch.tensor([0.0, 10.0]), x, 1.0)
    assert w[0].tolist() == pytest.approx([0.5, 0.5, 0.0]) and w[1].sum() == 0  # empty window
    assert torch.allclose(kernel_weights("constant", x, x, 0.1), torch.full((3, 3), 1 / 3))
    assert nw_predict("gaussian", x, x, torch.ones(3), 0.5).tolist() == pytest.approx([1.0] * 3)
    with pytest.raises(ValueError, match="kernel must be one of"):
        kernel_weights("cosine", x, x, 1.0)
    with pytest.raises(ValueError, match=r"width must be a positive finite number, got 0\.0"):
        kernel_weights("gaussian", x, x, 0.0)
    with pytest.raises(TypeError, match=r"width must be a positive finite number, got '1' \(str\)"):
        kernel_weights("gaussian", x, x, "1")
    with pytest.raises(TypeError, match="queries must be a floating-point tensor"):
        kernel_weights("gaussian", [0.0], x, 1.0)
    with pytest.raises(ValueError, match="same shape"):
        nw_predict("gaussian", x, x, torch.ones(2), 1.0)


def test_scoring_helpers():
    w = torch.randn(3)
    q, k = torch.randn(1, 4, 3), torch.randn(1, 5, 3)
    vs = vector_sum_weights(w, q, k)
    assert torch.allclose(vs, vs[:, :1].expand_as(vs), atol=1e-6)
    assert softmax_jacobian_norm(torch.zeros(2)).item() == pytest.approx(math.sqrt(2 * 0.25**2 * 2))
    with pytest.raises(ValueError, match="share the width"):
        vector_sum_weights(torch.randn(2), q, k)
    with pytest.raises(TypeError, match="scores must be a floating-point tensor"):
        softmax_jacobian_norm(torch.zeros(2, dtype=torch.long))


def test_matrix_form_and_heads():
    inputs = torch.randn(4, 3)
    eye = torch.eye(4)
    steps = matrix_form(inputs, eye, eye, eye)
    assert torch.allclose(steps["A'"].sum(0), torch.ones(3))  # columns are distributions
    assert torch.allclose(steps["O"], inputs @ steps["A'"])
    with pytest.raises(ValueError, match="columns"):
        matrix_form(inputs, torch.eye(3), eye, eye)
    ent = head_entropy(torch.full((2, 3, 4), 0.25))
    assert ent.tolist() == pytest.approx([math.log(4)] * 2, abs=1e-5)
    with pytest.raises(ValueError, match=r"\(\.\.\., H, Q, K\)"):
        head_entropy(torch.rand(3, 4))
    heads = AdditiveMultiHead(8, 2)
    X = torch.randn(2, 5, 8)
    assert heads(X, X, X).shape == (2, 5, 8) and heads.attention_weights.shape == (2, 2, 5, 5)
    with pytest.raises(ValueError, match="divisible"):
        AdditiveMultiHead(8, 3)


def test_offset_matrix_is_a_rotation():
    M = offset_matrix(3, 8)
    assert torch.allclose(M @ M.T, torch.eye(8, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(offset_matrix(2, 8) @ offset_matrix(1, 8), M, atol=1e-12)  # δ adds
    with pytest.raises(ValueError, match="even"):
        offset_matrix(1, 7)
    with pytest.raises(TypeError, match=r"delta must be an int, got 1\.5 \(float\)"):
        offset_matrix(1.5, 8)
    with pytest.raises(ValueError, match="num_hiddens must be an int >= 2, got 0"):
        offset_matrix(1, 0)
    with pytest.raises(TypeError, match=r"num_hiddens must be an int >= 2, got 8\.0 \(float\)"):
        offset_matrix(1, 8.0)


def test_path_length_and_graph_depth():
    assert path_length("self-attention", 4) == 1
    assert path_length("rnn", 4) == 4
    assert path_length("cnn", 5, k=3) == 4
    with pytest.raises(ValueError, match="kind must be one of 'cnn', 'rnn', 'self-attention'"):
        path_length("lstm", 4)
    with pytest.raises(ValueError, match="n must be an int >= 2, got 1"):
        path_length("rnn", 1)
    with pytest.raises(TypeError, match=r"d must be a positive int, got True \(bool\)"):
        path_length("rnn", 4, d=True)
    with pytest.raises(ValueError, match="k must be odd"):
        path_length("cnn", 4, k=4)
    x = torch.ones(2, requires_grad=True)
    assert graph_depth(x.exp().exp().sum()) == 4  # exp, exp, sum, and the leaf's accumulator
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        graph_depth([1.0])


def test_randomized_truncation_helpers():
    W, X = torch.eye(3) * 0.5, torch.randn(6, 3)
    full = randomized_grad(W, X)
    assert torch.allclose(randomized_grad(W, X, keep=torch.ones(6, dtype=torch.bool)), full)
    assert torch.allclose(randomized_grad(W, X, truncate=6), full)
    with pytest.raises(ValueError, match=r"pi must be a probability in \(0, 1\], got 0\.0"):
        randomized_grad(W, X, pi=0.0)
    with pytest.raises(TypeError, match=r"pi must be a probability in \(0, 1\], got None"):
        randomized_grad(W, X, pi=None)
    with pytest.raises(ValueError, match=r"truncate must be an int in \[1, 6\], got 7"):
        randomized_grad(W, X, truncate=7)
    with pytest.raises(TypeError, match=r"truncate must be an int in \[1, 6\], got 2\.0"):
        randomized_grad(W, X, truncate=2.0)
    with pytest.raises(ValueError, match=r"W must be \(d, d\)"):
        randomized_grad(torch.ones(3, 2), X)


def test_timed_and_result_save(tmp_path):
    assert timed(lambda: None, repeat=2) >= 0
    with pytest.raises(ValueError, match="repeat must be a positive int, got 0"):
        timed(lambda: None, repeat=0)
    r = TopicResult("demo", "a finding", {}, {})
    assert r.save(tmp_path) == []


def test_count_ops_counts_products_and_elements():
    from attnkit.tour.cost import count_ops

    a, b = torch.randn(2, 3), torch.randn(3, 4)
    c = count_ops(lambda: a @ b)
    assert c.flops == 2 * 2 * 3 * 4 and c.elementwise == 0 and c.calls >= 1
    c = count_ops(lambda: torch.tanh(a + 1))
    assert c.flops == 0 and c.elementwise == 2 * 6 and c.total == 12
    assert count_ops(lambda: a.t()[0].reshape(2)).elementwise == 0  # views write nothing
    q = torch.randn(1, 2, 5, 8)  # the CPU's fused attention: its two products
    sdpa = count_ops(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    assert sdpa.flops == 2 * (2 * 2 * 5 * 5 * 8)
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        count_ops(3)


def test_seed_summary_and_its_words():
    from attnkit.tour.base import describe_seeds, seed_summary

    s = seed_summary([1.0, 2.0, 3.0])
    assert (s["n"], s["agree"], s["mean"], s["sd"], s["min"]) == (3, 3, 2.0, 1.0, 1.0)
    # t(0.975, 2) = 4.302653 (tables): mean ± 4.302653 · 1/√3
    assert s["low"] == pytest.approx(2 - 4.302653 / math.sqrt(3), abs=1e-6)
    assert s["high"] == pytest.approx(2 + 4.302653 / math.sqrt(3), abs=1e-6)
    # predictive: P(T_2 <= -2 / √(4/3)) = 0.5 - t / (2 √(t² + 2)) at t = √3
    assert s["p_new_against"] == pytest.approx(0.5 - math.sqrt(3) / (2 * math.sqrt(5)), abs=1e-12)
    assert s["p_no_effect"] == 1 / 8  # three seeds can never say more than 1/8
    assert seed_summary([-1.0, 1.0])["agree"] == 1
    assert seed_summary([-1.0, 1.0])["p_no_effect"] == 0.75
    assert seed_summary([0.0, 1.0, 1.0])["agree"] == 2  # a tie counts against the claim
    assert describe_seeds(s).startswith("3/3 seeds (difference mean 2")
    assert "sign test p = 0.12" in describe_seeds(s) and "-0.484 to 4.48" in describe_seeds(s)
    assert describe_seeds(seed_summary([0.5])) == "1/1 seeds (difference 0.5; one seed: no test)"
    same = describe_seeds(seed_summary([1.0] * 5))
    assert same == "5/5 seeds (every difference 1, no spread; sign test p = 0.031)"
    for bad in ([], [1.0, math.nan], ["1"], [True]):
        with pytest.raises(ValueError, match="diffs must be a non-empty list of finite numbers"):
            seed_summary(bad)


def test_t_distribution_and_sign_test_match_tables():
    from attnkit.tour.stats import seeds_for, sign_test, supports, t_cdf, t_quantile

    # Student t, from printed tables (two-sided 95%: 12.706, 4.303, 3.182, 2.571, 2.228, 2.042)
    for dof, q in ((1, 12.706205), (2, 4.302653), (3, 3.182446), (5, 2.570582), (10, 2.228139),
                   (30, 2.042272)):  # fmt: skip
        assert t_quantile(0.975, dof) == pytest.approx(q, abs=1e-5)
        assert t_cdf(q, dof) == pytest.approx(0.975, abs=1e-6)
        assert t_cdf(-q, dof) == pytest.approx(0.025, abs=1e-6)
    assert t_cdf(1.0, 1) == pytest.approx(0.75) and t_cdf(0.0, 7) == 0.5
    assert t_cdf(2.0, 3) == pytest.approx(0.930337, abs=1e-6)
    # many degrees of freedom: the normal's 1.959964
    assert t_quantile(0.975, 2000) == pytest.approx(1.96, abs=2e-3)
    assert sign_test(8, 8) == 1 / 256 and sign_test(7, 8) == 9 / 256 and sign_test(0, 4) == 1
    assert seeds_for(0.05) == 5 and seeds_for(0.01) == 7
    from attnkit.tour.stats import seed_summary

    assert not supports(seed_summary([1.0, 1.1, 1.2]))  # 3 seeds: sign test 0.125
    assert supports(seed_summary([1.0, 1.1, 1.2, 0.9, 1.05]))
    assert not supports(seed_summary([1.0, 1.1, 1.2, 0.9, -1.05]))
    with pytest.raises(ValueError, match="dof must be an int >= 1"):
        t_cdf(1.0, 0)


def test_pool_and_closer_key_order():
    from attnkit.tour.pooling import closer_key_order, pool

    X, q = torch.randn(5, 3), torch.randn(3)
    assert torch.allclose(pool("average", X, q), X.mean(0))
    assert torch.equal(pool("max", X, q), X.max(0).values)
    assert not torch.allclose(pool("attention", X, q), pool("attention", X, -q))
    with pytest.raises(ValueError, match="kind must be one of 'average', 'max', 'attention'"):
        pool("min", X, q)
    keys = torch.tensor([0.0, 1.0, 3.0])
    w = torch.tensor([[0.6, 0.3, 0.1], [0.6, 0.3, 0.1]])  # query 0 right, query 3 wrong way
    assert closer_key_order(w, torch.tensor([0.0, 3.0]), keys) == (6, 3, 3)


def test_range_spread_and_batched_experiments_check_their_arguments():
    from attnkit.tour.gates import gate_ablation
    from attnkit.tour.norms import layernorm_convergence
    from attnkit.tour.recurrent import clipping_divergence
    from attnkit.tour.selfattn import range_spread

    same = torch.ones(6, 2, 4)  # (sentences, layers, heads): every head alike
    assert range_spread(same) == (0.0, 1.0)
    apart = torch.arange(4.0).expand(6, 2, 4)
    spread, p = range_spread(apart, perms=200)
    assert spread == 3.0 and p < 0.05
    for fn in (gate_ablation, layernorm_convergence, clipping_divergence):
        with pytest.raises(ValueError, match="seeds must be a positive int, got 0"):
            fn(seeds=0, steps=1)
        with pytest.raises(TypeError, match="steps must be a positive int"):
            fn(seeds=1, steps=1.5)


def test_fit_window_net_trains_and_rejects_bad_sizes():
    import torch
    from torch import nn

    from attnkit.tour.recurrent import fit_window_net

    g = torch.Generator().manual_seed(0)
    features = torch.randn(64, 2, generator=g)
    labels = features.sum(1, keepdim=True)  # a linear target the net can fit
    torch.manual_seed(0)
    net = nn.Linear(2, 1)
    with torch.no_grad():
        before = float(nn.functional.mse_loss(net(features), labels))
    fit_window_net(net, features, labels, 48, 30, g)
    with torch.no_grad():
        assert float(nn.functional.mse_loss(net(features), labels)) < before / 10
    with pytest.raises(ValueError, match=r"n_train must be in \[1, 64\].*got 65"):
        fit_window_net(net, features, labels, 65, 1, g)
    with pytest.raises(ValueError, match="epochs"):
        fit_window_net(net, features, labels, 8, 0, g)
    with pytest.raises(ValueError, match="features must have 2 dims"):
        fit_window_net(net, features[:, 0], labels, 8, 1, g)


def test_stats_refuse_bad_input_naming_the_argument():
    from attnkit.tour.stats import seeds_for, sign_test, supports

    with pytest.raises(ValueError, match=r"agree must be an int in \[0, 3\], got 4"):
        sign_test(4, 3)
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        sign_test(0, 0)
    with pytest.raises(ValueError, match=r"alpha must be a finite number > 0 and < 1, got 1\.5"):
        seeds_for(1.5)
    with pytest.raises(TypeError, match="s must be a seed_summary dict, got list"):
        supports([1.0, 2.0])
