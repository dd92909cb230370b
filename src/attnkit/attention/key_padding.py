"""Attention over key-padded batches that skips the padding (CPU).

Shape legend: B batch, H heads, Q queries, K keys, Dh head width.

With key lengths ``lens`` (B,), ``F.scaled_dot_product_attention`` with a padding mask
still scores every query against all K keys and then masks. Here each batch row ``b``
runs PyTorch's CPU flash-attention kernel on its first ``lens[b]`` keys only, with no
mask at all, forward and backward (a custom autograd function calling the kernel's
forward and backward ops). Gradients of the padded keys and values are exactly 0, and
a row with no valid key gives a zero output, as everywhere in attnkit.

It pays off when keys are long and lengths vary: on 2 cores, batch 32, 8 heads,
Dh 32 and uniform random lengths, the attention core (forward + backward) takes about
0.65x the masked kernel's time at K = 512 and about 0.9x at K = 128 (see
benchmarks/book/attention.py). Each row costs two kernel launches, so MultiHeadAttention uses
it only on CPU, for K >= ``MIN_KEYS`` keys and Q >= ``MIN_QUERIES`` queries (not for
one-position decoding steps), without dropout and when no weights are requested.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from attnkit.attention.masking import check_valid_lens
from attnkit.i18n import _

__all__ = ["MIN_KEYS", "MIN_QUERIES", "available", "key_padded_attention"]

MIN_KEYS = 128  # below this the per-row launches cost more than the skipped padding saves
MIN_QUERIES = 32  # with fewer queries per row, too little work per launch

_aten = torch.ops.aten


def available(q: Tensor) -> bool:
    """Whether ``key_padded_attention`` can run on q's device and dtype."""
    return (
        q.device.type == "cpu"
        and q.dtype in (torch.float32, torch.float64)
        and hasattr(_aten, "_scaled_dot_product_flash_attention_for_cpu_backward")
    )


class _KeyPaddedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: FunctionCtx, q: Tensor, k: Tensor, v: Tensor, lens: list[int]) -> Tensor:
        B, H, Q, _ = q.shape
        out = q.new_empty(B, Q, H, v.shape[-1]).transpose(1, 2)  # (B, H, Q, Dv)
        logsumexps: list[Tensor | None] = []
        for b, n in enumerate(lens):
            if n == 0:  # no key to attend: zero output
                out[b].zero_()
                logsumexps.append(None)
                continue
            o, lse = _aten._scaled_dot_product_flash_attention_for_cpu(
                q[b : b + 1], k[b : b + 1, :, :n], v[b : b + 1, :, :n]
            )
            out[b : b + 1] = o
            logsumexps.append(lse)
        ctx.save_for_backward(q, k, v, out)
        ctx.logsumexps, ctx.lens = logsumexps, lens
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_out: Tensor) -> tuple[Tensor, Tensor, Tensor, None]:
        q, k, v, out = ctx.saved_tensors
        B, H, Q, Dh = q.shape
        K = k.shape[2]
        # (B, T, H, Dh) memory viewed as (B, H, T, Dh), the layout the heads came from;
        # every row of dq is written below, dk and dv keep zeros at the padded keys
        dq = q.new_empty(B, Q, H, Dh).transpose(1, 2)
        dk = k.new_zeros(B, K, H, Dh).transpose(1, 2)
        dv = v.new_zeros(B, K, H, v.shape[-1]).transpose(1, 2)
        for b, n in enumerate(ctx.lens):
            if n == 0:
                dq[b].zero_()
                continue
            gq, gk, gv = _aten._scaled_dot_product_flash_attention_for_cpu_backward(
                grad_out[b : b + 1],
                q[b : b + 1],
                k[b : b + 1, :, :n],
                v[b : b + 1, :, :n],
                out[b : b + 1],
                ctx.logsumexps[b],
                0.0,
                False,
            )
            dq[b : b + 1] = gq
            dk[b : b + 1, :, :n] = gk
            dv[b : b + 1, :, :n] = gv
        return dq, dk, dv, None


def key_padded_attention(
    q: Tensor,  # (B, H, Q, Dh)
    k: Tensor,  # (B, H, K, Dh)
    v: Tensor,  # (B, H, K, Dv)
    lens: Tensor,  # (B,) ints in [0, K]: row b attends to keys 0 .. lens[b]-1
) -> Tensor:  # (B, H, Q, Dv)
    """softmax(q kᵀ / sqrt(Dh)) v per row over its first ``lens[b]`` keys only.

    Equals ``F.scaled_dot_product_attention`` with the padding mask (to float
    rounding) and has the same gradients; padded keys/values get zero gradient.
    """
    if not available(q):
        message = _(
            "key_padded_attention needs float32/float64 CPU tensors, got {dtype} on {device}"
        )
        raise ValueError(message.format(dtype=q.dtype, device=q.device))
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        message = _("q, k, v must be (B, H, T, Dh), got shapes {q}, {k}, {v}")
        raise ValueError(message.format(q=tuple(q.shape), k=tuple(k.shape), v=tuple(v.shape)))
    check_valid_lens(lens, k.shape[0], q.shape[2], k.shape[2], name="lens", per_query=False)
    return _KeyPaddedAttention.apply(q, k, v, lens.tolist())
