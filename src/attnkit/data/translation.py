"""English-French translation data: reading, preprocessing, splits, bucketed batches.

Shape legend: B batch, S source length, T target length.

THE INTERFACE (shared by the models, the trainer and the CLI):

- ``TranslationBatch``: one padded batch; source and target end in ``<eos>``,
  the target has no ``<bos>`` (the trainer prepends it for teacher forcing).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["TranslationBatch"]


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
