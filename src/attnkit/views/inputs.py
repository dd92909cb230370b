"""What the views draw: attention maps of any source as a list of :class:`Panel`.

A panel is one kind of attention (encoder self, decoder self, cross, a language model's
causal self-attention, or any tensor) with its token lists: ``weights`` (L, H, Q, K), Q
query tokens (rows), K key tokens (columns). :func:`panels_from` turns every input
:func:`attnkit.show_attention` takes into panels, checking shapes, token lists and values
at the boundary (a ``TypeError`` or ``ValueError`` naming the argument).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnkit.i18n import N_, _
from attnkit.inference.attention_maps import AttentionMaps
from attnkit.views.text import Message

__all__ = ["LMMaps", "Panel", "as_weights", "check_tokens", "panels_from"]

ROWS, COLUMNS = N_("rows (queries)"), N_("columns (keys)")  # what a token list labels


@dataclass(frozen=True)
class Panel:
    """One kind of attention: ``weights`` (L, H, Q, K) float32 on the CPU, rows labelled by
    ``queries`` (Q), columns by ``keys`` (K); ``qname``/``kname`` say what a row and a column
    are ("query"/"key", "target"/"source"). Written in English; a view shows them in the
    language in force (:func:`attnkit.views.text.shown`)."""

    key: str
    title: str
    queries: list[str]
    keys: list[str]
    weights: Tensor
    qname: str = N_("query")
    kname: str = N_("key")


@dataclass
class LMMaps:
    """A language model's attention over one token sequence: ``attention`` (L, H, K, K),
    causal (row i attends to positions <= i), ``tokens`` (K), the first ``prompt_length``
    of them the prompt (0: not said)."""

    tokens: list[str]
    attention: Tensor
    prompt_length: int = 0


def as_weights(name: str, value: object, queries: object = None) -> Tensor:
    """``value`` (a tensor or array of 2 to 4 dims: (Q, K), (H, Q, K) or (L, H, Q, K)) as a
    float32 CPU tensor (L, H, Q, K); non-empty, finite and >= 0, or a clear error. A row
    that is NaN for every key (a softmax over a fully masked row) is named, with its query
    token from ``queries`` (the row tokens, when they are Q strings) and the cause."""
    kind = type(value).__name__
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(
            _("{name} must be a tensor of attention weights, got {type}").format(
                name=name, type=kind
            )
        )
    try:
        w = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(
            _("{name} must be a tensor of attention weights, got {type}: {error}").format(
                name=name, type=kind, error=e
            )
        ) from None
    if not (w.is_floating_point() or w.dtype in (torch.uint8, torch.int32, torch.int64)):
        raise TypeError(
            _("{name} must hold real numbers, got {dtype}").format(name=name, dtype=w.dtype)
        )
    if not 2 <= w.dim() <= 4:
        raise ValueError(
            _("{name} must be (Q, K), (H, Q, K) or (L, H, Q, K): 2 to 4 dims, got shape {shape}")
            .format(name=name, shape=tuple(w.shape))
        )  # fmt: skip
    if w.numel() == 0:
        raise ValueError(
            _("{name} is empty: shape {shape} holds no weights").format(
                name=name, shape=tuple(w.shape)
            )
        )
    w = w.detach().to("cpu", torch.float32)
    while w.dim() < 4:
        w = w.unsqueeze(0)
    bad = ~torch.isfinite(w)
    if bad.any():
        _nan_rows(name, w, queries)
        at = [int(i) for i in bad.nonzero()[0]]
        raise ValueError(
            _("{name} holds {n} non-finite weights (NaN or inf), the first at layer {layer}, "
              "head {head}, query {query}, key {key}").format(
                name=name, n=int(bad.sum()), layer=at[0], head=at[1], query=at[2], key=at[3])
        )  # fmt: skip
    if float(w.min()) < 0:
        raise ValueError(_("{name} holds negative weights (min {min:.4g}); attention weights "
                           "are >= 0").format(name=name, min=float(w.min())))  # fmt: skip
    return w


def _nan_rows(name: str, w: Tensor, queries: object) -> None:
    """The error for weights with a row that is NaN for every key, if there is one."""
    rows = torch.isnan(w).all(-1)  # (L, H, Q)
    if not rows.any():
        return
    layer, head, query = (int(i) for i in rows.nonzero()[0])
    named = isinstance(queries, Sequence) and len(queries) == w.shape[2]
    token = ""
    if named and isinstance(queries[query], str):  # the row's token, quoted
        token = _(" “{token}”").format(token=queries[query])
    raise ValueError(
        _("{name}: query row {query}{token} at layer {layer}, head {head} is NaN for every key "
          "({n} such rows). A fully masked query row does that: when every key of a row is "
          "masked (all keys padded, or the query itself is padding), a softmax over scores of "
          "-inf divides 0 by 0. Mask with a large negative score (d2l's masked_softmax uses "
          "-1e6) instead of -inf, or leave the padded rows out of the maps").format(
            name=name, query=query, token=token, layer=layer, head=head, n=int(rows.sum()))
    )  # fmt: skip


def check_tokens(name: str, tokens: object, size: int, axis: str) -> list[str]:
    """``tokens`` as a list of ``size`` strings (``None``: their positions ``0 .. size-1``);
    ``axis`` (a catalog message) names what the maps have ``size`` of."""
    if tokens is None:
        return [str(i) for i in range(size)]
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(
            _("{name} must be a list of strings, got {type}").format(
                name=name, type=type(tokens).__name__
            )
        )
    bad = [i for i, t in enumerate(tokens) if not isinstance(t, str)]
    if bad:
        item = tokens[bad[0]]
        raise TypeError(
            _("{name} must be a list of strings; item {index} is {type} ({value})").format(
                name=name, index=bad[0], type=type(item).__name__, value=repr(item)
            )
        )
    if len(tokens) != size:
        raise ValueError(
            _("{name} has {n} tokens but the maps have {size} {axis}").format(
                name=name, n=len(tokens), size=size, axis=_(axis)
            )
        )
    return list(tokens)


def _translator_panels(maps: AttentionMaps) -> list[Panel]:
    kinds = [
        ("encoder_self", N_("encoder self-attention"), maps.encoder_self,
         "source", "source", N_("query"), N_("key")),
        ("decoder_self", N_("decoder self-attention"), maps.decoder_self,
         "decoder_inputs", "decoder_inputs", N_("query"), N_("key")),
        ("cross", N_("encoder-decoder attention") if maps.encoder_self is not None
         else N_("alignment (Bahdanau)"), maps.cross, "outputs", "source", N_("target"),
         N_("source")),
    ]  # fmt: skip
    panels = []
    for key, title, w, rows, cols, qname, kname in kinds:
        if w is None:
            continue
        w = as_weights(f"maps.{key}", w, getattr(maps, rows))
        queries = check_tokens(f"maps.{rows}", getattr(maps, rows), w.shape[2], ROWS)
        keys = check_tokens(f"maps.{cols}", getattr(maps, cols), w.shape[3], COLUMNS)
        panels.append(Panel(key, title, queries, keys, w, qname, kname))
    if not panels:
        raise ValueError(_("maps holds no attention weights to draw (encoder_self, decoder_self "
                           "and cross are all None)"))  # fmt: skip
    return panels


def _generation_panel(maps: object) -> Panel:
    """The explorer's continuation (``prompt_tokens`` P, ``new_tokens`` N, ``attention``
    (L, H, N, K = P + N - 1)): row j is the attention that chose new token j."""
    w = as_weights("maps.attention", maps.attention, maps.new_tokens)
    prompt, new = list(maps.prompt_tokens), list(maps.new_tokens)
    context = prompt + new[:-1]
    queries = check_tokens("maps.new_tokens", new, w.shape[2], N_("rows (new tokens)"))
    keys = check_tokens("maps.prompt_tokens + new_tokens[:-1]", context, w.shape[3],
                        N_("columns (context positions)"))  # fmt: skip
    return Panel("lm", N_("each new token's attention over its context"), queries, keys, w,
                 N_("new token"), N_("context token"))  # fmt: skip


def panels_from(
    maps: object,
    tokens: Sequence[str] | None = None,
    query_tokens: Sequence[str] | None = None,
    title: str | None = None,
) -> list[Panel]:
    """Panels of ``maps``: an :class:`~attnkit.inference.attention_maps.AttentionMaps` (a
    translator), :class:`LMMaps` (a language model), a generation result with
    ``prompt_tokens``, ``new_tokens`` and ``attention`` (the explorer's), a list of panels,
    or a tensor (Q, K), (H, Q, K) or (L, H, Q, K) with ``tokens`` (K keys; also the queries
    when Q == K and ``query_tokens`` is None) and ``query_tokens`` (Q)."""
    if isinstance(maps, AttentionMaps):
        _no_tokens(tokens, query_tokens, "AttentionMaps")
        return _translator_panels(maps)
    if isinstance(maps, LMMaps):
        _no_tokens(tokens, query_tokens, "LMMaps")
        w = as_weights("maps.attention", maps.attention, maps.tokens)
        if w.shape[2] != w.shape[3]:
            raise ValueError(
                _("maps.attention must be square (L, H, K, K), got {shape}").format(
                    shape=tuple(w.shape)
                )
            )
        toks = check_tokens("maps.tokens", maps.tokens, w.shape[3], N_("positions"))
        name = N_("causal self-attention")
        if 0 < maps.prompt_length < len(toks):  # say where the continuation starts
            name = Message(N_("causal self-attention (prompt: the first {n} tokens)"),
                           n=maps.prompt_length)  # fmt: skip
        return [Panel("lm", title or name, toks, toks, w)]
    if all(hasattr(maps, a) for a in ("prompt_tokens", "new_tokens", "attention")):
        _no_tokens(tokens, query_tokens, N_("a generation result"))
        if maps.attention is None:
            raise ValueError(
                _("maps.attention is None: a recurrent model has no attention to draw")
            )
        return [_generation_panel(maps)]
    if isinstance(maps, (list, tuple)) and maps and all(isinstance(p, Panel) for p in maps):
        _no_tokens(tokens, query_tokens, N_("a Panel"))
        return [_checked(p, f"maps[{i}]") for i, p in enumerate(maps)]
    w = as_weights("maps", maps, tokens if query_tokens is None else query_tokens)
    keys = check_tokens("tokens", tokens, w.shape[3], N_("keys (columns)"))
    if query_tokens is None and tokens is not None and w.shape[2] != w.shape[3]:
        raise ValueError(
            _("maps has {q} queries and {k} keys: pass query_tokens ({q} labels for the rows) "
              "as well as tokens (the columns)").format(q=w.shape[2], k=w.shape[3])
        )  # fmt: skip
    queries = keys if query_tokens is None and w.shape[2] == w.shape[3] else check_tokens(
        "query_tokens", query_tokens, w.shape[2], N_("queries (rows)"))  # fmt: skip
    return [Panel("attention", title or N_("attention"), queries, keys, w)]


def _checked(panel: Panel, name: str) -> Panel:
    w = as_weights(f"{name}.weights", panel.weights, panel.queries)
    queries = check_tokens(f"{name}.queries", panel.queries, w.shape[2], ROWS)
    keys = check_tokens(f"{name}.keys", panel.keys, w.shape[3], COLUMNS)
    return Panel(panel.key, panel.title, queries, keys, w, panel.qname, panel.kname)


def _no_tokens(tokens, query_tokens, what: str) -> None:
    if tokens is not None or query_tokens is not None:
        raise TypeError(
            _("tokens and query_tokens are for tensors; {what} carries its own tokens").format(
                what=_(what)
            )
        )


def total_weights(panels: list[Panel]) -> int:
    return sum(math.prod(p.weights.shape) for p in panels)
