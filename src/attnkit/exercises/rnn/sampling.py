"""Exercise 8.5.3 of d2l 0.17 (1.0's 9.5.8): generating from the character RNN by
sampling instead of the argmax, and sharpening the distribution, q ∝ P^α with α > 1."""

from __future__ import annotations

import math

import torch

from attnkit.exercises.rnn.lm import evaluate_perplexity, reference_model, reference_size
from attnkit.inference.sampling import next_token_probs
from attnkit.tour.base import TopicResult, topic

__all__ = ["sampling_vs_greedy"]


def _smallest_period(text: str, max_period: int = 60) -> int:
    """The smallest p <= max_period (and <= a third of the text, so that the pattern
    repeats at least three times) with text[i] == text[i + p] for all i (0: none)."""
    for p in range(1, min(max_period, len(text) // 3) + 1):
        if all(text[i] == text[i + p] for i in range(len(text) - p)):
            return p
    return 0


@torch.no_grad()
def _generate(model, prefixes, length: int, alpha: float, generator) -> tuple[list[str], float]:
    """Continue each prefix (B equal-length index rows) ``length`` characters, drawing from
    q ∝ P^α (softmax of α · logits; α = inf: the argmax). Returns the continuations' index
    lists and the model's own perplexity of them (exp of the mean -log P)."""
    X = torch.tensor(prefixes)  # (B, prefix length)
    logits, state = model(X[:, :-1])
    last = X[:, -1:]  # (B, 1)
    out, nll = [], 0.0
    for _ in range(length):
        logits, state = model(last, state)  # (B, V)
        logp = torch.log_softmax(logits, -1)
        if math.isinf(alpha):
            nxt = logits.argmax(-1)
        else:
            probs = next_token_probs(logits, temperature=1.0 / alpha)  # softmax(α logits)
            nxt = torch.multinomial(probs, 1, generator=generator)[:, 0]
        nll -= float(logp.gather(1, nxt[:, None]).sum())
        out.append(nxt)
        last = nxt[:, None]
    rows = torch.stack(out, 1).tolist()  # (B, length)
    return rows, math.exp(nll / (len(rows) * length))


@topic
def sampling_vs_greedy(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The shared reference model (``rnn_lm.reference_model``) continues 16 held-out
    prefixes of 10 characters, greedily and by sampling from P^α for α = 1, 2, 4: the
    share of distinct 4-grams in each continuation, whether greedy text falls into a
    loop, and the model's own perplexity of what it generated."""
    name, model, vocab, _, held = reference_model(small, seed)
    length, B, P = (120 if small else 300), 16, 10
    starts = torch.linspace(0, len(held) - P - 1, B).long().tolist()
    prefixes = [held[s : s + P].tolist() for s in starts]
    g = torch.Generator().manual_seed(seed)
    distinct, model_ppl, texts, periods = {}, {}, {}, {}
    for label, alpha in (("greedy", math.inf), ("alpha4", 4.0), ("alpha2", 2.0), ("alpha1", 1.0)):
        rows, ppl = _generate(model, prefixes, length, alpha, g)
        strings = ["".join(vocab.to_tokens(r)) for r in rows]
        grams = [len({s[i : i + 4] for i in range(len(s) - 3)}) / (len(s) - 3) for s in strings]
        distinct[label] = sum(grams) / len(grams)
        model_ppl[label] = ppl
        periods[label] = sum(_smallest_period(s[length // 2 :]) > 0 for s in strings)
        texts[label] = "".join(vocab.to_tokens(prefixes[0])) + "|" + strings[0][:80]
    values = {
        "data": name, "length": length, "prefixes": B, "steps": reference_size(small)["steps"],
        "distinct_4grams": distinct, "model_perplexity": model_ppl, "looping": periods,
        "samples": texts, "held_out_perplexity": evaluate_perplexity(model, held),
    }  # fmt: skip
    finding = (
        f"{B} prefixes from {name}, {length} characters each: distinct 4-grams "
        + ", ".join(f"{k} {v:.2f}" for k, v in distinct.items())
        + "; the model's perplexity of its own text "
        + ", ".join(f"{k} {v:.2f}" for k, v in model_ppl.items())
        + "; continuations periodic in their second half "
        + ", ".join(f"{k} {v}/{B}" for k, v in periods.items())
        + ". Greedy: "
        + repr(texts["greedy"])
        + "; α = 1: "
        + repr(texts["alpha1"])
    )
    return TopicResult("rnn_sampling_sampling_vs_greedy", finding, values, {})
