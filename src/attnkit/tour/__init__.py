"""The attention chapter's arguments (d2l 0.17, chapters 8-10) as runnable experiments.

Each topic is a function ``topic(*, small=False, seed=0) -> TopicResult``: it prints
nothing, returns its finding, the measured values and its figures. ``TOPICS`` names
each topic's claims and the value that carries each (the tests assert them);
``run_topic`` looks one up by name; ``attnkit tour TOPIC`` is the command line. Not imported by
``import attnkit`` (the topic modules load on first use).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import NamedTuple

from attnkit._validate import one_of
from attnkit.tour.base import TopicResult, check_args

__all__ = ["TOPICS", "Topic", "TopicResult", "get_topic", "run_topic", "topic_names"]


class Topic(NamedTuple):
    """A topic: where its function lives, what it shows, and the claims its test asserts,
    each as (key in the result's ``values`` that carries it, the claim in words)."""

    module: str
    function: str
    description: str
    claims: tuple[tuple[str, str], ...]


# name -> Topic; in the chapter's order. ``attnkit tour --list`` and the notebook print
# the claims; tests/tour checks that every key is in the values and asserted.
TOPICS: dict[str, Topic] = {
    "cues": Topic(
        "pooling",
        "cues",
        "attention cues: pooling without a query vs steered by a query",
        (
            (
                "pooling_change",
                "average and max pooling give the same output whatever the query "
                "(100 random query pairs: exactly 0 apart)",
            ),
            (
                "attention_change",
                "attention pooling follows the query: two queries, two inputs "
                "weighted most, outputs far apart",
            ),
            ("attention_change_random", "over random query pairs attention outputs differ"),
        ),
    ),
    "kernels": Topic(
        "pooling",
        "kernels",
        "kernel regression: five kernels, widths, convergence, the learned width",
        (
            ("mse", "the constant kernel predicts the mean of y at every width"),
            ("convergence_mse", "the estimator converges: test MSE falls as n grows (h ~ n^-1/5)"),
            ("roughness_learned", "the learned width is narrower and its fit rougher"),
            (
                "best_width_interior",
                "the best width is neither the narrowest nor the widest "
                "(10 data seeds; both extremes >= 1.5x the best MSE)",
            ),
            (
                "closer_key",
                "a key closer to the query never gets less weight (random draws, "
                "every kernel and the library's learned w)",
            ),
        ),
    ),
    "scoring": Topic(
        "scoring_and_scaling",
        "scoring",
        "scoring exercises: random keys, bilinear and vector-sum scores, cost",
        (
            (
                "ones_keys_uniform_error",
                "with keys of ones both scores give uniform weights over the valid keys",
            ),
            ("random_keys_max_diff", "random keys make additive and dot-product weights differ"),
            ("bilinear_vs_einsum", "the bilinear score q^T W k is two matrix products"),
            ("vector_sum_query_spread", "the vector-sum score w^T(q+k) ignores the query"),
            (
                "additive_over_dot",
                "dot-product attention is cheaper than additive (counted "
                "operations and FLOPs, every size)",
            ),
        ),
    ),
    "scaling": Topic(
        "scoring_and_scaling",
        "scaling",
        "why 1/sqrt(d): q.k variance, softmax saturation, gradients",
        (
            ("variance_over_d", "Var(q.k) = d"),
            (
                "jacobian_unscaled",
                "unscaled, the softmax saturates and its gradient vanishes as d "
                "grows; scaled by 1/sqrt(d) it does not",
            ),
        ),
    ),
    "self-attention": Topic(
        "selfattn",
        "self_attention",
        "self-attention in matrix form equals the library's, one head and many",
        (
            ("max_diff_one_head", "O = V softmax(K^T Q) equals the library's single head"),
            ("max_diff_multi_head", "h heads with W^o equal the library's MultiHeadAttention"),
        ),
    ),
    "multihead": Topic(
        "selfattn",
        "multihead",
        "heads attend to different things and ranges; additive heads; parameters",
        (
            ("head_distance", "a trained Transformer's heads attend to different keys"),
            (
                "head_range_spread",
                "heads cover different ranges: layer-1 mean attended distance "
                "differs across heads (3 seeds, permutation test)",
            ),
            ("params", "h heads of width d/h cost the parameters of one head of width d"),
        ),
    ),
    "positions": Topic(
        "positions",
        "positions",
        "sinusoidal positions: rotations, uniqueness, binary analogy, similarity",
        (
            ("rotation_error", "P_(i+δ) = M_δ P_i, M_δ depending on δ only"),
            ("unique_rows", "every position has its own encoding"),
            ("sign_changes", "lower columns alternate faster, as the low bits of a binary counter"),
            (
                "similarity_near_far",
                "nearby positions are more similar than distant ones (on "
                "average; not monotonically, see similarity_falls_until)",
            ),
        ),
    ),
    "rope": Topic(
        "rope",
        "rope",
        "RoPE: the score depends on the offset only; its rotation is the sinusoidal map",
        (
            (
                "offset_only_max_deviation",
                "rope(q, m)·rope(k, n) is one value per offset m - n, for every pair (m, n) "
                "(float64 and the library's float32 module); adding the encoding instead is not",
            ),
            (
                "rope_equals_offset_matrix",
                "RoPE's rotation for offset δ is the sinusoidal map M_δ (P_(p+δ) = M_δ P_p), "
                "up to the half-split layout's order of dimensions",
            ),
        ),
    ),
    "architectures": Topic(
        "architectures",
        "architectures",
        "CNN vs RNN vs self-attention: cost, sequential ops, path length",
        (
            ("flop_exponents", "counted FLOPs grow as n for the CNN and RNN and n^2 for attention"),
            ("counted_crossover_n", "attention costs more than the RNN from n = d on (counted)"),
            ("sequential_ops", "sequential operations: O(1) for CNN and self-attention, O(n) RNN"),
            (
                "path_length",
                "maximum path length: 1 for self-attention, n for the RNN, "
                "(n-1)/floor(k/2) for the CNN",
            ),
        ),
    ),
    "norms": Topic(
        "norms",
        "norms",
        "LayerNorm vs BatchNorm; position-wise FFN; residuals; LayerNorm and convergence",
        (
            ("layernorm_by_hand_error", "LayerNorm and BatchNorm equal the hand computation"),
            (
                "ffn_position_wise",
                "the position-wise FFN is the same MLP at every position "
                "(permuted input, permuted output, exactly)",
            ),
            ("grad_residual", "residual connections keep the first layer's gradient"),
            (
                "layernorm_convergence",
                "LayerNorm speeds convergence (seeds, each variant at its best learning rate)",
            ),
        ),
    ),
    "gates": Topic(
        "gates",
        "gates",
        "GRU and LSTM gates at their extremes; each GRU gate removed",
        (
            ("gru_reset1_vs_rnn", "reset = 1 is a plain RNN, reset = 0 an MLP on X_t"),
            ("gru_update1_copy", "update = 1 copies the state"),
            ("lstm_keep_cell", "LSTM forget = 1, input = 0 keeps the cell; output = 0 hides it"),
            (
                "gate_ablation",
                "the update gate serves the long-range dependency (removed: fails); "
                "the reset gate is not needed for the short-range task at this size",
            ),
        ),
    ),
    "bptt": Topic(
        "recurrent",
        "bptt",
        "BPTT: gradient norms, truncation, sampling, gradient clipping",
        (
            ("log_slopes", "||dh_t/dx_0|| vanishes or explodes as ρ^t"),
            (
                "relative_error",
                "truncation is biased, less so as k grows; randomized truncation "
                "is unbiased on average, noisy per draw",
            ),
            (
                "sampling_random_minus_sequential",
                "sequential partitioning ends at a lower "
                "training perplexity than random sampling (seeds)",
            ),
            ("clipping", "gradient clipping prevents divergence at large learning rates (seeds)"),
        ),
    ),
    "autoregressive": Topic(
        "recurrent",
        "autoregressive",
        "noisy sine, tau-lag model: one-step vs k-step-ahead predictions",
        (
            ("k_step_mse", "k-step-ahead errors grow with k"),
            ("multistep_mse", "feeding predictions back degrades far more than one step ahead"),
        ),
    ),
    "seq2seq": Topic(
        "translation",
        "seq2seq",
        "seq2seq with and without Bahdanau attention",
        (
            ("bahdanau_over_seq2seq_ops", "attention costs more per batch (counted operations)"),
            ("alignment", "the Bahdanau alignment is close to diagonal"),
            ("bahdanau", "with attention the same GRUs translate better (val BLEU, one seed)"),
        ),
    ),
    "transformer": Topic(
        "translation",
        "transformer",
        "the trained Transformer: maps, the encoder alone, the decoder alone",
        (
            ("decoder_causal_leak", "the decoder puts no weight on future positions"),
            (
                "encoder_alone_features",
                "the encoder alone gives contextual word vectors that still name their word",
            ),
            (
                "decoder_alone_perplexity",
                "the decoder alone is a language model: French order beats the same words shuffled",
            ),
        ),
    ),
    "extrapolation": Topic(
        "extrapolation",
        "extrapolation",
        "length extrapolation: tiny decoder-only LMs per position scheme at 1x, 2x, 4x context",
        (
            (
                "ratio_4x",
                "ALiBi's held-out perplexity at 4x the training length stays within 1.15x of "
                "its 1x in every seed; RoPE's grows more in every seed",
            ),
            (
                "learned_beyond_context",
                "learned positions cannot go past their table: not applicable beyond 1x",
            ),
            (
                "mean_perplexity",
                "rope, alibi, learned and none learn the text at 1x (well below character "
                "frequencies); sinusoidal against ALiBi is reported, asserted only where "
                "sinusoidal has learned",
            ),
        ),
    ),
}


def topic_names() -> list[str]:
    return list(TOPICS)


def get_topic(name: str) -> Callable[..., TopicResult]:
    """The topic function called ``name`` (ValueError naming the topics otherwise)."""
    if not isinstance(name, str):
        raise TypeError(f"topic name must be a str, got {type(name).__name__}")
    entry = TOPICS[one_of("topic", name, TOPICS)]
    module, function = entry.module, entry.function
    return getattr(importlib.import_module(f"attnkit.tour.{module}"), function)


def run_topic(name: str, *, small: bool = False, seed: int = 0) -> TopicResult:
    """Run topic ``name``; its ``seconds`` is the wall-clock time taken."""
    check_args(small, seed)
    return get_topic(name)(small=small, seed=seed)
