"""Splits that never share a sentence, and length-bucketed token-budget batches.

Shape legend: B batch, S source length, T target length.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnkit._validate import boolean, index, positive_int, probability
from attnkit.i18n import _

__all__ = [
    "Pair",
    "TranslationBatch",
    "bucket_batches",
    "check_fractions",
    "pad_ids",
    "padding_efficiency",
    "split_by_source",
]

Pair = tuple[list[str], list[str]]  # (source tokens, target tokens)


@dataclass(frozen=True)
class TranslationBatch:
    src: Tensor  # (B, S) long: source ids + <eos>, right-padded with <pad>
    src_len: Tensor  # (B,) long: valid source lengths (<eos> included)
    tgt: Tensor  # (B, T) long: target ids + <eos>, right-padded with <pad>; no <bos>
    tgt_len: Tensor  # (B,) long: valid target lengths (<eos> included)

    def to(self, device: torch.device | str) -> TranslationBatch:
        return TranslationBatch(*(t.to(device, non_blocking=True) for t in self.astuple()))

    def astuple(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return (self.src, self.src_len, self.tgt, self.tgt_len)

    @property
    def num_tgt_tokens(self) -> int:
        return int(self.tgt_len.sum())


# =========================================================================== splits


def split_by_source(
    pairs: Sequence[tuple[list[str], list[str]]],
    val_fraction: float,
    test_fraction: float,
    seed: int = 0,
) -> tuple[list[int], list[int], list[int]]:
    """Indices of train/val/test pairs such that no sentence, source or target, is in two splits.

    Pairs that share a source sentence *or* a target sentence are grouped (transitively,
    with a union-find over both sides: ``go .``/``go !`` -> ``va !`` is one group), and
    whole groups go to one split. The groups, in order of first occurrence, are shuffled
    under ``seed``; then each group in turn goes to test if that brings the test split
    closer to ``round(test_fraction * len(pairs))`` pairs, else to validation if that
    brings it closer to ``round(val_fraction * len(pairs))`` pairs, else to train. So
    the test split misses its target by at most half the largest group (validation too,
    unless train is left empty), and when every group is a single pair (the generated
    corpus) the sizes are exactly the rounded targets, as before. Within a split, indices keep corpus order. (The name is historical: the
    splits never share a target sentence either.)
    """
    check_fractions(val_fraction, test_fraction)
    groups = _sentence_groups(pairs)
    random.Random(f"attnkit-split:{seed}").shuffle(groups)
    n_test = round(test_fraction * len(pairs))
    n_val = round(val_fraction * len(pairs))
    which = [0] * len(pairs)
    sizes = [0, 0, 0]  # train, val, test pairs so far
    for group in groups:
        # a group joins a split when that moves the split's size strictly closer to its
        # target: |size + len - target| < |size - target|  <=>  2 * size + len < 2 * target
        if 2 * sizes[2] + len(group) < 2 * n_test:
            part = 2
        elif 2 * sizes[1] + len(group) < 2 * n_val:
            part = 1
        else:
            part = 0
        sizes[part] += len(group)
        for i in group:
            which[i] = part
    out: tuple[list[int], list[int], list[int]] = ([], [], [])
    for i, part in enumerate(which):
        out[part].append(i)
    return out


def _sentence_groups(pairs: Sequence[tuple[list[str], list[str]]]) -> list[list[int]]:
    """Pair indices grouped by shared source or target sentences (connected components).

    Groups come in order of their first pair, each group's indices in corpus order.
    """
    parent = list(range(len(pairs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]  # path halving
            i = parent[i]
        return i

    first_src: dict[tuple[str, ...], int] = {}
    first_tgt: dict[tuple[str, ...], int] = {}
    for i, (src, tgt) in enumerate(pairs):
        for first, sentence in ((first_src, tuple(src)), (first_tgt, tuple(tgt))):
            j = first.setdefault(sentence, i)
            if j != i:
                a, b = find(i), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)  # the root is the group's first pair
    groups: dict[int, list[int]] = {}
    for i in range(len(pairs)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def check_fractions(val_fraction: float, test_fraction: float) -> None:
    """Both in [0, 1), and their sum < 1 (the training split keeps some pairs)."""
    probability("val_fraction", val_fraction)
    probability("test_fraction", test_fraction)
    if val_fraction + test_fraction >= 1:
        message = _(
            "val_fraction + test_fraction must be < 1, got {val_fraction} + {test_fraction}"
        )
        raise ValueError(message.format(val_fraction=val_fraction, test_fraction=test_fraction))


# =========================================================================== batching


def bucket_batches(
    lengths: Sequence[tuple[int, int]],
    batch_tokens: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> list[list[int]]:
    """Group example indices into length-bucketed batches under a token budget.

    ``lengths[i] = (S_i, T_i)`` are the source and target lengths of example ``i``
    (``<eos>`` included). A batch of ``B`` examples costs ``B * (max S + max T)`` padded
    tokens (source plus target), and every batch costs at most ``batch_tokens``.

    Examples are sorted by ``(S, T)`` (ties broken at random when ``shuffle``) and packed
    greedily, so similar lengths share a batch; with ``shuffle`` the batch order is then
    shuffled. Everything is deterministic under ``(seed, epoch)``; without ``shuffle``
    the result does not depend on them.

    Sharding (multi-process training): ``batch_tokens`` is the **global** budget. The
    global batches are the same whatever ``world_size`` is, and rank ``r`` gets rows
    ``r, r + world_size, ...`` of each of them (rows are sorted by length, so the shares
    are balanced). Every rank therefore does the same number of steps, one step of N
    ranks is one global batch, and the number of optimizer steps per epoch (and so the
    learning-rate schedule) does not change with N. A global batch with fewer rows than
    ``world_size`` is dropped for that epoch (only possible for very long examples).

    Raises:
        ValueError: bad arguments or a single example over ``batch_tokens``.
    """
    index("rank", rank, positive_int("world_size", world_size))
    positive_int("batch_tokens", batch_tokens)
    boolean("shuffle", shuffle)
    if not lengths:
        return []
    biggest = max(s + t for s, t in lengths)
    if biggest > batch_tokens:
        message = _(
            "batch_tokens={batch_tokens} is smaller than the longest example "
            "({biggest} source+target tokens); use batch_tokens >= {biggest}"
        )
        raise ValueError(message.format(batch_tokens=batch_tokens, biggest=biggest))
    rng = random.Random(f"attnkit-batches:{seed}:{epoch}")
    ties = [rng.random() for _ in lengths] if shuffle else list(range(len(lengths)))
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i][0], lengths[i][1], ties[i]))
    batches: list[list[int]] = []
    cur: list[int] = []
    max_s = max_t = 0
    for i in order:
        s, t = lengths[i]
        ns, nt = max(max_s, s), max(max_t, t)
        if cur and (len(cur) + 1) * (ns + nt) > batch_tokens:
            batches.append(cur)
            cur, ns, nt = [], s, t
        cur.append(i)
        max_s, max_t = ns, nt
    if cur:
        batches.append(cur)
    if shuffle:
        rng.shuffle(batches)
    if world_size > 1:
        batches = [b[rank::world_size] for b in batches if len(b) >= world_size]
    return batches


def padding_efficiency(batches: Sequence[TranslationBatch]) -> float:
    """Real tokens / padded tokens over source and target (1.0 = no padding)."""
    real = sum(int(b.src_len.sum()) + int(b.tgt_len.sum()) for b in batches)
    padded = sum(b.src.numel() + b.tgt.numel() for b in batches)
    return real / padded if padded else 1.0


def pad_ids(seqs: Sequence[list[int]], pad: int) -> tuple[Tensor, Tensor]:
    lens = [len(s) for s in seqs]
    width = max(lens)
    out = torch.tensor([s + [pad] * (width - n) for s, n in zip(seqs, lens)], dtype=torch.long)
    return out, torch.tensor(lens, dtype=torch.long)  # (B, S), (B,)
