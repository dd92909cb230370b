"""Exercises 8.4.1 and 8.5.1 of d2l 0.17 (1.0's 9.4.1, 9.5.3): the output size of a
character RNN, and one-hot inputs as an embedding lookup."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnkit.exercises.rnn.lm import char_data, make_lm
from attnkit.tour.base import TopicResult, topic

__all__ = ["onehot_is_lookup"]


@topic
def onehot_is_lookup(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.4.1: the RNN language model's output per position has one logit per vocabulary
    entry. 8.5.1: one_hot(x) @ W equals the row W[x], in value and in gradient, float64
    (the tokens drawn from the first half of the vocabulary, so that the other rows show
    what the gradient does to tokens that do not occur); and the model's recurrent layer
    run on one-hot inputs equals the same recurrence fed with rows looked up in Wᵀ_ih."""
    name, train, _, vocab = char_data(small, 30000)
    V = len(vocab)
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(V, 16, generator=g, dtype=torch.float64, requires_grad=True)  # (V, E)
    x = torch.randint(0, V // 2, (500,), generator=g)  # the other half never occurs
    upstream = torch.randn(500, 16, generator=g, dtype=torch.float64)
    via_onehot = F.one_hot(x, V).double() @ W  # (500, E)
    via_lookup = W[x]  # the same rows, picked
    (g1,) = torch.autograd.grad((via_onehot * upstream).sum(), W)
    (g2,) = torch.autograd.grad((via_lookup * upstream).sum(), W)
    # the gradient reaches only the rows of tokens that occur: W's other rows get 0
    unused = sorted(set(range(V)) - set(x.tolist()))
    model = make_lm(V, 32, seed=seed).double()
    X = train[:70].reshape(2, 35)  # (B, T)
    with torch.no_grad():
        logits, _ = model(X)  # (T*B, V)
    rnn = model.rnn
    with torch.no_grad():
        states, _ = rnn(F.one_hot(X.T, V).double())  # (T, B, H): what the model computes
        h, looked_up = torch.zeros(X.shape[0], rnn.hidden_size, dtype=torch.float64), []
        for x_t in X.T:  # the same recurrence, its input product replaced by a row lookup
            h = torch.tanh(rnn.weight_ih_l0.T[x_t] + rnn.bias_ih_l0 + h @ rnn.weight_hh_l0.T
                           + rnn.bias_hh_l0)  # fmt: skip
            looked_up.append(h)
    values = {
        "data": name, "vocab_size": V, "output_shape": list(logits.shape),
        "output_dim": logits.shape[-1],
        "prob_sum_error": float((torch.softmax(logits, -1).sum(-1) - 1).abs().max()),
        "value_max_difference": float((via_onehot - via_lookup).detach().abs().max()),
        "grad_max_difference": float((g1 - g2).abs().max()),
        "unused_rows_grad": float(g1[unused].abs().max()),
        "used_rows_grad_min": float(g1[sorted(set(x.tolist()))].abs().amax(-1).min()),
        "n_unused": len(unused),
        "model_max_difference": float((states - torch.stack(looked_up)).abs().max()),
        "model_state_max": float(states.abs().max()),
    }  # fmt: skip
    finding = (
        f"{name}: vocabulary {V} characters, logits {tuple(logits.shape)} = (time steps x "
        f"batch, V): one score per character. one_hot(x) @ W vs W[x]: largest difference "
        f"{values['value_max_difference']:.1e} in value, {values['grad_max_difference']:.1e} "
        f"in gradient; the model's input layer on one-hot vectors vs a lookup: "
        f"{values['model_max_difference']:.1e}."
    )
    return TopicResult("rnn_onehot_onehot_is_lookup", finding, values, {})
