"""Batched beam search over any attnkit encoder-decoder.

Shape legend: N sentences, k beam size, V target vocabulary, S source length.

Uses only the generic model interface (``encoder``, ``decoder.init_state``,
``decoder(X, state)`` one step at a time, ``decoder.reorder_state``), so it works
for the GRU models and the Transformer (whose state carries a key/value cache).

Hypotheses are ranked by log-probability divided by the GNMT length penalty
``((5 + |y|) / 6) ** alpha``; ``alpha = 0`` ranks by raw log-probability, and a
beam of size 1 is exactly greedy decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnkit.inference.decoding import check_decode_inputs
from attnkit.models.seq2seq import EncoderDecoder

__all__ = ["BeamHypothesis", "BeamSearch"]


@dataclass(frozen=True)
class BeamHypothesis:
    tokens: list[int]  # target ids, without <bos> and <eos>
    log_prob: float  # sum of token log-probabilities (<eos> included when finished)
    score: float  # log_prob / length penalty: what hypotheses are ranked by
    finished: bool  # ended with <eos> (False: stopped at max_len)


class BeamSearch:
    """``BeamSearch(beam_size, max_len, bos, eos)(model, src, src_len)``.

    Args:
        beam_size: hypotheses kept per sentence (k >= 1).
        max_len: most target tokens generated per sentence (<eos> included).
        bos, eos: the target vocabulary's ids of ``<bos>`` and ``<eos>``.
        length_penalty: GNMT alpha (0 = none).
    """

    def __init__(
        self, beam_size: int, max_len: int, bos: int, eos: int, length_penalty: float = 0.0
    ) -> None:
        if not isinstance(beam_size, int) or isinstance(beam_size, bool) or beam_size < 1:
            raise ValueError(f"beam_size must be an int >= 1, got {beam_size!r}")
        if not isinstance(max_len, int) or max_len < 1:
            raise ValueError(f"max_len must be an int >= 1, got {max_len!r}")
        if length_penalty < 0:
            raise ValueError(f"length_penalty must be >= 0, got {length_penalty!r}")
        self.beam_size, self.max_len = beam_size, max_len
        self.bos, self.eos = bos, eos
        self.length_penalty = length_penalty

    def _penalty(self, length: Tensor) -> Tensor:
        return ((5.0 + length) / 6.0) ** self.length_penalty

    @torch.no_grad()
    def __call__(
        self,
        model: EncoderDecoder,
        src: Tensor,  # (N, S) token ids
        src_len: Tensor,  # (N,)
    ) -> list[list[BeamHypothesis]]:
        """Per sentence, its ``beam_size`` hypotheses, best first (model in eval mode)."""
        check_decode_inputs(model, src, src_len, self.max_len)
        was_training = model.training
        model.eval()  # no dropout: the same input always gives the same beams
        try:
            return self._search(model, src, src_len)
        finally:
            model.train(was_training)

    def _search(
        self, model: EncoderDecoder, src: Tensor, src_len: Tensor
    ) -> list[list[BeamHypothesis]]:
        N, k, device = src.shape[0], self.beam_size, src.device
        enc_outputs = model.encoder(src, src_len)
        state = model.decoder.init_state(enc_outputs, src_len)
        expand = torch.arange(N, device=device).repeat_interleave(k)  # (N*k,)
        state = model.decoder.reorder_state(state, expand)
        # only beam 0 is alive at the start, so the k beams do not all pick the same token
        log_prob = torch.full((N, k), float("-inf"), device=device)
        log_prob[:, 0] = 0.0
        finished = torch.zeros(N, k, dtype=torch.bool, device=device)
        lengths = torch.zeros(N, k, device=device)  # tokens generated, <eos> included
        tokens = torch.empty(N, k, 0, dtype=torch.long, device=device)
        X = torch.full((N * k, 1), self.bos, dtype=torch.long, device=device)
        for _ in range(self.max_len):
            logits, state = model.decoder(X, state)  # (N*k, 1, V)
            step = torch.log_softmax(logits[:, -1].float(), dim=-1).view(N, k, -1)  # (N, k, V)
            V = step.shape[-1]
            # a finished beam may only "continue" with <eos>, at no cost
            done_row = torch.full((V,), float("-inf"), device=device)
            done_row[self.eos] = 0.0
            step = torch.where(finished[..., None], done_row, step)
            cand = (log_prob[..., None] + step).view(N, k * V)  # (N, k*V)
            log_prob, flat = cand.topk(k, dim=-1)  # (N, k)
            origin, token = flat // V, flat % V  # beam each came from, its new token
            finished = finished.gather(1, origin)
            lengths = lengths.gather(1, origin) + (~finished).float()
            tokens = torch.cat(
                [
                    tokens.gather(1, origin[..., None].expand(-1, -1, tokens.shape[2])),
                    token[..., None],
                ],
                dim=2,
            )  # (N, k, t)
            finished = finished | (token == self.eos)
            rows = (origin + torch.arange(N, device=device)[:, None] * k).view(-1)  # (N*k,)
            state = model.decoder.reorder_state(state, rows)
            X = token.view(N * k, 1)
            if bool(finished.all()):
                break
        score = log_prob / self._penalty(lengths)
        order = score.argsort(dim=1, descending=True)
        out: list[list[BeamHypothesis]] = []
        for n in range(N):
            hyps = []
            for j in order[n].tolist():
                seq = tokens[n, j].tolist()
                if self.eos in seq:
                    seq = seq[: seq.index(self.eos)]
                hyps.append(
                    BeamHypothesis(
                        seq, float(log_prob[n, j]), float(score[n, j]), bool(finished[n, j])
                    )
                )
            out.append(hyps)
        return out
