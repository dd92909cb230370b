"""The attention chapter's arguments (d2l 0.17, chapters 8-10) as runnable experiments.

Each topic is a function ``topic(*, small=False, seed=0) -> TopicResult``: it prints
nothing, returns its finding, the measured values and its figures. ``TOPICS`` names
each topic's claims and the value that carries each (the tests assert them);
``run_topic`` looks one up by name; ``attnkit tour TOPIC`` is the command line. Findings,
claims and figure labels are in the language in force (``attnkit.i18n``; the registry
holds English, ``Topic.localized()`` gives the translation). Not imported by
``import attnkit`` (the topic modules load on first use).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import NamedTuple

from attnkit._validate import one_of
from attnkit.i18n import N_, _
from attnkit.tour.base import TopicResult, check_args

__all__ = ["TOPICS", "Topic", "TopicResult", "get_topic", "run_topic", "topic_names"]


class Topic(NamedTuple):
    """A topic: where its function lives, what it shows, and the claims its test asserts,
    each as (key in the result's ``values`` that carries it, the claim in words)."""

    module: str
    function: str
    description: str
    claims: tuple[tuple[str, str], ...]

    def localized(self) -> Topic:
        """This topic with its description and claims in the language in force (the
        registry holds them in English, marked for the catalog)."""
        claims = tuple((key, _(claim)) for key, claim in self.claims)
        return self._replace(description=_(self.description), claims=claims)


# name -> Topic; in the chapter's order. ``attnkit tour --list`` and the notebook print
# the claims; tests/tour checks that every key is in the values and asserted.
TOPICS: dict[str, Topic] = {
    "cues": Topic(
        "pooling",
        "cues",
        N_("attention cues: pooling without a query vs steered by a query"),
        (
            (
                "pooling_change",
                N_(
                    "average and max pooling give the same output whatever the query "
                    "(100 random query pairs: exactly 0 apart)"
                ),
            ),
            (
                "attention_change",
                N_(
                    "attention pooling follows the query: two queries, two inputs "
                    "weighted most, outputs far apart"
                ),
            ),
            ("attention_change_random", N_("over random query pairs attention outputs differ")),
        ),
    ),
    "kernels": Topic(
        "pooling",
        "kernels",
        N_("kernel regression: five kernels, widths, convergence, the learned width"),
        (
            ("mse", N_("the constant kernel predicts the mean of y at every width")),
            (
                "convergence_mse",
                N_("the estimator converges: test MSE falls as n grows (h ~ n^-1/5)"),
            ),
            ("roughness_learned", N_("the learned width is narrower and its fit rougher")),
            (
                "best_width_interior",
                N_(
                    "the best width is neither the narrowest nor the widest "
                    "(10 data seeds; both extremes >= 1.5x the best MSE)"
                ),
            ),
            (
                "closer_key",
                N_(
                    "a key closer to the query never gets less weight (random draws, "
                    "every kernel and the library's learned w)"
                ),
            ),
        ),
    ),
    "scoring": Topic(
        "scoring_and_scaling",
        "scoring",
        N_("scoring exercises: random keys, bilinear and vector-sum scores, cost"),
        (
            (
                "ones_keys_uniform_error",
                N_("with keys of ones both scores give uniform weights over the valid keys"),
            ),
            (
                "random_keys_max_diff",
                N_("random keys make additive and dot-product weights differ"),
            ),
            ("bilinear_vs_einsum", N_("the bilinear score q^T W k is two matrix products")),
            ("vector_sum_query_spread", N_("the vector-sum score w^T(q+k) ignores the query")),
            (
                "additive_over_dot",
                N_(
                    "dot-product attention is cheaper than additive (counted "
                    "operations and FLOPs, every size)"
                ),
            ),
        ),
    ),
    "scaling": Topic(
        "scoring_and_scaling",
        "scaling",
        N_("why 1/sqrt(d): q.k variance, softmax saturation, gradients"),
        (
            ("variance_over_d", N_("Var(q.k) = d")),
            (
                "jacobian_unscaled",
                N_(
                    "unscaled, the softmax saturates and its gradient vanishes as d "
                    "grows; scaled by 1/sqrt(d) it does not"
                ),
            ),
        ),
    ),
    "self-attention": Topic(
        "selfattn",
        "self_attention",
        N_("self-attention in matrix form equals the library's, one head and many"),
        (
            ("max_diff_one_head", N_("O = V softmax(K^T Q) equals the library's single head")),
            ("max_diff_multi_head", N_("h heads with W^o equal the library's MultiHeadAttention")),
        ),
    ),
    "multihead": Topic(
        "selfattn",
        "multihead",
        N_("heads attend to different things and ranges; additive heads; parameters"),
        (
            ("head_distance", N_("a trained Transformer's heads attend to different keys")),
            (
                "head_range_spread",
                N_(
                    "heads cover different ranges: layer-1 mean attended distance differs "
                    "across heads within each model (permutation test over sentences, p < "
                    "0.01), and more after training than at initialisation over 5 seeds (sign "
                    "test and t interval): both at the small size; at full size in 4 of 5 "
                    "models and 4 of 5 seeds, not significant"
                ),
            ),
            ("params", N_("h heads of width d/h cost the parameters of one head of width d")),
        ),
    ),
    "positions": Topic(
        "positions",
        "positions",
        N_("sinusoidal positions: rotations, uniqueness, binary analogy, similarity"),
        (
            ("rotation_error", N_("P_(i+δ) = M_δ P_i, M_δ depending on δ only")),
            ("unique_rows", N_("every position has its own encoding")),
            (
                "sign_changes",
                N_("lower columns alternate faster, as the low bits of a binary counter"),
            ),
            (
                "similarity_near_far",
                N_(
                    "nearby positions are more similar than distant ones (on "
                    "average; not monotonically, see similarity_falls_until)"
                ),
            ),
        ),
    ),
    "rope": Topic(
        "rope",
        "rope",
        N_("RoPE: the score depends on the offset only; its rotation is the sinusoidal map"),
        (
            (
                "offset_only_max_deviation",
                N_(
                    "rope(q, m)·rope(k, n) is one value per offset m - n, for every pair (m, n) "
                    "(float64 and the library's float32 module); adding the encoding instead is not"
                ),
            ),
            (
                "rope_equals_offset_matrix",
                N_(
                    "RoPE's rotation for offset δ is the sinusoidal map M_δ (P_(p+δ) = M_δ P_p), "
                    "up to the half-split layout's order of dimensions"
                ),
            ),
        ),
    ),
    "architectures": Topic(
        "architectures",
        "architectures",
        N_("CNN vs RNN vs self-attention: cost, sequential ops, path length"),
        (
            (
                "flop_exponents",
                N_("counted FLOPs grow as n for the CNN and RNN and n^2 for attention"),
            ),
            (
                "counted_crossover_n",
                N_("attention costs more than the RNN from n = d on (counted)"),
            ),
            (
                "sequential_ops",
                N_("sequential operations: O(1) for CNN and self-attention, O(n) RNN"),
            ),
            (
                "path_length",
                N_(
                    "maximum path length: 1 for self-attention, n for the RNN, "
                    "(n-1)/floor(k/2) for the CNN"
                ),
            ),
        ),
    ),
    "norms": Topic(
        "norms",
        "norms",
        N_("LayerNorm vs BatchNorm; position-wise FFN; residuals; LayerNorm and convergence"),
        (
            ("layernorm_by_hand_error", N_("LayerNorm and BatchNorm equal the hand computation")),
            (
                "ffn_position_wise",
                N_(
                    "the position-wise FFN is the same MLP at every position "
                    "(permuted input, permuted output, exactly)"
                ),
            ),
            ("grad_residual", N_("residual connections keep the first layer's gradient")),
            (
                "layernorm_convergence",
                N_(
                    "LayerNorm speeds convergence (each variant at its best learning rate; 5 or "
                    "more seeds: sign test and t interval)"
                ),
            ),
        ),
    ),
    "gates": Topic(
        "gates",
        "gates",
        N_("GRU and LSTM gates at their extremes; each GRU gate removed"),
        (
            ("gru_reset1_vs_rnn", N_("reset = 1 is a plain RNN, reset = 0 an MLP on X_t")),
            ("gru_update1_copy", N_("update = 1 copies the state")),
            (
                "lstm_keep_cell",
                N_("LSTM forget = 1, input = 0 keeps the cell; output = 0 hides it"),
            ),
            (
                "gate_ablation",
                N_(
                    "the update gate serves the long-range dependency: removed, the loss is "
                    "higher in every seed (5 or more seeds: sign test and t interval; it fails "
                    "in every seed at the small size, in 6 of 8 at full size); the reset gate "
                    "is not needed for the short-range task (every variant learns it)"
                ),
            ),
        ),
    ),
    "bptt": Topic(
        "recurrent",
        "bptt",
        N_("BPTT: gradient norms, truncation, sampling, gradient clipping"),
        (
            ("log_slopes", N_("||dh_t/dx_0|| vanishes or explodes as ρ^t")),
            (
                "relative_error",
                N_(
                    "truncation is biased, less so as k grows; randomized truncation "
                    "is unbiased on average, noisy per draw"
                ),
            ),
            (
                "sampling_random_minus_sequential",
                N_(
                    "sequential partitioning ends at a lower training perplexity than random "
                    "sampling (6 seeds: sign test and t interval)"
                ),
            ),
            (
                "clipping",
                N_(
                    "gradient clipping prevents divergence at large learning rates: at the "
                    "largest every seed diverges without it and none with it (6 or more seeds: "
                    "sign test)"
                ),
            ),
        ),
    ),
    "autoregressive": Topic(
        "recurrent",
        "autoregressive",
        N_("noisy sine, tau-lag model: one-step vs k-step-ahead predictions"),
        (
            ("k_step_mse", N_("k-step-ahead errors grow with k")),
            ("multistep_mse", N_("feeding predictions back degrades far more than one step ahead")),
        ),
    ),
    "seq2seq": Topic(
        "translation",
        "seq2seq",
        N_("seq2seq with and without Bahdanau attention"),
        (
            (
                "bahdanau_over_seq2seq_ops",
                N_("attention costs more per batch (counted operations)"),
            ),
            ("alignment", N_("the Bahdanau alignment is close to diagonal")),
            ("bahdanau", N_("with attention the same GRUs translate better (val BLEU, one seed)")),
        ),
    ),
    "transformer": Topic(
        "translation",
        "transformer",
        N_("the trained Transformer: maps, the encoder alone, the decoder alone"),
        (
            ("decoder_causal_leak", N_("the decoder puts no weight on future positions")),
            (
                "encoder_alone_features",
                N_("the encoder alone gives contextual word vectors that still name their word"),
            ),
            (
                "decoder_alone_perplexity",
                N_(
                    "the decoder alone is a language model: French order beats the same words shuffled"
                ),
            ),
        ),
    ),
    "extrapolation": Topic(
        "extrapolation",
        "extrapolation",
        N_("length extrapolation: tiny decoder-only LMs per position scheme at 1x, 2x, 4x context"),
        (
            (
                "ratio_4x",
                N_(
                    "ALiBi's held-out perplexity at 4x the training length stays within 1.15x of "
                    "its 1x in every seed; RoPE's grows more (5 seeds: sign test and t interval)"
                ),
            ),
            (
                "learned_beyond_context",
                N_(
                    "learned positions cannot go past their table: the model refuses inputs "
                    "longer than 1x"
                ),
            ),
            (
                "mean_perplexity",
                N_(
                    "rope, alibi, learned and none learn the text at 1x (well below character "
                    "frequencies); sinusoidal against ALiBi is reported, asserted only where "
                    "sinusoidal has learned"
                ),
            ),
        ),
    ),
    "coreference": Topic(
        "coreference",
        "coreference",
        N_(
            "coreference: does the pronoun attend to its antecedent, and does the translator "
            "need that head?"
        ),
        (
            (
                "contrast_accuracy",
                N_(
                    "held-out contrastive accuracy is above every meaning-blind baseline (always "
                    "masculine, first noun, nearest noun) and its 95% Wilson interval excludes 50%"
                ),
            ),
            (
                "head_accuracy",
                N_(
                    "a head chosen on training sentences attends more to the antecedent than to "
                    "the other noun far more often than the reverse on held-out sentences "
                    "(Wilson intervals apart, 30 points or more)"
                ),
            ),
            (
                "ablation",
                N_(
                    "zeroing that head costs more score margin than zeroing the median head "
                    "(paired sign test over rows, p < 0.01)"
                ),
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
