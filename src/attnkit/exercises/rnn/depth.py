"""Exercise 8.6.2 of d2l 0.17 (dropped in 1.0): more hidden layers in the concise RNN
language model; does it still train, and what makes it work."""

from __future__ import annotations

from attnkit.exercises.rnn.lm import char_data, evaluate_perplexity, make_lm, train_char_lm
from attnkit.tour.base import TopicResult, topic

__all__ = ["deeper_rnn"]


@topic
def deeper_rnn(*, small: bool = False, seed: int = 0) -> TopicResult:
    """``nn.RNN`` (tanh, 64 hidden units per layer) with 1 and 3 layers, the same
    number of steps, trained the book's way (SGD lr 1, clipping θ = 1) and with Adam
    (lr 0.005, clipping θ = 1): held-out perplexity, the largest gradient norm and the
    steps where clipping acted (norm > θ); and each 3-layer run again without clipping
    (same initialisation and batches), to see what the clipping did."""
    steps = 50 if small else 120
    name, train, held, vocab = char_data(small, 30000 if small else 200000)
    ppl: dict[str, dict[str, float]] = {"sgd": {}, "adam": {}}
    max_norm: dict[str, dict[str, float]] = {"sgd": {}, "adam": {}}
    clipped: dict[str, dict[str, int]] = {"sgd": {}, "adam": {}}
    unclipped: dict[str, float] = {}
    for opt, lr in (("sgd", 1.0), ("adam", 0.005)):
        for layers, clip in ((1, 1.0), (3, 1.0), (3, None)):
            model = make_lm(len(vocab), 64, seed=seed, num_layers=layers)
            run = train_char_lm(model, train, steps=steps, lr=lr, optimizer=opt, seed=seed,
                                clip=clip)  # fmt: skip
            model.eval()
            if clip is None:
                unclipped[opt] = evaluate_perplexity(model, held)
                continue
            ppl[opt][f"layers{layers}"] = evaluate_perplexity(model, held)
            max_norm[opt][f"layers{layers}"] = max(run["norms"])
            clipped[opt][f"layers{layers}"] = sum(n > clip for n in run["norms"])
    values = {
        "data": name, "steps": steps, "perplexity": ppl, "max_grad_norm": max_norm,
        "sgd_deep_minus_shallow": ppl["sgd"]["layers3"] - ppl["sgd"]["layers1"],
        "adam_deep_minus_shallow": ppl["adam"]["layers3"] - ppl["adam"]["layers1"],
        "deep_sgd_minus_adam": ppl["sgd"]["layers3"] - ppl["adam"]["layers3"],
        "clipped_steps": clipped, "unclipped_deep_perplexity": unclipped,
        "unclipped_minus_clipped_deep": {o: unclipped[o] - ppl[o]["layers3"] for o in ppl},
    }  # fmt: skip
    finding = (
        f"{name}, {steps} steps, held-out perplexity by layers 1/3: SGD lr 1 "
        + "/".join(f"{p:.2f}" for p in ppl["sgd"].values())
        + ", Adam "
        + "/".join(f"{p:.2f}" for p in ppl["adam"].values())
        + "; largest gradient norm SGD "
        + "/".join(f"{p:.2g}" for p in max_norm["sgd"].values())
        + "; steps clipped SGD "
        + "/".join(str(n) for n in clipped["sgd"].values())
        + ", Adam "
        + "/".join(str(n) for n in clipped["adam"].values())
        + f"; 3 layers without clipping: SGD {unclipped['sgd']:.2f}, Adam {unclipped['adam']:.2f}"
    )
    return TopicResult("rnn_depth_deeper_rnn", finding, values, {})
