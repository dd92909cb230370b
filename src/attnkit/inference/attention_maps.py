"""Attention maps of one translated sentence, for pictures and the web explorer.

Shape legend: L layers, H heads, S source tokens (``<eos>`` included), T target
steps (``<bos>`` + the translation as decoder inputs; the translation + ``<eos>``
as outputs).

One teacher-forced pass over the decoded translation, with weights recorded,
gives every map at once: a Transformer's encoder self-attention (L, H, S, S),
decoder self-attention (L, H, T, T) and encoder-decoder attention (L, H, T, S);
a Bahdanau model's single alignment (T, S).

Subword models label the axes with their pieces (``▁the``, ``▁cat``, ``▁sleep``, ``s``).
:func:`merge_pieces` turns such maps into maps over words: a word is a piece that starts
with ``▁`` (SentencePiece's word boundary) and the pieces after it that do not; special
tokens (``<eos>``, ``<bos>``) stay words of their own. Weights are combined so that every
row stays a probability distribution: attention paid *to* a word is the **sum** over its
pieces (columns added), and the attention a word *pays* is the **mean** of its pieces'
rows (rows averaged), so each cell reads "how much this word, on average over its pieces,
looks at that word".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from attnkit.attention.recording import record_attention
from attnkit.i18n import _
from attnkit.inference.decoding import greedy_decode
from attnkit.inference.eval_mode import evaluating

__all__ = ["AttentionMaps", "attention_maps", "merge_pieces", "plot_attention_maps", "word_groups"]

WORD_BOUNDARY = "\u2581"  # SentencePiece's "▁": this piece starts a new word


@dataclass
class AttentionMaps:
    source: list[str]  # source tokens, <eos> included: the keys of cross attention
    decoder_inputs: list[str]  # <bos> + translation: the decoder's queries and self keys
    outputs: list[str]  # translation + <eos> (if finished): what each decoder row predicted
    translation: str
    encoder_self: Tensor | None = None  # (L, H, S, S)
    decoder_self: Tensor | None = None  # (L, H, T, T)
    cross: Tensor | None = None  # (L, H, T, S); a Bahdanau alignment is (1, 1, T, S)
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """Plain lists, for the JSON API."""

        def lst(t: Tensor | None):
            return None if t is None else t.tolist()

        return {
            "source": self.source,
            "decoder_inputs": self.decoder_inputs,
            "outputs": self.outputs,
            "translation": self.translation,
            "encoder_self": lst(self.encoder_self),
            "decoder_self": lst(self.decoder_self),
            "cross": lst(self.cross),
        }


def _stack(ws: list[Tensor | None]) -> Tensor | None:
    if not ws or any(w is None for w in ws):
        return None
    return torch.stack([w[0] for w in ws]).float().cpu()  # (L, H, Q, K) of sentence 0


@torch.no_grad()
def attention_maps(
    model: nn.Module,
    data,
    sentence: str,
    *,
    tokens: list[int] | None = None,
    finished: bool = True,
    max_len: int | None = None,
) -> AttentionMaps:
    """Translate ``sentence`` greedily (or take ``tokens``) and collect its attention maps.

    ``data`` provides ``encode_source`` and the vocabularies (a ``TranslationData``).
    ``tokens`` (``<eos>`` excluded) come with ``finished``: whether the search ended
    them with ``<eos>`` (False when it stopped at its step limit), so that the last
    decoder row is labelled ``<eos>`` only when the model produced it.
    """
    src_vocab, tgt_vocab = data.src_vocab, data.tgt_vocab
    specials = getattr(data, "special_ids", None)  # by id: Marian's </s> is 0
    bos, eos = (
        (specials["bos"], specials["eos"])
        if specials is not None
        else (tgt_vocab["<bos>"], tgt_vocab["<eos>"])
    )
    suppress = tuple(getattr(data, "suppress_ids", ()))
    device = next(model.parameters()).device
    src, src_len = data.encode_source([sentence])  # (1, S), (1,)
    src, src_len = src.to(device), src_len.to(device)
    with evaluating(model):
        if tokens is None:
            max_len = data.max_len + 2 if max_len is None else max_len
            res = greedy_decode(
                model, src, src_len, bos_id=bos, eos_id=eos, max_len=max_len, suppress=suppress
            )
            tokens, finished = res.tokens[0], res.finished[0]
        outputs = tokens + ([eos] if finished else [])
        dec_in = torch.tensor([[bos, *outputs[:-1]]], device=device) if outputs else None
        S = int(src_len[0])
        maps = AttentionMaps(
            source=src_vocab.to_tokens(src[0, :S].tolist()),
            decoder_inputs=tgt_vocab.to_tokens(dec_in[0].tolist()) if outputs else [],
            outputs=tgt_vocab.to_tokens(outputs),
            translation=data.detokenize(tokens)
            if hasattr(data, "detokenize")
            else " ".join(tgt_vocab.to_tokens(tokens)),
        )
        if not outputs:
            return maps
        with record_attention(model) as record:  # this thread's own record: no lock needed
            enc = model.encoder(src[:, :S], src_len)
            model.decoder(dec_in, model.decoder.init_state(enc, src_len))
        enc_blocks = getattr(model.encoder, "blks", None)
        dec_blocks = getattr(model.decoder, "blks", None)
        if enc_blocks is not None and dec_blocks is not None:  # a Transformer
            maps.encoder_self = _stack([record.get(b.attention) for b in enc_blocks])
            maps.decoder_self = _stack([record.get(b.attention1) for b in dec_blocks])
            maps.cross = _stack([record.get(b.attention2) for b in dec_blocks])
        else:
            align = record.get(model.decoder)  # (1, T, S): the Bahdanau alignment
            if align is not None:
                maps.cross = align[0][None, None].float().cpu()
        return maps


def word_groups(pieces: list[str]) -> list[list[int]]:
    """Indices of ``pieces`` grouped into words (see the module docstring)."""
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        starts = not groups or _is_special(piece) or piece.startswith(WORD_BOUNDARY)
        if starts or _is_special(pieces[groups[-1][-1]]):
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def _is_special(piece: str) -> bool:
    """``<eos>``, ``<bos>``, ``<pad>``, ``<unk>`` (not the byte pieces ``<0xE2>``)."""
    return piece.startswith("<") and piece.endswith(">") and not piece.startswith("<0x")


def _word_labels(pieces: list[str], groups: list[list[int]]) -> list[str]:
    labels = []
    for g in groups:
        text = "".join(pieces[i] for i in g).replace(WORD_BOUNDARY, " ").strip()
        labels.append(text or pieces[g[0]])
    return labels


def _merge(w: Tensor, rows: list[list[int]] | None, cols: list[list[int]]) -> Tensor:
    """(..., Q, K) -> (..., Q', K'): columns summed within ``cols``, rows averaged within
    ``rows`` (None: rows kept)."""
    w = torch.stack([w[..., g].sum(-1) for g in cols], dim=-1)
    if rows is not None:
        w = torch.stack([w[..., g, :].mean(-2) for g in rows], dim=-2)
    return w


def merge_pieces(maps: AttentionMaps) -> AttentionMaps:
    """``maps`` over words instead of subword pieces (see the module docstring for how
    the weights are combined). Word-level maps come back unchanged in content."""
    src = word_groups(maps.source)
    dec_in = word_groups(maps.decoder_inputs)
    out = word_groups(maps.outputs)
    merged = AttentionMaps(
        source=_word_labels(maps.source, src),
        decoder_inputs=_word_labels(maps.decoder_inputs, dec_in),
        outputs=_word_labels(maps.outputs, out),
        translation=maps.translation,
        extra=dict(maps.extra),
    )
    if maps.encoder_self is not None:
        merged.encoder_self = _merge(maps.encoder_self, src, src)
    if maps.decoder_self is not None:
        merged.decoder_self = _merge(maps.decoder_self, dec_in, dec_in)
    if maps.cross is not None:  # rows are the outputs (what each step predicted)
        merged.cross = _merge(maps.cross, out, src)
    return merged


def plot_attention_maps(
    maps: AttentionMaps, path: str | os.PathLike, all_heads: bool = False
) -> list[str]:
    """Write heatmaps of ``maps`` to ``path``; return the panel names drawn.

    Without ``all_heads``: one panel per kind (last layer, averaged over heads).
    With it: a grid per kind, a row per layer and a column per head. Tokens label
    the axes (source on x for cross attention, the produced tokens on y).
    """
    import matplotlib.pyplot as plt

    from attnkit.viz import save_figure

    kinds = [
        ("encoder self-attention", maps.encoder_self, maps.source, maps.source),
        ("decoder self-attention", maps.decoder_self, maps.decoder_inputs, maps.decoder_inputs),
        ("encoder-decoder attention", maps.cross, maps.source, maps.outputs),
    ]
    kinds = [k for k in kinds if k[1] is not None]
    if not kinds:
        raise ValueError(_("the model recorded no attention weights to draw"))
    panels: list[tuple[str, Tensor, list[str], list[str]]] = []
    for name, w, xt, yt in kinds:
        L, H = w.shape[:2]
        if all_heads and (L, H) != (1, 1):  # a single map (Bahdanau) is titled as without
            for layer in range(L):
                for h in range(H):
                    panels.append((f"{name}\nlayer {layer + 1} head {h + 1}", w[layer, h], xt, yt))
        else:
            title = name if (L, H) == (1, 1) else f"{name}\nlayer {L}, mean of {H} heads"
            panels.append((title, w[-1].mean(0), xt, yt))
    cols = max(w.shape[1] for _, w, _, _ in kinds) if all_heads else len(panels)
    cols = min(cols, len(panels))
    rows = -(-len(panels) // cols)
    cell = 0.32
    width = max(3.0, cell * max(len(p[2]) for p in panels) + 1.5)
    height = max(3.0, cell * max(len(p[3]) for p in panels) + 1.5)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, (title, m, xt, yt) in zip(axes.flat, panels):
        ax.imshow(m.numpy(), cmap="Reds", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(len(xt)), xt, rotation=90)
        ax.set_yticks(range(len(yt)), yt)
        ax.set_title(title, fontsize=9)
    fig.suptitle(f"{' '.join(maps.source)}  ->  {maps.translation}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    save_figure(fig, path)
    plt.close(fig)
    return [p[0] for p in panels]
