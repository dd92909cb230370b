"""A language model's attention over a token sequence, for the views."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from attnkit._validate import non_negative_int, token_ids
from attnkit.i18n import N_, _
from attnkit.inference.eval_mode import evaluating
from attnkit.views.inputs import LMMaps, check_tokens

__all__ = ["lm_maps"]


@torch.no_grad()
def lm_maps(
    model: nn.Module,
    ids,  # (K,) token ids: a prompt and its continuation
    tokens: Sequence[str] | None = None,  # (K,) their labels; None: the positions
    *,
    prompt_length: int = 0,
) -> LMMaps:
    """Every layer's and head's causal self-attention of a decoder-only Transformer LM
    (:class:`~attnkit.models.decoder_lm.DecoderLM`) over ``ids``: one forward pass with the
    exact weights recorded. ``attention`` is (L, H, K, K)."""
    ids = token_ids("ids", ids)
    if ids.numel() == 0:
        raise ValueError(_("ids is empty: pass at least one token id"))
    prompt_length = non_negative_int("prompt_length", prompt_length)
    if prompt_length > ids.numel():
        raise ValueError(
            _("prompt_length must be <= len(ids) = {n}, got {prompt_length}").format(
                n=ids.numel(), prompt_length=prompt_length
            )
        )
    if not hasattr(model, "context_length"):
        raise TypeError(
            _(
                "model must be a decoder-only Transformer LM (DecoderLM), got {type} (a "
                "recurrent model has no attention to draw)"
            ).format(type=type(model).__name__)
        )
    labels = check_tokens("tokens", tokens, ids.numel(), N_("token ids"))
    device = next(model.parameters()).device
    with evaluating(model):
        _logits, weights = model(ids[None].to(device), return_attention=True)  # L x (1, H, K, K)
    attention = torch.stack([w[0] for w in weights]).float().cpu()
    return LMMaps(labels, attention, prompt_length)
