"""Greedy decoding with continuous batching: finished sentences' rows are refilled.

Shape legend: B rows decoding (at most ``batch_size``), S source length, V vocabulary.

Decoding a list batch by batch (``decoding.greedy_decode`` on each) drops a sentence's
row when it emits ``<eos>``, so each batch's last steps decode a few rows: a step costs
nearly as much at one row as at 64 (the weights are read either way). Here the batch is
topped up instead: when at least ``refill`` rows have finished, the next sentences of the
queue are encoded, decode their first position on their own, and join the batch with
``decoder.append_rows`` (their self-attention caches left-padded, each row at its own
position). Each sentence's tokens are what greedy decoding gives it alone, up to float
rounding (the sums run over other batch shapes); the tests hold them equal in float64.

Decoders with ``append_rows`` (``TransformerDecoder``) decode this way in
``decoding.translate``; the others batch by batch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from attnkit._validate import integer, positive_int

__all__ = ["continuous_greedy", "supports_continuous"]


def supports_continuous(model: nn.Module) -> bool:
    """Whether the model's decoder can take rows into a batch that is decoding."""
    return callable(getattr(getattr(model, "decoder", None), "append_rows", None))


@torch.no_grad()
def continuous_greedy(
    model: nn.Module,
    encode: Callable[[int, int], tuple[Tensor, Tensor]],
    count: int,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    batch_size: int,
    refill: int | None = None,
) -> tuple[list[list[int]], list[bool]]:
    """Greedy decoding of ``count`` queued sentences, at most ``batch_size`` rows at once.

    Args:
        model: an ``EncoderDecoder`` whose decoder has ``append_rows``; decoded in eval
            mode, its previous mode restored afterwards.
        encode: ``encode(first, n)`` -> (src (n, S) long, src_len (n,) long), the queue's
            sentences ``first .. first + n - 1`` (right-padded ids and their lengths).
        count: sentences in the queue.
        bos_id, eos_id: the target vocabulary's ``<bos>`` and ``<eos>`` ids.
        max_len: the most target steps per sentence, ``<eos>`` included.
        batch_size: the most rows decoding at once.
        refill: take sentences in when this many rows are free (default a quarter of
            ``batch_size``, at least 1): fewer, larger joins (each one encodes the new
            sentences and copies the batch's caches).

    Returns:
        ``(tokens, finished)`` per queued sentence, in queue order: its ids (``<eos>``
        excluded) and whether it ended with ``<eos>``.
    """
    if not supports_continuous(model):
        raise TypeError(
            f"model must be an EncoderDecoder whose decoder has append_rows, got "
            f"{type(model).__name__} with {type(getattr(model, 'decoder', None)).__name__}"
        )
    if not callable(encode):
        raise TypeError(f"encode must be callable, got {type(encode).__name__}")
    count = integer("count", count, minimum=0)
    bos_id = integer("bos_id", bos_id, minimum=0)
    eos_id = integer("eos_id", eos_id, minimum=0)
    max_len = positive_int("max_len", max_len)
    batch_size = positive_int("batch_size", batch_size)
    refill = max(1, batch_size // 4) if refill is None else positive_int("refill", refill)
    was_training = model.training
    model.eval()
    try:
        return _decode(model, encode, count, bos_id, eos_id, max_len, batch_size, refill)
    finally:
        model.train(was_training)


def _decode(model, encode, count, bos_id, eos_id, max_len, batch_size, refill):
    decoder = model.decoder
    device = next(model.parameters()).device
    out = torch.full((count, max_len), eos_id, dtype=torch.long, device=device)  # ids
    length = torch.zeros(count, dtype=torch.long, device=device)  # steps per sentence
    # The batch: decoder state, last ids y (B, 1), queue items (B,), steps decoded (B,),
    # live (B,) bool, positions decoded (B,). A finished row stays (its row computed, its output ignored) until the
    # batch is compacted: when new sentences join, when a quarter of the rows are dead, or
    # before a dead row would pass max_len positions. One reorder of the caches per
    # compaction, not one per finished sentence.
    state = y = item = step = live = pos = None
    n_live, queued = 0, 0  # rows decoding; the next sentence to take in

    def record(y, item, step, live):
        """Write the live rows' new ids y (B, 1): (steps, live, rows that just ended)."""
        out[item[live], step[live]] = y[live, 0]
        step = step + live.long()
        done = live & ((y[:, 0] == eos_id) | (step >= max_len))  # (B,)
        ended = int(done.sum())
        if ended:
            length[item[done]] = step[done]
        return step, live & ~done, ended

    while queued < count or n_live:
        rows = 0 if state is None else len(item)
        take = 0
        if queued < count and batch_size - n_live >= min(refill, batch_size, count - queued):
            take = min(batch_size - n_live, count - queued)
        dead = rows - n_live
        if dead and (take or dead * 4 >= rows or int(pos.max()) >= max_len):
            keep = live.nonzero().squeeze(1)  # (B',)
            state = decoder.reorder_state(state, keep) if len(keep) else None
            y, item, step, live, pos = y[keep], item[keep], step[keep], live[keep], pos[keep]
        if take:  # new sentences decode their first position, then join
            new_state, new_y, new_item = _first_step(model, encode, queued, take, bos_id, device)
            fresh = torch.ones_like(new_item, dtype=torch.bool)
            new_step, new_live, ended = record(new_y, new_item, torch.zeros_like(new_item), fresh)
            queued, n_live = queued + take, n_live + take - ended
            if state is None:
                state, y, item, step, live = new_state, new_y, new_item, new_step, new_live
                pos = torch.ones_like(new_item)
            else:
                state = decoder.append_rows(state, new_state)
                y, item = torch.cat([y, new_y]), torch.cat([item, new_item])
                step, live = torch.cat([step, new_step]), torch.cat([live, new_live])
                pos = torch.cat([pos, torch.ones_like(new_item)])
            continue
        logits, state = decoder(y, state)  # (B, 1, V)
        y = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        step, live, ended = record(y, item, step, live)
        pos, n_live = pos + 1, n_live - ended
    tokens, finished = [], []
    for ids, n in zip(out.cpu().tolist(), length.tolist()):
        ended = ids[n - 1] == eos_id
        tokens.append(ids[: n - 1] if ended else ids[:n])
        finished.append(bool(ended))
    return tokens, finished


def _first_step(model, encode, first: int, n: int, bos_id: int, device):
    """Encode queued sentences first .. first + n - 1 and decode their first position:
    (state, ids (n, 1), queue items (n,))."""
    src, src_len = encode(first, n)  # (n, S), (n,)
    src, src_len = src.to(device), src_len.to(device)
    state = model.decoder.init_state(model.encoder(src, src_len), src_len)
    bos = torch.full((n, 1), bos_id, dtype=torch.long, device=device)
    logits, state = model.decoder(bos, state)  # (n, 1, V)
    items = torch.arange(first, first + n, device=device)
    return state, logits[:, -1].argmax(dim=-1, keepdim=True), items
