"""Exercise 8.3.5 of d2l 0.17 (1.0: 9.3.4): the random offset of the book's random
sampling. The corpus is the positions themselves (token i is the number i), so the
minibatches of ``attnkit.data.lm.seq_data_iter_random`` say which positions each epoch
reads. Over many epochs: how often each position starts a subsequence and how often it
is read at all, with the book's offset and with the corpus read as a circle."""

from __future__ import annotations

import random

import torch

from attnkit.data.lm import seq_data_iter_random
from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["offset_coverage"]

N_TOKENS, NUM_STEPS, BATCH = 1000, 10, 16


def _coverage(epochs: int, seed: int, circular: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(how often each position was read as input, how often it started a subsequence),
    as fractions of the epochs. ``circular``: each epoch first rotates the corpus by a
    uniformly random shift, so no position is special for being near an end."""
    rng = random.Random(seed)
    positions = torch.arange(N_TOKENS)
    inputs = []
    for _ in range(epochs):
        corpus = positions.roll(rng.randrange(N_TOKENS)) if circular else positions
        inputs += [X for X, _ in seq_data_iter_random(corpus, BATCH, NUM_STEPS, rng)]
    X = torch.cat(inputs)  # (every subsequence read, T)
    read = torch.bincount(X.reshape(-1), minlength=N_TOKENS).float()
    starts = torch.bincount(X[:, 0], minlength=N_TOKENS).float()
    return read / epochs, starts / epochs


@topic
def offset_coverage(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.3.5: the book's random offset reads the first and last positions less often;
    rotating the corpus makes every position equally likely."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    epochs = 500 if small else 2000
    read, starts = _coverage(epochs, seed, circular=False)
    read_c, _ = _coverage(epochs, seed + 1, circular=True)
    middle = slice(2 * NUM_STEPS, N_TOKENS - 2 * NUM_STEPS)
    mid = float(read[middle].mean())
    # position p < NUM_STEPS is read only when the offset is <= p: chance (p + 1) / NUM_STEPS
    first_expected = [(p + 1) / NUM_STEPS * mid for p in range(NUM_STEPS)]
    # a start at position p needs the offset p mod NUM_STEPS: chance 1 / NUM_STEPS
    mid_starts = starts[middle]
    values = {
        "tokens": N_TOKENS,
        "num_steps": NUM_STEPS,
        "batch_size": BATCH,
        "epochs": epochs,
        "read_middle": mid,
        "read_first": float(read[0]),
        "read_last": float(read[-1]),
        "read_first_steps": read[:NUM_STEPS].tolist(),
        "first_steps_expected": first_expected,
        "first_ramp_error": max(
            abs(a - b) for a, b in zip(read[:NUM_STEPS].tolist(), first_expected)
        ),
        "start_middle_mean": float(mid_starts.mean()),
        "start_middle_spread": float(mid_starts.max() - mid_starts.min()),
        "edge_ratio": float(read[: NUM_STEPS // 2].mean()) / mid,
        "circular_min_ratio": float(read_c.min() / read_c.mean()),
        "circular_max_ratio": float(read_c.max() / read_c.mean()),
        "circular_edge_ratio": float(read_c[: NUM_STEPS // 2].mean() / read_c.mean()),
        "book_min_ratio": float(read.min() / mid),
    }
    fig = plot_curves(
        {gettext("book offset"): read[: 4 * NUM_STEPS].tolist(),
         gettext("rotated corpus"): read_c[: 4 * NUM_STEPS].tolist()},
        gettext("position"), gettext("fraction of epochs read"), x=list(range(4 * NUM_STEPS)),
        figsize=(4.5, 3),
    )  # fmt: skip
    finding = (
        f"{epochs} epochs over {N_TOKENS} tokens (num_steps {NUM_STEPS}, batch {BATCH}): middle "
        f"positions read in {mid:.3f} of the epochs, position 0 in {float(read[0]):.3f}, the "
        f"last never ({float(read[-1]):.3f}); rotated corpus: every position within "
        f"{values['circular_min_ratio']:.3f}-{values['circular_max_ratio']:.3f} of the mean"
    )
    return TopicResult("sequence_offsets_offset_coverage", finding, values, {"coverage": fig})
