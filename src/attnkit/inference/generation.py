"""Text from a trained language model: the book's RNN LMs and the decoder-only Transformer.

Shape legend: B prompts, P the longest prompt (tokens), V vocabulary.

    generate(model, "time traveller", vocab=vocab, max_new_tokens=50)          # greedy
    generate(model, ["the time", "it was"], vocab=vocab, max_new_tokens=50,
             temperature=0.8, top_k=20, top_p=0.9, seed=0, stream=on_piece)  # sampled
    generate_ids(model, [[3, 5, 9], [4]], max_new_tokens=20)                  # ids in, ids out

- **Greedy** (``temperature=0``, the default; the book's ``predict_ch8``) or **sampled**
  (``temperature``, ``top_k``, ``top_p``, ``seed``): ``attnkit.inference.sampling``.
- **Batches**: prompts of different lengths are **left-padded** to one length P, so every
  row's next token lands in the same column. A Transformer masks the padding and counts
  each row's positions from its own first token (``DecoderLM``'s ``key_mask``); an RNN
  keeps its begin state through the padding. A row's result is the one it gets alone, and
  cached decoding gives the full pass's logits.
- **The Transformer** prefills its key/value cache with the prompts in one pass, then feeds
  one token per step. Its context is ``context_length`` positions: a longer prompt is an
  error for ``sinusoidal``/``learned`` positions, and is cut to its last
  ``context_length`` tokens, with a ``PromptCutWarning``, for ``rope``/``alibi``/``none``.
  Past the context, each new token sees the last ``context_length`` tokens (a full pass
  over that window, as nanoGPT); with ``stop_at_context=True`` (``attnkit lm generate``) a
  model whose positions stop there (``learned``, ``sinusoidal``: GPT-2's) stops instead,
  with a ``ContextFullWarning``, as transformers' ``generate`` cannot go past it either.
- **End of text**: with ``eos_id`` (GPT-2's ``<|endoftext|>``), a row that emits it is done:
  its ids end with it (as transformers' ``generate``), its text without it.
- **Streaming**: ``stream(row, piece)`` is called with each new token's text (``generate``)
  or id (``generate_ids``) as soon as it is chosen: ``stream=lambda _, s: print(s, end="",
  flush=True)`` prints a single prompt's continuation as it comes. A subword tokenizer's
  text is the decoded continuation's growth; a byte-level piece (GPT-2's) that ends inside
  a character waits for the tokens that complete it (up to 3; at the end it is sent as it
  is), so a U+FFFD is not sent and then replaced.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import torch
from torch import Tensor, nn

from attnkit._validate import boolean, non_negative_int
from attnkit.attention.positional import EXTRAPOLATING
from attnkit.cpu_memory import keep_large_blocks
from attnkit.data.text import Vocab
from attnkit.i18n import _
from attnkit.inference.eval_mode import evaluating
from attnkit.inference.sampling import token_picker
from attnkit.inference.text_codec import TextCodec, VocabCodec, _TokenizerCodec

__all__ = [
    "ContextFullWarning",
    "PromptCutWarning",
    "TextCodec",
    "VocabCodec",
    "generate",
    "generate_ids",
    "model_device",
]


class PromptCutWarning(UserWarning):
    """A prompt longer than the model's context was cut to its last tokens."""


class ContextFullWarning(UserWarning):
    """Generation stopped at the model's context (positions that have no place past it)."""


def model_device(model, device: torch.device | str | None = None) -> torch.device:
    """``device`` if given, else the device of the model's first parameter (a module's or
    a scratch model's ``params``), else the CPU."""
    if device is not None:
        return torch.device(device)
    params = list(model.parameters()) if isinstance(model, nn.Module) else list(model.params)
    return params[0].device if params else torch.device("cpu")


# ----------------------------------------------------------------------------- the loops


def _left_pad(rows: list[list[int]], device) -> tuple[Tensor, Tensor | None]:
    """Rows of ids -> (B, P) ids left-padded with 0, and the (B, P) mask of real tokens
    (None when every row is P long)."""
    P = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), P, dtype=torch.long)
    mask = torch.zeros(len(rows), P, dtype=torch.bool)
    for b, row in enumerate(rows):
        ids[b, P - len(row) :] = torch.tensor(row, dtype=torch.long)
        mask[b, P - len(row) :] = True
    return ids.to(device), None if bool(mask.all()) else mask.to(device)


def _transformer_steps(model, rows, max_new: int, pick, device, use_cache: bool):
    """Yield the next ids (B,) of a ``DecoderLM``, step by step."""
    ctx = model.context_length
    prompt, prompt_mask = _left_pad(rows, device)  # (B, P), (B, P) or None
    B, P = prompt.shape
    seq = prompt.new_zeros(B, P + max_new)  # (B, P + N): the prompts, then each new id
    seq[:, :P] = prompt
    mask = None  # (B, P + N): real tokens (the new ones all are)
    if prompt_mask is not None:
        mask = torch.ones(B, P + max_new, dtype=torch.bool, device=device)
        mask[:, :P] = prompt_mask
    cache = model.new_cache(capacity=min(P + max_new, ctx)) if use_cache else None
    logits = model(prompt, cache=cache, key_mask=prompt_mask, last_only=True)[:, -1]  # (B, V)
    n = P  # positions filled
    for step in range(max_new):
        nxt = pick(logits)  # (B,) on the CPU
        yield nxt
        if step == max_new - 1:
            break
        seq[:, n] = nxt.to(device)
        n += 1
        if cache is not None and n <= ctx:  # one new position over the cache
            held = None if mask is None else mask[:, :n]
            logits = model(seq[:, n - 1 : n], cache=cache, key_mask=held)[:, -1]
        else:  # no cache, or past the context: a full pass over the last ctx tokens
            cache = None
            start = max(0, n - ctx)
            window = None if mask is None else mask[:, start:n]
            if window is not None and bool(window.all()):
                window = None
            logits = model(seq[:, start:n], key_mask=window, last_only=True)[:, -1]


def _rnn_steps(model, rows, max_new: int, pick, device):
    """Yield the next ids (B,) of a recurrent LM: the prompts fed one position at a time
    (the book's warm-up), the state held at its start through the padding."""
    B = len(rows)
    ids, mask = _left_pad(rows, device)  # (B, P), (B, P) or None
    state = model.begin_state(batch_size=B, device=device)
    axes = None if mask is None else _batch_axes(model, B, device)
    logits = None
    for t in range(ids.shape[1]):
        logits, new = model(ids[:, t : t + 1], state)  # (B, V)
        state = new if mask is None else _where(mask[:, t], new, state, iter(axes))
    for step in range(max_new):
        nxt = pick(logits)
        yield nxt
        if step < max_new - 1:
            logits, state = model(nxt.to(device)[:, None], state)  # (B, V)


def _batch_axes(model, B: int, device) -> list[int]:
    """The batch axis of each tensor of the model's state (where begin_state(B) and
    begin_state(B + 1) differ)."""
    a = _leaves(model.begin_state(batch_size=B, device=device))
    b = _leaves(model.begin_state(batch_size=B + 1, device=device))
    return [
        next(i for i, (m, n) in enumerate(zip(x.shape, y.shape)) if m != n) for x, y in zip(a, b)
    ]


def _leaves(state) -> list[Tensor]:
    if isinstance(state, Tensor):
        return [state]
    return [leaf for part in state for leaf in _leaves(part)]


def _where(keep: Tensor, new, old, axes):
    """The state ``new`` in the rows ``keep`` (B,), ``old`` elsewhere (same structure)."""
    if isinstance(new, Tensor):
        shape = [1] * new.dim()
        axis = next(axes)
        shape[axis] = keep.shape[0]
        return torch.where(keep.view(shape), new, old)
    return type(new)(_where(keep, n, o, axes) for n, o in zip(new, old, strict=True))


# ----------------------------------------------------------------------------- the API


@torch.no_grad()
def generate_ids(
    model,
    prompts: Sequence[Sequence[int]] | Sequence[int] | Tensor,
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    stream: Callable[[int, int], Any] | None = None,
    use_cache: bool = True,
    eos_id: int | Sequence[int] | None = None,
    stop_at_context: bool = False,
) -> list[list[int]]:
    """Continue token-id prompts with ``max_new_tokens`` tokens each.

    Args:
        model: a ``DecoderLM`` (anything with ``new_cache`` and ``context_length``) or a
            recurrent LM (``begin_state``; ``model(X (B, 1), state) -> (logits (B, V),
            state)``: ``RNNLM``, the book's scratch models).
        prompts: one prompt (ids) or several (a list of id lists, or a (B, P) tensor).
        max_new_tokens: tokens to add to each prompt (>= 0).
        temperature: 0 for greedy; > 0 to sample from softmax(logits / temperature).
        top_k, top_p: sampling restricted to the k most likely tokens, then to the
            smallest set of most likely tokens with mass >= top_p (``next_token_probs``).
        seed: seeds a generator of its own (repeatable samples); or pass ``generator``.
        device: where the model runs (default: its parameters' device).
        stream: called as ``stream(row, token_id)`` for every new token, as it comes.
        use_cache: the Transformer's key/value cache (False: a full pass per token, to
            compare; the RNN's state is its cache either way).
        eos_id: the end-of-text id (or ids): a row that emits it is done, as in
            transformers' ``generate``; None: every row gets ``max_new_tokens``.
        stop_at_context: a Transformer whose positions stop at its context (``learned``,
            ``sinusoidal``) stops a row there (a ``ContextFullWarning`` says so) instead
            of sliding its window; positions that extrapolate slide either way.

    Returns:
        The new ids of every prompt (the prompts not included), in the prompts' order:
        ``max_new_tokens`` each, fewer for a row that ended with ``eos_id`` (its last id)
        or reached the context.
    """
    rows = _id_rows(prompts)
    max_new_tokens = non_negative_int("max_new_tokens", max_new_tokens)
    pick = token_picker(temperature, top_k, top_p, seed, generator)
    boolean("use_cache", use_cache)
    if stream is not None and not callable(stream):
        message = _("stream must be callable or None, got {type}")
        raise TypeError(message.format(type=type(stream).__name__))
    ends = _eos_ids(eos_id)
    boolean("stop_at_context", stop_at_context)
    rows = _fit_context(model, rows)
    out: list[list[int]] = [[] for _ in rows]
    limits = _limits(model, rows, max_new_tokens, stop_at_context)
    if max(limits) == 0:
        _said_full(model, rows, out, limits, max_new_tokens, ends)
        return out
    device = model_device(model, device)
    if torch.device(device).type == "cpu":
        keep_large_blocks()  # the logits' blocks re-used, not mapped afresh (cpu_memory)
    done = [n == 0 for n in limits]
    with evaluating(model) if isinstance(model, nn.Module) else nullcontext():
        if hasattr(model, "new_cache"):
            steps = _transformer_steps(model, rows, max(limits), pick, device, use_cache)
        elif hasattr(model, "begin_state"):
            steps = _rnn_steps(model, rows, max(limits), pick, device)
        else:
            message = _("model must be a DecoderLM (new_cache) or a recurrent LM (begin_state), "
                        "got {type}")  # fmt: skip
            raise TypeError(message.format(type=type(model).__name__))
        for nxt in steps:
            for b, token in enumerate(nxt.tolist()):
                if done[b]:  # ended: the batch runs on for the others
                    continue
                out[b].append(token)
                if stream is not None:
                    stream(b, token)
                done[b] = token in ends or len(out[b]) == limits[b]
            if all(done):
                break
    _said_full(model, rows, out, limits, max_new_tokens, ends)
    return out


def _eos_ids(eos_id) -> frozenset[int]:
    """``eos_id`` (None, an id or ids) as a set of ids."""
    if eos_id is None:
        return frozenset()
    many = isinstance(eos_id, Sequence) and not isinstance(eos_id, str)
    return frozenset(non_negative_int("eos_id", i) for i in (eos_id if many else [eos_id]))


def _limits(model, rows, max_new: int, stop_at_context: bool) -> list[int]:
    """Each row's most new tokens: ``max_new``, or what is left of a context whose
    positions stop there."""
    ctx = getattr(model, "context_length", None)
    if not stop_at_context or ctx is None or getattr(model, "positions", None) in EXTRAPOLATING:
        return [max_new] * len(rows)
    return [max(0, min(max_new, ctx - len(r))) for r in rows]


def _said_full(model, rows, out, limits, asked: int, ends) -> None:
    """A ``ContextFullWarning`` when a row stopped at the context before ``asked`` tokens
    (not at an end-of-text id)."""
    full = [b for b, r in enumerate(out) if limits[b] < asked and len(r) == limits[b]
            and not (r and r[-1] in ends)]  # fmt: skip
    if full:
        b = full[0]
        message = _("generation stopped at the model's context_length {ctx} (positions="
                    "{positions!r} has no position past it): {new} new tokens after a prompt "
                    "of {prompt} tokens, not {asked}")  # fmt: skip
        fields = dict(ctx=model.context_length, positions=getattr(model, "positions", None),
                      new=len(out[b]), prompt=len(rows[b]), asked=asked)  # fmt: skip
        warnings.warn(message.format(**fields), ContextFullWarning, stacklevel=4)


def generate(
    model,
    prompts: str | Sequence[str],
    *,
    max_new_tokens: int,
    vocab: Vocab | None = None,
    tokenizer: TextCodec | None = None,
    token: str = "char",
    unknown: str = "error",
    stream: Callable[[int, str], Any] | None = None,
    eos_id: int | Sequence[int] | None = None,
    **options: Any,
):
    """Continue text prompts with a language model; returns each prompt and its continuation.

    Args:
        model: a ``DecoderLM`` or a recurrent LM (see ``generate_ids``).
        prompts: one prompt (a str) or several (a list of str), batched together.
        max_new_tokens: tokens to add to each prompt.
        vocab, token, unknown: the ``Vocab`` of a character (``token="char"``) or word
            ("word") model; prompt tokens outside it are an error (``unknown="unk"``:
            mapped to ``<unk>``). Or ``tokenizer``: any object with ``encode(text) -> ids``
            and ``decode(ids) -> text`` (a subword model's).
        stream: called as ``stream(row, text)`` with each new token's text as it comes.
        eos_id: the end-of-text id (or ids): a row stops there, the text without it.
        options: ``temperature``, ``top_k``, ``top_p``, ``seed``, ``generator``,
            ``device``, ``use_cache``, ``stop_at_context``: as ``generate_ids``.

    Returns:
        The prompt followed by its continuation (a str for a str prompt, else a list).

    Raises:
        TypeError, ValueError: an empty prompt, unknown tokens, temperature < 0, top_p
        outside (0, 1], top_k < 1, a prompt longer than a Transformer's context with
        sinusoidal or learned positions.
    """
    single = isinstance(prompts, str)
    texts = [prompts] if single else prompts
    if not isinstance(texts, Sequence) or not texts:
        message = _("prompts must be a str or a non-empty list of str, got {prompts!r}")
        raise TypeError(message.format(prompts=prompts))
    if (vocab is None) == (tokenizer is None):
        raise TypeError(_("generate needs the vocab=... of the model's data, or a tokenizer=..."))
    codec = VocabCodec(vocab, token, unknown) if vocab is not None else _TokenizerCodec(tokenizer)
    rows = [
        codec.encode(text, "prompt" if single else f"prompts[{i}]") for i, text in enumerate(texts)
    ]
    if stream is not None and not callable(stream):
        message = _("stream must be callable or None, got {type}")
        raise TypeError(message.format(type=type(stream).__name__))
    ends = _eos_ids(eos_id)
    on_id = None
    if stream is not None:
        done = [list(r) for r in rows]
        shown = None if isinstance(codec, VocabCodec) else [codec.decode(r) for r in rows]
        held = [0] * len(rows)  # tokens whose text waits for the end of a character

        def show(row: int) -> None:
            after = codec.decode(done[row])
            piece = after[len(shown[row]) :] if after.startswith(shown[row]) else ""
            shown[row], held[row] = after, 0
            if piece:
                stream(row, piece)

        def on_id(row: int, new_id: int) -> None:
            if new_id in ends:  # the end: no text
                return
            if isinstance(codec, VocabCodec):
                stream(row, codec.piece(new_id))
                return
            done[row].append(new_id)
            # a byte-level piece that ends inside a character (U+FFFD at the end) waits for
            # the tokens that complete it: a UTF-8 character is at most 4 bytes
            if held[row] < 3 and codec.decode(done[row]).endswith("\ufffd"):
                held[row] += 1
                return
            show(row)

    new = generate_ids(
        model, rows, max_new_tokens=max_new_tokens, stream=on_id, eos_id=eos_id, **options
    )
    new = [n[:-1] if n and n[-1] in ends else n for n in new]  # the text ends before it
    if on_id is not None and not isinstance(codec, VocabCodec):
        for row in range(len(rows)):  # what still waits: the stream ends as the text does
            if held[row]:
                show(row)
    if isinstance(codec, VocabCodec):
        out = [codec.continued(t, n) for t, n in zip(texts, new, strict=True)]
    else:
        out = [codec.continued(t, n, r) for t, n, r in zip(texts, new, rows, strict=True)]
    return out[0] if single else out


def _id_rows(prompts) -> list[list[int]]:
    """One prompt or several, as lists of ints; empty prompts refused."""
    if isinstance(prompts, Tensor):
        if prompts.is_floating_point() or prompts.dim() not in (1, 2):
            message = _("prompts must be integer ids (P,) or (B, P), got {dtype} {shape}")
            raise TypeError(message.format(dtype=prompts.dtype, shape=tuple(prompts.shape)))
        prompts = prompts.tolist()
    if not isinstance(prompts, Sequence) or isinstance(prompts, str) or not prompts:
        message = _("prompts must be token ids or a non-empty list of them, got {prompts!r}")
        raise TypeError(message.format(prompts=prompts))
    rows = [prompts] if not isinstance(prompts[0], Sequence) else list(prompts)
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, Sequence) or isinstance(row, str):
            message = _("prompts[{i}] must be a list of token ids, got {row!r}")
            raise TypeError(message.format(i=i, row=row))
        if not row:
            message = _("prompts[{i}] is empty: a prompt needs at least one token")
            raise ValueError(message.format(i=i))
        out.append([non_negative_int(f"prompts[{i}] token", t) for t in row])
    return out


def _fit_context(model, rows: list[list[int]]) -> list[list[int]]:
    """A Transformer's prompts within its context: longer ones cut (with a warning) for
    the schemes without a table of positions, refused for the others."""
    ctx = getattr(model, "context_length", None)
    if ctx is None or all(len(r) <= ctx for r in rows):
        return rows
    positions = getattr(model, "positions", None)
    longest = max(len(r) for r in rows)
    if positions not in EXTRAPOLATING:
        message = _("a prompt of {longest} tokens is longer than the model's context_length "
                    "{ctx} (positions={positions!r} has no position past it): shorten the prompt")  # fmt: skip
        raise ValueError(message.format(longest=longest, ctx=ctx, positions=positions))
    message = _("a prompt of {longest} tokens is longer than the model's context_length {ctx}: "
                "each prompt is cut to its last {ctx} tokens (positions={positions!r})")  # fmt: skip
    message = message.format(longest=longest, ctx=ctx, positions=positions)
    warnings.warn(message, PromptCutWarning, stacklevel=3)
    return [r[-ctx:] for r in rows]
