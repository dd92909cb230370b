"""Named recipes for ``attnkit translate train --preset NAME``: a Transformer config plus the
training and data settings it is meant to be trained with. Flags given on the command line
override any of them.

``base`` is sized for the real corpus (Tatoeba EN-FR, 167,130 pairs) and a budget of 30
minutes on 2 CPU cores (``--time-budget 1800``):

- **vocabulary**: 8000 joint SentencePiece pieces. The sentences are short (8.5 English
  and 10.2 French pieces on average); 8000 pieces keep nearly every common word whole
  while the output layer (d_model x 8000) stays about 1.5 decoder layers of work.
- **width and depth**: d_model 256, 4 heads of 64, FFN 1024, 3 + 3 layers (11.7 M
  parameters). Measured on this machine with bf16 autocast: ~6,800 tokens/s (source +
  target), so one pass over the corpus (3.1 M tokens) takes ~7.6 minutes and 30 minutes
  see it ~3.5 times. Four layers cost 8% more time per step for no gain within the budget;
  d_model 384 takes 12.7 minutes per pass.
- **optimization**: Adam (0.9, 0.98), warm-up over 400 steps to a peak learning rate of
  1e-3, then the inverse square root (about 1,500 steps in 30 minutes: the warm-up is short
  so most of them run near the peak); batches of 6000 padded source + target tokens; label
  smoothing 0.1; dropout 0.1; bf16 autocast (1.3x the fp32 speed on this CPU).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["PRESET_DATA", "PRESET_TRAIN", "preset_settings"]

# training settings per preset (TrainConfig fields); presets not listed keep the defaults
PRESET_TRAIN: dict[str, dict[str, Any]] = {
    "base": {
        "schedule": "inverse_sqrt",
        "lr": 1e-3,
        "warmup_steps": 400,
        "batch_tokens": 6000,
        "label_smoothing": 0.1,
        "precision": "bf16",
    },
}
# data settings per preset (load_translation_data arguments) that apply to subwords only
PRESET_DATA: dict[str, dict[str, Any]] = {"base": {"vocab_size": 8000}}


def preset_settings(arch: str, name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(model config fields, training settings, subword data settings) of preset ``name``."""
    if arch != "transformer":
        raise ValueError(f"--preset is for --arch transformer, not {arch!r}")
    from attnkit.models.transformer import PRESETS

    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of {sorted(PRESETS)}")
    return (
        dataclasses.asdict(PRESETS[name]),
        dict(PRESET_TRAIN.get(name, {})),
        dict(PRESET_DATA.get(name, {})),
    )
