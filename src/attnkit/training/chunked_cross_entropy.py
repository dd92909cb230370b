"""Cross-entropy with label smoothing over large vocabularies, computed in row chunks.

Shape legend: N rows (tokens), V vocabulary size, C rows per chunk.

With label smoothing ε the per-row loss is

    (1 - ε) · (lse(x) - x_y)  +  ε · (lse(x) - Σ_j x_j / V)  =  lse(x) - (1 - ε) x_y - ε Σ_j x_j / V

and its gradient ``softmax(x) - (1 - ε) e_y - ε / V``. ``F.cross_entropy`` on bfloat16
logits under CPU autocast first copies all N x V logits to float32, writes the N x V
log-probabilities, and in the backward pass fills, scatters, adds and copies N x V
tensors again: at the base recipe's shapes (~1,700 x 4,000) 22-38 ms of a ~190 ms
training step, all of it memory traffic. :func:`chunked_cross_entropy` reads C rows at a
time into float32 (C x V fits the core's cache), keeps only the log-sum-exp per row, and
in the backward pass writes each chunk's gradient straight into the logits' dtype:
12-14 ms for the same rows (``benchmarks/kernels/cross_entropy.py``). Float32 accumulation
throughout; values equal ``F.cross_entropy``'s to float32 rounding.

``attnkit.training.losses.masked_cross_entropy`` uses it for bfloat16/float16 logits on
the CPU; float32 training keeps ``F.cross_entropy`` (its pinned numerics unchanged).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit._validate import positive_int, probability
from attnkit.i18n import _

__all__ = ["CHUNK_ROWS", "chunked_cross_entropy"]

CHUNK_ROWS = 128  # measured: 64-256 within 10% of each other at V = 4,000


class _ChunkedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, smoothing: float, chunk: int) -> Tensor:
        N, V = logits.shape
        compute = torch.promote_types(logits.dtype, torch.float32)  # float32 or float64
        loss = logits.new_empty(N, dtype=compute)  # (N,)
        lse = logits.new_empty(N, dtype=compute)  # (N,): saved for the backward pass
        for s in range(0, N, chunk):
            x = logits[s : s + chunk].to(compute)  # (C, V)
            row_lse = torch.logsumexp(x, dim=-1)  # (C,)
            lse[s : s + chunk] = row_lse
            picked = x.gather(1, target[s : s + chunk, None])[:, 0]  # (C,): x_y
            loss[s : s + chunk] = row_lse - (1 - smoothing) * picked - smoothing / V * x.sum(-1)
        ctx.save_for_backward(logits, target, lse)  # lse: the compute dtype
        ctx.smoothing, ctx.chunk = smoothing, chunk
        return loss

    @staticmethod
    def backward(ctx, grad_loss: Tensor):  # grad_loss: (N,)
        logits, target, lse = ctx.saved_tensors
        smoothing, chunk = ctx.smoothing, ctx.chunk
        N, V = logits.shape
        grad = torch.empty_like(logits)  # (N, V), the logits' dtype
        grad_loss = grad_loss.to(lse.dtype)[:, None]  # (N, 1), once for every chunk
        for s in range(0, N, chunk):
            # softmax in float32 straight from the logits' dtype (one pass), minus ε/V
            p = torch.softmax(logits[s : s + chunk], dim=-1, dtype=lse.dtype).sub_(smoothing / V)
            hit = p.new_full((len(p), 1), -(1 - smoothing))
            p.scatter_add_(1, target[s : s + chunk, None], hit)  # - (1 - ε) at y
            # times the incoming gradient, written in the logits' dtype (one pass)
            torch.mul(p, grad_loss[s : s + chunk], out=grad[s : s + chunk])
        return grad, None, None, None


def chunked_cross_entropy(
    logits: Tensor,  # (N, V) float
    target: Tensor,  # (N,) long, in [0, V)
    label_smoothing: float = 0.0,
    chunk_rows: int = CHUNK_ROWS,
) -> Tensor:
    """Per-row cross-entropy with label smoothing, float32, ``chunk_rows`` rows at a time.

    Equals ``F.cross_entropy(logits.float(), target, reduction="none",
    label_smoothing=label_smoothing)`` up to float rounding: float32 arithmetic (float64
    for float64 logits); the gradient flows to ``logits`` in its own dtype.

    Shape:
        logits: (N, V) floating; target: (N,) long; returns (N,) float32 (float64 for
        float64 logits).

    Raises:
        TypeError: ``logits`` not a floating tensor, ``target`` not a long tensor, a
            ``label_smoothing`` not a number, a ``chunk_rows`` not an int.
        ValueError: shapes that do not fit, a ``label_smoothing`` outside [0, 1) (as
            ``masked_cross_entropy``), a ``chunk_rows`` below 1.
    """
    if not isinstance(logits, Tensor) or not logits.is_floating_point():
        message = _("logits must be a floating (N, V) tensor, got {got}")
        raise TypeError(message.format(got=getattr(logits, "dtype", logits)))
    if logits.dim() != 2:
        message = _("logits must be (N, V), got shape {shape}")
        raise ValueError(message.format(shape=tuple(logits.shape)))
    if not isinstance(target, Tensor) or target.dtype != torch.long:
        message = _("target must be a long (N,) tensor, got {got}")
        raise TypeError(message.format(got=getattr(target, "dtype", target)))
    if tuple(target.shape) != (logits.shape[0],):
        message = _("target must have shape (N,) = ({n},), got {shape}")
        raise ValueError(message.format(n=logits.shape[0], shape=tuple(target.shape)))
    smoothing = probability("label_smoothing", label_smoothing)
    return _ChunkedCrossEntropy.apply(
        logits, target, smoothing, positive_int("chunk_rows", chunk_rows)
    )
