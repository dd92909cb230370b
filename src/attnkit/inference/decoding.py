"""Decoding with the generic encoder-decoder interface (see ``attnkit.models.seq2seq``).

Shape legend: B batch, S source length, T target length, V vocabulary size.

``greedy_decode`` translates a whole batch at once, one target step at a time
(T = 1 per decoder call, the decoder state carries everything else). A row that
emits ``<eos>`` is dropped from the batch with ``decoder.reorder_state``, so finished
sentences cost nothing. Beam search (``attnkit.inference.beam_search``) uses the same
interface and likewise computes rows for unfinished hypotheses of unfinished sentences
only.

:func:`translate` is the one decoding path from text to text: greedy or beam search,
batched by length, results in input order. ``Translator.translate``/``evaluate``, the
trainer's validation BLEU (``evaluation.translate_and_score``), the demo and the
explorer all go through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit._validate import boolean, integer, optional, positive_int, real
from attnkit.attention.recording import record_attention
from attnkit.cpu_memory import keep_large_blocks
from attnkit.i18n import _
from attnkit.inference.beam_search import BeamSearch, check_decode_inputs, check_suppress
from attnkit.inference.eval_mode import evaluating
from attnkit.inference.row_top import row_argmax
from attnkit.inference.shortlist import OutputColumns, Shortlist

__all__ = [
    "DecodeResult",
    "Hypothesis",
    "check_decode_inputs",
    "forced_eos",
    "greedy_decode",
    "translate",
]


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


@dataclass(frozen=True)
class Hypothesis:
    """The best translation of one sentence (what :func:`translate` returns per sentence)."""

    ids: list[int]  # target ids, <bos> and <eos> excluded
    text: str  # detokenized (words joined by spaces, or subword pieces decoded)
    finished: bool  # ended with <eos> (False: stopped at the step limit)


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
    suppress: Sequence[int] = (),
    force_eos: bool = False,
    shortlist: Shortlist | None = None,
) -> DecodeResult:
    """Greedy (argmax) decoding of a batch, stopping each sentence at ``<eos>``.

    Args:
        model: an ``EncoderDecoder`` (the generic interface); evaluated in eval mode,
            its previous mode is restored afterwards.
        src: source ids, right-padded; src_len: each row's valid length.
        bos_id, eos_id: the target vocabulary's ids of ``<bos>`` and ``<eos>``.
        max_len: the most target steps per sentence, ``<eos>`` included.
        return_attention: also return ``decoder.alignment()`` per sentence.
        on_step: called with the decoder after every step (the book's
            ``predict_seq2seq`` uses it to collect ``decoder.attention_weights``).
        suppress: target ids never chosen (their logits set to -inf before the argmax:
            Marian's pad, its ``bad_words_ids``).
        force_eos: a sentence still running at the last step ends with ``<eos>`` there
            (transformers' ``forced_eos_token_id``, which Marian's configs set).
        shortlist: a :class:`~attnkit.inference.shortlist.Shortlist`: the argmax runs over
            the batch's shortlisted words only (the output layer computes only theirs).

    Shape:
        src: (B, S) long; src_len: (B,); attention[i]: (steps_i, src_len_i).

    Returns:
        A :class:`DecodeResult`: per row of ``src``, its ids (``<eos>`` excluded), whether
        it finished, and its attention when asked for.
    """
    check_decode_inputs(model, src, src_len, max_len)
    bos_id = integer("bos_id", bos_id, minimum=0)
    eos_id = integer("eos_id", eos_id, minimum=0)
    boolean("return_attention", return_attention)
    if on_step is not None and not callable(on_step):
        message = _("on_step must be callable or None, got {type}")
        raise TypeError(message.format(type=type(on_step).__name__))
    suppress = check_suppress(suppress, eos_id)
    force_eos = boolean("force_eos", force_eos)
    columns = OutputColumns.of(shortlist, model, src, src_len, eos_id)
    if src.device.type == "cpu":
        keep_large_blocks()  # the logits' blocks re-used, not mapped afresh (cpu_memory)
    # Attention modules with fused kernels keep their weights only when recording.
    recording = record_attention(model, on=True) if return_attention else nullcontext()
    with evaluating(model), recording, columns.restricting(model.decoder):
        return _greedy(
            model, src, src_len, bos_id, eos_id, max_len, return_attention, on_step,
            columns.positions(suppress), force_eos, columns,
        )  # fmt: skip


def _greedy(
    model, src, src_len, bos_id, eos_id, max_len, return_attention, on_step, suppress, force_eos,
    columns,
):  # fmt: skip
    B, S = src.shape
    device = src.device
    decoder = model.decoder
    state = decoder.init_state(model.encoder(src, src_len), src_len)
    out = torch.full((B, max_len), eos_id, dtype=torch.long, device=device)  # (B, T)
    steps = torch.full((B,), max_len, dtype=torch.long)  # decoded steps per row
    attn = torch.zeros(B, max_len, S, device=device) if return_attention else None  # (B, T, S)
    alive = torch.arange(B, device=device)  # original row of each live row
    y = torch.full((B, 1), bos_id, dtype=torch.long, device=device)  # (B', 1)
    banned = torch.tensor(suppress, dtype=torch.long, device=device) if suppress else None
    for t in range(max_len):
        logits, state = decoder(y, state)  # (B', 1, V)
        if on_step is not None:
            on_step(decoder)
        last = logits[:, -1]  # (B', V): this step's own logits, filled in place
        if banned is not None:
            last.index_fill_(-1, banned, float("-inf"))
        y = columns.ids(row_argmax(last)[:, None])  # (B', 1) target ids
        if force_eos and t == max_len - 1:
            y = torch.full_like(y, eos_id)
        out[alive, t] = y[:, 0]
        if attn is not None:
            a = decoder.alignment()
            if a is None:
                message = _("{type} records no attention to return")
                raise ValueError(message.format(type=type(decoder).__name__))
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


def forced_eos(data) -> bool:
    """Whether decoding with ``data`` forces ``<eos>`` at the last step: its own
    ``forced_eos``, else its tokenizer's (an imported Marian model's), else False."""
    value = getattr(data, "forced_eos", None)
    if value is None:
        value = getattr(getattr(data, "tokenizer", None), "forced_eos", False)
    return value is True


def translate(
    model: nn.Module,
    data,
    sentences: Sequence[str],
    *,
    beam: int | None = None,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    batch_size: int = 256,
    shortlist: Shortlist | None = None,
) -> list[Hypothesis]:
    """Translate source sentences: greedy decoding or beam search, ``batch_size`` at a time.

    Sentences are decoded in order of length (less padding) and returned in input order;
    the results do not depend on ``batch_size``. The sentences are not checked beyond
    what ``data.encode_source`` refuses (see ``Translator.check`` for the input limits).

    Args:
        model: an ``EncoderDecoder``, on the device its inputs are sent to; decoded in
            eval mode, its mode restored afterwards.
        data: a ``TranslationData`` (or anything with ``encode_source``, ``detokenize``,
            ``tgt_vocab`` and, when ``max_len`` is None, ``max_len``): it preprocesses and
            encodes the sentences and turns ids back into text (words joined by spaces,
            or subword pieces decoded). Its ``special_ids`` (``bos``, ``eos``) and
            ``suppress_ids`` are used when it has them; otherwise the target vocabulary's
            ``<bos>`` and ``<eos>``, nothing suppressed. A tokenizer whose ``forced_eos``
            is true (an imported Marian model's) ends a sentence that reaches ``max_len``
            with ``<eos>``, as transformers' ``forced_eos_token_id`` does.
        sentences: the source sentences (a list of str, not one str).
        beam: None for greedy decoding, else the beam size of beam search (1 is beam
            search with one hypothesis, which gives greedy's tokens).
        length_penalty: beam search's GNMT alpha (0: rank by raw log-probability); greedy
            decoding ignores it.
        max_len: the most decoder steps per sentence, ``<eos>`` included: the most new
            tokens, as transformers' ``max_new_tokens`` (default ``data.max_len + 2``).
        batch_size: sentences per decoding batch.
        shortlist: a :class:`~attnkit.inference.shortlist.Shortlist` (None: every target
            word): each batch decodes over its shortlisted words only, so the results
            depend a little on ``batch_size`` (a batch's words are its sentences' union).

    Shape:
        each batch is encoded to src (B, S) long and src_len (B,), B <= ``batch_size``.

    Returns:
        One :class:`Hypothesis` per sentence, in input order: its ids (``<bos>``/``<eos>``
        excluded), its text, and whether it ended with ``<eos>``.

    Raises:
        TypeError / ValueError: an argument of the wrong type / value; a sentence that
            ``data.encode_source`` refuses (empty, too long) is its ValueError.
    """
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        message = _("sentences must be a list of str, not a single {type}")
        raise TypeError(message.format(type=type(sentences).__name__))
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            message = _("sentences must be a list of str, got {type} at {i}")
            raise TypeError(message.format(type=type(sentence).__name__, i=i))
    beam = optional(positive_int, "beam", beam)
    length_penalty = real("length_penalty", length_penalty, at_least=0.0)
    max_len = optional(positive_int, "max_len", max_len)
    batch_size = positive_int("batch_size", batch_size)
    if not isinstance(model, nn.Module) or not all(
        hasattr(model, p) for p in ("encoder", "decoder")
    ):
        message = _("model must be an attnkit EncoderDecoder, got {type}")
        raise TypeError(message.format(type=type(model).__name__))
    needs = ("encode_source", "detokenize", "tgt_vocab", *(("max_len",) if max_len is None else ()))
    missing = [n for n in needs if not hasattr(data, n)]
    if missing:
        message = _("data must be a TranslationData, got {type} (no {missing})")
        raise TypeError(message.format(type=type(data).__name__, missing=", ".join(missing)))
    steps = data.max_len + 2 if max_len is None else max_len
    specials = getattr(data, "special_ids", None)
    if specials is not None:
        bos, eos = specials["bos"], specials["eos"]
    else:
        bos, eos = data.tgt_vocab["<bos>"], data.tgt_vocab["<eos>"]
    suppress = tuple(getattr(data, "suppress_ids", ()))
    force = forced_eos(data)
    search = (
        None
        if beam is None
        else BeamSearch(
            beam, steps, bos, eos, length_penalty,
            suppress=suppress, force_eos=force, shortlist=shortlist,
        )
    )  # fmt: skip
    device = next(model.parameters()).device
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].split()))
    found: list[Hypothesis | None] = [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        src, src_len = data.encode_source([sentences[i] for i in idx])  # (B, S), (B,)
        src, src_len = src.to(device), src_len.to(device)
        if search is None:
            res = greedy_decode(
                model, src, src_len, bos_id=bos, eos_id=eos, max_len=steps, suppress=suppress,
                force_eos=force, shortlist=shortlist,
            )  # fmt: skip
            best = zip(res.tokens, res.finished)
        else:
            best = ((h[0].tokens, h[0].finished) for h in search(model, src, src_len))
        for i, (ids, finished) in zip(idx, best):
            ids = list(ids)
            found[i] = Hypothesis(ids, data.detokenize(ids), bool(finished))
    return found  # type: ignore[return-value]
