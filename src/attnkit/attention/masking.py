"""Masks and masked softmax.

Shape legend: B batch, Q queries, K keys.

Convention, everywhere in attnkit: a boolean mask is ``True`` where a query may
attend to a key. Scores at masked positions are filled with the dtype's lowest
finite value (``torch.finfo(dtype).min``, never -1e6, which overflows float16),
and a row with no key to attend gets all-zero weights, never NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit.i18n import _

__all__ = [
    "as_mask",
    "attention_mask",
    "causal_mask",
    "check_valid_lens",
    "lengths_to_mask",
    "masked_softmax",
    "sequence_mask",
]


def check_valid_lens(
    valid_lens: Tensor,
    batch: int,
    num_queries: int,
    num_keys: int,
    name: str = "valid_lens",
    per_query: bool = True,
) -> None:
    """Raise a clear error unless ``valid_lens`` is (B,) or (B, Q) integers in [0, K].

    With ``per_query=False`` only key lengths (B,) are accepted.
    """
    if not isinstance(valid_lens, Tensor):
        message = _("{name} must be a torch.Tensor of integers, got {type}")
        raise TypeError(message.format(name=name, type=type(valid_lens).__name__))
    if valid_lens.dtype == torch.bool or valid_lens.is_floating_point() or valid_lens.is_complex():
        hint = _("; a boolean mask (True = attend) is accepted as valid_lens itself")
        message = _("{name} must have an integer dtype (lengths), got {dtype}{hint}")
        hint = hint if valid_lens.dtype == torch.bool and name == "valid_lens" else ""
        raise TypeError(message.format(name=name, dtype=valid_lens.dtype, hint=hint))
    if valid_lens.dim() == 1:
        expected: tuple[int, ...] = (batch,)
    elif valid_lens.dim() == 2:
        expected = (batch, num_queries)
    else:
        expected = ()
    if not per_query and tuple(valid_lens.shape) != (batch,):
        message = _("{name} must have shape (B,) = ({batch},), got {shape}")
        raise ValueError(message.format(name=name, batch=batch, shape=tuple(valid_lens.shape)))
    if tuple(valid_lens.shape) != expected:
        message = _(
            "{name} must have shape (B,) = ({batch},) or (B, Q) = ({batch}, "
            "{num_queries}), got {shape}"
        )
        raise ValueError(
            message.format(
                name=name, batch=batch, num_queries=num_queries, shape=tuple(valid_lens.shape)
            )
        )
    if valid_lens.numel():
        lo, hi = torch.stack(torch.aminmax(valid_lens)).tolist()  # one host sync
        if lo < 0 or hi > num_keys:
            message = _(
                "{name} must lie in [0, {num_keys}] (the number of keys), got values "
                "in [{lo}, {hi}]"
            )
            raise ValueError(message.format(name=name, num_keys=num_keys, lo=lo, hi=hi))


def lengths_to_mask(valid_lens: Tensor, num_keys: int) -> Tensor:
    """Lengths (...) -> boolean mask (..., K), True for the first ``valid_lens`` keys."""
    positions = torch.arange(num_keys, device=valid_lens.device)
    return positions < valid_lens.unsqueeze(-1)


def sequence_mask(X: Tensor, valid_len: Tensor, value: float = 0) -> Tensor:
    """Return a copy of ``X`` (B, T, ...) with positions ``t >= valid_len[b]`` set to ``value``.

    Unlike the book's version this does not modify ``X`` in place.
    """
    if X.dim() < 2:
        message = _("X must have at least 2 dims (B, T, ...), got shape {shape}")
        raise ValueError(message.format(shape=tuple(X.shape)))
    B, T = X.shape[:2]
    if not isinstance(valid_len, Tensor):
        valid_len = torch.as_tensor(valid_len, device=X.device)
    check_valid_lens(valid_len.reshape(-1), B, 1, T, name="valid_len")
    keep = lengths_to_mask(valid_len.reshape(-1).to(X.device), T)  # (B, T)
    keep = keep.reshape(B, T, *([1] * (X.dim() - 2)))
    return X.masked_fill(~keep, value)


def causal_mask(num_queries: int, num_keys: int | None = None, device=None) -> Tensor:
    """Boolean (Q, K) mask where query i attends keys j <= i + (K - Q).

    With ``K > Q`` the queries are the last Q positions of a K-long sequence, as in
    incremental decoding with a key/value cache.
    """
    num_keys = num_queries if num_keys is None else num_keys
    if num_queries < 0 or num_keys < num_queries:
        message = _(
            "causal_mask needs 0 <= num_queries <= num_keys, got {num_queries} and {num_keys}"
        )
        raise ValueError(message.format(num_queries=num_queries, num_keys=num_keys))
    q = torch.arange(num_queries, device=device).unsqueeze(-1) + (num_keys - num_queries)
    return torch.arange(num_keys, device=device) <= q


def attention_mask(
    valid_lens: Tensor | None,
    batch: int,
    num_queries: int,
    num_keys: int,
    *,
    causal: bool = False,
    num_heads: int | None = None,
    per_query: bool = True,
    device=None,
    name: str = "valid_lens",
) -> Tensor | None:
    """The one mask builder: which keys may each query attend (bool, True = attend)?

    Args:
        valid_lens: None; key lengths (B,) shared by every query; lengths (B, Q) per query
            (refused with ``per_query=False``); or a boolean mask broadcastable to (B, Q, K),
            or to (B, H, Q, K) when ``num_heads`` is given.
        causal: query i, the i-th of the last Q of K positions, attends keys
            j <= i + (K - Q) (with K > Q: a cached decoding step).
        num_heads: give the mask a heads axis, to broadcast against (B, H, Q, K) scores.

    Returns:
        None when nothing is masked; otherwise a bool mask broadcastable to (B, Q, K)
        ((B, 1, K) for key lengths), or to (B, H, Q, K) with ``num_heads``
        ((B, 1, 1, K), (B, 1, Q, K)). Checked: wrong shapes, dtypes and lengths outside
        [0, K] raise errors naming ``name``.
    """
    mask = None
    if valid_lens is not None and not isinstance(valid_lens, Tensor):
        message = _(
            "{name} must be None, a tensor of lengths (B,) or (B, Q), or a boolean "
            "mask (a torch.Tensor), got {type}"
        )
        raise TypeError(message.format(name=name, type=type(valid_lens).__name__))
    target = (batch, num_queries, num_keys)
    if num_heads is not None:
        target = (batch, num_heads, num_queries, num_keys)
    if valid_lens is not None and valid_lens.dtype == torch.bool:
        mask = valid_lens if device is None else valid_lens.to(device)
        if num_heads is not None and mask.dim() == 3:  # (B, Q, K) -> (B, 1, Q, K)
            mask = mask.unsqueeze(1)
        if not _broadcastable(mask.shape, target):
            message = _(
                "boolean mask {name} of shape {shape} does not broadcast to (B, Q, K) = {expected}"
            )
            raise ValueError(
                message.format(
                    name=name,
                    shape=tuple(valid_lens.shape),
                    expected=(batch, num_queries, num_keys),
                )
            )
    elif valid_lens is not None:
        check_valid_lens(valid_lens, batch, num_queries, num_keys, name, per_query)
        lens = valid_lens if device is None else valid_lens.to(device)
        # (B,) -> (B, 1, K) shared by every query; (B, Q) -> (B, Q, K)
        mask = lengths_to_mask(lens.unsqueeze(-1) if lens.dim() == 1 else lens, num_keys)
        if num_heads is not None:
            mask = mask.unsqueeze(1)  # the heads axis: (B, 1, 1|Q, K)
    if causal:
        where = device if device is not None else getattr(mask, "device", None)
        tri = causal_mask(num_queries, num_keys, device=where)  # (Q, K)
        mask = tri if mask is None else mask & tri
    return mask


def _broadcastable(shape: tuple[int, ...], other: tuple[int, ...]) -> bool:
    """Whether two shapes broadcast together (``torch.broadcast_shapes``' rule, without its
    Python cost at every decoding step): aligned from the right, equal sizes or a 1."""
    return all(a == b or a == 1 or b == 1 for a, b in zip(reversed(shape), reversed(other)))


def as_mask(scores_shape: tuple[int, ...], valid_lens: Tensor | None, device=None) -> Tensor | None:
    """valid_lens (B,), (B, Q) or a bool mask broadcastable to the scores -> bool mask or None.

    ``attention_mask`` for scores of shape (B, Q, K) (or any shape, for a bool mask):
    lengths give a (B, 1, K) mask (shared by every query) or a (B, Q, K) mask.
    """
    if valid_lens is None:
        return None
    shape = tuple(scores_shape)
    if isinstance(valid_lens, Tensor) and valid_lens.dtype == torch.bool:
        if not _broadcastable(valid_lens.shape, shape):
            message = _(
                "boolean mask of shape {shape} does not broadcast to scores of shape {scores_shape}"
            )
            raise ValueError(message.format(shape=tuple(valid_lens.shape), scores_shape=shape))
        return valid_lens.to(device) if device is not None else valid_lens
    if len(shape) != 3:
        message = _(
            "scores must be (B, Q, K) when valid_lens are lengths, got shape {scores_shape}"
        )
        raise ValueError(message.format(scores_shape=shape))
    return attention_mask(valid_lens, *shape, device=device)


def masked_softmax(X: Tensor, valid_lens: Tensor | None = None) -> Tensor:
    """Softmax over the last axis of ``X`` that ignores masked keys.

    Args:
        X: scores, (B, Q, K); any (..., K) when ``valid_lens`` is a boolean mask.
        valid_lens: None; key lengths (B,) shared by every query or (B, Q) per query;
            or a boolean mask broadcastable to ``X`` (True = attend).

    Returns:
        Weights shaped like ``X``; masked positions are exactly 0 and a row with
        no valid key is all zeros.
    """
    if not isinstance(X, Tensor) or not X.is_floating_point():
        message = _("X must be a floating-point tensor, got {got}")
        raise TypeError(message.format(got=getattr(X, "dtype", type(X))))
    mask = as_mask(X.shape, valid_lens, X.device)
    if mask is None:
        return torch.softmax(X, dim=-1)
    X = X.masked_fill(~mask, torch.finfo(X.dtype).min)
    # A fully masked row softmaxes to uniform weights; the second fill zeroes it.
    return torch.softmax(X, dim=-1).masked_fill(~mask, 0.0)
