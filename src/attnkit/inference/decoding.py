"""Decoding with the generic encoder-decoder interface (see ``attnkit.models.seq2seq``).

Shape legend: B batch, S source length, T target length, V vocabulary size.

``greedy_decode`` translates a whole batch at once, one target step at a time
(T = 1 per decoder call, the decoder state carries everything else). A row that
emits ``<eos>`` is dropped from the batch with ``decoder.reorder_state``, so finished
sentences cost nothing. Beam search (``attnkit.inference.beam_search``) uses the same interface.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.attention.recording import record_attention

__all__ = ["DecodeResult", "check_decode_inputs", "greedy_decode", "translate"]


@dataclass
class DecodeResult:
    """Decoded token ids per sentence, ``<eos>`` excluded, in input order.

    ``attention[i]`` (when asked for) is sentence i's encoder-decoder attention,
    (steps_i, src_len_i): one row per decoded step, the ``<eos>`` step included when
    the sentence finished (as the book's ``predict_seq2seq`` records it).
    ``finished[i]`` is False when the sentence hit ``max_len`` without ``<eos>``.
    """

    tokens: list[list[int]]
    finished: list[bool]
    attention: list[Tensor] | None = None


def check_decode_inputs(model: nn.Module, src: Tensor, src_len: Tensor, max_len: int) -> None:
    """Raise a clear error unless model is an encoder-decoder and src/src_len/max_len fit."""
    for name in ("encoder", "decoder"):
        if not hasattr(model, name):
            raise TypeError(
                f"model must be an EncoderDecoder with .{name}, got {type(model).__name__}"
            )
    if not isinstance(src, Tensor) or src.dim() != 2 or src.dtype != torch.long:
        raise ValueError(f"src must be a (B, S) long tensor, got {getattr(src, 'shape', src)}")
    if not isinstance(src_len, Tensor) or tuple(src_len.shape) != (src.shape[0],):
        raise ValueError(
            f"src_len must have shape (B,) = ({src.shape[0]},), got {getattr(src_len, 'shape', src_len)}"
        )
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive int, got {max_len!r}")


@torch.no_grad()
def greedy_decode(
    model: nn.Module,
    src: Tensor,  # (B, S) long
    src_len: Tensor,  # (B,) long
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    return_attention: bool = False,
    on_step: Callable[[nn.Module], None] | None = None,
) -> DecodeResult:
    """Greedy (argmax) decoding of a batch, stopping each sentence at ``<eos>``.

    Args:
        model: an ``EncoderDecoder`` (the generic interface); evaluated in eval mode,
            its previous mode is restored afterwards.
        max_len: the most target steps per sentence, ``<eos>`` included.
        return_attention: also return ``decoder.alignment()`` per sentence.
        on_step: called with the decoder after every step (the book's
            ``predict_seq2seq`` uses it to collect ``decoder.attention_weights``).
    """
    check_decode_inputs(model, src, src_len, max_len)
    was_training = model.training
    model.eval()
    try:
        # Attention modules with fused kernels keep their weights only when recording.
        with record_attention(model, on=True) if return_attention else nullcontext():
            return _greedy(model, src, src_len, bos_id, eos_id, max_len, return_attention, on_step)
    finally:
        model.train(was_training)


def _greedy(model, src, src_len, bos_id, eos_id, max_len, return_attention, on_step):
    B, S = src.shape
    device = src.device
    decoder = model.decoder
    state = decoder.init_state(model.encoder(src, src_len), src_len)
    out = torch.full((B, max_len), eos_id, dtype=torch.long, device=device)  # (B, T)
    steps = torch.full((B,), max_len, dtype=torch.long)  # decoded steps per row
    attn = torch.zeros(B, max_len, S, device=device) if return_attention else None  # (B, T, S)
    alive = torch.arange(B, device=device)  # original row of each live row
    y = torch.full((B, 1), bos_id, dtype=torch.long, device=device)  # (B', 1)
    for t in range(max_len):
        logits, state = decoder(y, state)  # (B', 1, V)
        if on_step is not None:
            on_step(decoder)
        y = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B', 1)
        out[alive, t] = y[:, 0]
        if attn is not None:
            a = decoder.alignment()
            if a is None:
                raise ValueError(f"{type(decoder).__name__} records no attention to return")
            attn[alive, t] = a[:, -1].reshape(len(alive), -1).to(attn.dtype)
        done = y[:, 0] == eos_id  # (B',)
        if bool(done.any()):
            steps[alive[done].cpu()] = t + 1
            keep = (~done).nonzero().squeeze(1)  # (B'',)
            if keep.numel() == 0:
                break
            alive, y = alive[keep], y[keep]
            state = decoder.reorder_state(state, keep)
    out_list = out.cpu().tolist()
    tokens, finished, attention = [], [], [] if attn is not None else None
    for i in range(B):
        n = int(steps[i])
        ended = out_list[i][n - 1] == eos_id  # n >= 1: every row decodes a step
        tokens.append(out_list[i][: n - 1] if ended else out_list[i][:n])
        finished.append(bool(ended))
        if attention is not None:
            attention.append(attn[i, :n, : int(src_len[i])].cpu())
    return DecodeResult(tokens, finished, attention)


# Beam search lives in ``attnkit.inference.beam_search`` (``BeamSearch``): the same inputs and the
# same generic interface, keeping ``beam_size`` hypotheses per sentence with
# ``decoder.reorder_state(state, index)``.


def translate(
    model: nn.Module,
    data,
    sentences: list[str],
    *,
    batch_size: int = 256,
    max_len: int | None = None,
    return_attention: bool = False,
) -> tuple[list[str], list[Tensor] | None]:
    """Translate source sentences with greedy decoding, ``batch_size`` sentences at a time.

    ``data`` is a ``TranslationData`` (its ``encode_source`` preprocesses and checks the
    sentences, its ``detokenize`` turns ids back into text: words joined by spaces, or
    subword pieces decoded). Sentences are decoded in order of
    length (less padding) and returned in input order. ``max_len`` defaults to
    ``data.max_len + 2`` target steps.
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of str, not a single str")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    max_len = data.max_len + 2 if max_len is None else max_len
    device = next(model.parameters()).device
    tgt_vocab = data.tgt_vocab
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].split()))
    hyps: list[str] = [""] * len(sentences)
    attention: list[Tensor] | None = [None] * len(sentences) if return_attention else None
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        src, src_len = data.encode_source([sentences[i] for i in idx])
        res = greedy_decode(
            model,
            src.to(device),
            src_len.to(device),
            bos_id=tgt_vocab["<bos>"],
            eos_id=tgt_vocab["<eos>"],
            max_len=max_len,
            return_attention=return_attention,
        )
        for j, i in enumerate(idx):
            hyps[i] = data.detokenize(res.tokens[j])
            if attention is not None:
                attention[i] = res.attention[j]
    return hyps, attention
