"""An attnkit Transformer translator as a Hugging Face MarianMT folder.

    export_marian(model, data, "out/marian")     # config.json, generation_config.json,
    MarianMTModel.from_pretrained("out/marian")  # model.safetensors (+ tokenizer files)

The inverse of :mod:`attnkit.convert.marian`'s mapping. What Marian's model cannot compute
is refused with the reason (:class:`MarianMappingError`): pre-norm blocks (Marian's
final LayerNorm-free post-norm stacks only), other positions than sinusoidal, int8 layers.
A model without biases (``bias=False``, attnkit's default) is written with zero biases,
which computes the same. The book's interleaved sinusoidal table is written as the
position tables (``embed_positions.weight``), which transformers loads when the file has
them; the halves layout (an imported model's) is the one Marian computes itself.

The tokenizer: a Marian tokenizer (an imported model's) is written as it came (source.spm,
target.spm, vocab.json, tokenizer_config.json); a joint SentencePiece tokenizer of
attnkit's (``--tokenizer sentencepiece``, one vocabulary) as a Marian tokenizer whose ids
are its pieces' (HF then tokenizes the text attnkit's normalization gives: lower-case
English, see ``attnkit.data.normalize``). Word vocabularies and separate subword
vocabularies have no Marian counterpart: the model is written, and the returned note says
the tokenizer was not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from attnkit.convert.marian import _ATTENTIONS, _LAYER_NORMS, MarianMappingError
from attnkit.i18n import _
from attnkit.models.activations import HF_ACTIVATIONS
from attnkit.models.transformer import TransformerDecoder, TransformerEncoder

__all__ = ["export_marian", "hf_state_dict", "marian_hf_config"]

# attnkit's activation -> the name Marian's config.json gives it
_HF_NAME = {"relu": "relu", "gelu": "gelu", "gelu-tanh": "gelu_new", "silu": "swish"}
assert all(HF_ACTIVATIONS[v] == k for k, v in _HF_NAME.items())


def _check(model: nn.Module) -> Any:
    enc, dec = getattr(model, "encoder", None), getattr(model, "decoder", None)
    if type(enc) is not TransformerEncoder or type(dec) is not TransformerDecoder:
        message = _(
            "only attnkit's Transformer translator exports to Marian, got {encoder}/{decoder}"
        )
        raise MarianMappingError(
            message.format(encoder=type(enc).__name__, decoder=type(dec).__name__)
        )
    c = enc.config
    if c.pre_norm:
        raise MarianMappingError(
            _(
                "pre-norm Transformers do not map onto Marian (post-norm blocks, no "
                "final LayerNorm); only post-norm (pre_norm=False) models export"
            )
        )
    for name, module in model.named_modules():
        if type(module).__name__ == "Int8Linear":
            message = _("{name} is an int8 layer: export the float model (without --int8)")
            raise MarianMappingError(message.format(name=name))
    return c


def _bias(linear: nn.Module, rows: int) -> Tensor:
    b = getattr(linear, "bias", None)
    return torch.zeros(rows) if b is None else b.detach().float().cpu()


def hf_state_dict(model: nn.Module) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """MarianMTModel's tensors by their names and the config keys the embedding layout
    decides (``share_encoder_decoder_embeddings``, ``tie_word_embeddings``, the vocabulary
    sizes); every tensor float32, contiguous, its own storage (safetensors)."""
    c = _check(model)
    enc, dec = model.encoder, model.decoder
    D = c.d_model

    def t(x: Tensor) -> Tensor:
        return x.detach().float().cpu().contiguous().clone()

    src_emb, tgt_emb, out_w = enc.embedding.weight, dec.embedding.weight, dec.dense.weight
    V_src, V_tgt = src_emb.shape[0], tgt_emb.shape[0]
    shared = V_src == V_tgt and (src_emb is tgt_emb or bool(torch.equal(src_emb, tgt_emb)))
    tied = shared and (out_w is tgt_emb or bool(torch.equal(out_w, tgt_emb)))
    state: dict[str, Tensor] = {}
    if shared:
        state["model.shared.weight"] = t(src_emb)
    else:
        state["model.encoder.embed_tokens.weight"] = t(src_emb)
        state["model.decoder.embed_tokens.weight"] = t(tgt_emb)
    if not tied:
        state["lm_head.weight"] = t(out_w)
    state["final_logits_bias"] = _bias(dec.dense, V_tgt).reshape(1, V_tgt).contiguous()
    for side, stack in (("encoder", enc), ("decoder", dec)):
        if c.positions_layout != "halves":  # Marian computes halves; others are written
            table = stack.pos_encoding.P[0, : c.max_len]  # (max_len, D)
            state[f"model.{side}.embed_positions.weight"] = t(table)
        for i, blk in enumerate(stack.blks):
            dst = f"model.{side}.layers.{i}."
            for hf_name, ours in _ATTENTIONS[side].items():
                att = getattr(blk, ours)
                W, b = att.W_qkv.weight, _bias(att.W_qkv, 3 * D)  # (3D, D), (3D,)
                for j, p in enumerate("qkv"):
                    state[f"{dst}{hf_name}.{p}_proj.weight"] = t(W[j * D : (j + 1) * D])
                    state[f"{dst}{hf_name}.{p}_proj.bias"] = t(b[j * D : (j + 1) * D])
                state[f"{dst}{hf_name}.out_proj.weight"] = t(att.W_o.weight)
                state[f"{dst}{hf_name}.out_proj.bias"] = t(_bias(att.W_o, D))
            for hf_name, ours in _LAYER_NORMS[side].items():
                ln = getattr(blk, ours).ln
                state[f"{dst}{hf_name}.weight"] = t(ln.weight)
                state[f"{dst}{hf_name}.bias"] = t(ln.bias)
            for hf_name, ours in (("fc1", "dense1"), ("fc2", "dense2")):
                lin = getattr(blk.ffn, ours)
                state[f"{dst}{hf_name}.weight"] = t(lin.weight)
                state[f"{dst}{hf_name}.bias"] = t(_bias(lin, lin.weight.shape[0]))
    layout = {
        "vocab_size": V_src,
        "decoder_vocab_size": V_tgt,
        "share_encoder_decoder_embeddings": shared,
        "tie_word_embeddings": tied,
    }
    return state, layout


def marian_hf_config(model: nn.Module, special_ids: dict[str, int]) -> dict[str, Any]:
    """config.json of the MarianMT model ``model`` is, with ``special_ids`` (bos = the
    decoder's start, eos, pad)."""
    c = _check(model)
    _, layout = hf_state_dict(model)
    bos, eos, pad = special_ids["bos"], special_ids["eos"], special_ids["pad"]
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        **layout,
        "d_model": c.d_model,
        "encoder_layers": c.num_layers,
        "decoder_layers": c.num_layers,
        "encoder_attention_heads": c.num_heads,
        "decoder_attention_heads": c.num_heads,
        "encoder_ffn_dim": c.d_ff,
        "decoder_ffn_dim": c.d_ff,
        "max_position_embeddings": c.max_len,
        "activation_function": _HF_NAME[c.activation],
        "scale_embedding": c.scale_embedding,
        "dropout": c.dropout,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "static_position_embeddings": True,
        "normalize_before": False,
        "normalize_embedding": False,
        "is_encoder_decoder": True,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "decoder_start_token_id": bos,
        "forced_eos_token_id": eos,
        "bad_words_ids": [[pad]],
        "exported_by": "attnkit",
    }


def _generation_config(hf: dict[str, Any], suppress: tuple[int, ...]) -> dict[str, Any]:
    return {
        "decoder_start_token_id": hf["decoder_start_token_id"],
        "eos_token_id": hf["eos_token_id"],
        "pad_token_id": hf["pad_token_id"],
        "forced_eos_token_id": hf["eos_token_id"],
        "bad_words_ids": [[i] for i in sorted({hf["pad_token_id"], *suppress})],
        "max_length": hf["max_position_embeddings"],
        "num_beams": 1,
    }


def _tokenizer_files(data, out: Path) -> str:
    """Write the tokenizer HF's MarianTokenizer loads, when one maps; the note to show."""
    tokenizer = getattr(data, "tokenizer", None)
    if tokenizer is None:
        return (
            "the tokenizer was not exported: this model has word vocabularies (the book's "
            "tokens), which no Hugging Face tokenizer reproduces; feed it ids"
        )
    if hasattr(tokenizer, "save_folder"):  # a Marian tokenizer: as it came
        tokenizer.save_folder(out)
        return "tokenizer: Marian's (source.spm, target.spm, vocab.json), as imported"
    if not getattr(tokenizer, "joint", False):
        return (
            "the tokenizer was not exported: its source and target SentencePiece models have "
            "separate vocabularies, which MarianTokenizer (one vocabulary) cannot express"
        )
    proto = tokenizer._protos[0]
    (out / "source.spm").write_bytes(proto)
    (out / "target.spm").write_bytes(proto)
    pieces = tokenizer.src_vocab.idx_to_token
    (out / "vocab.json").write_text(
        json.dumps({p: i for i, p in enumerate(pieces)}, ensure_ascii=False, indent=2),
        encoding="utf-8",
    )
    settings = {"tokenizer_class": "MarianTokenizer", "separate_vocabs": False,
                "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"}  # fmt: skip
    (out / "tokenizer_config.json").write_text(json.dumps(settings, indent=2))
    return (
        "tokenizer: attnkit's joint SentencePiece model as a MarianTokenizer (equal ids on "
        "text normalized as attnkit does: attnkit.data.normalize.normalize_source)"
    )


def export_marian(
    model: nn.Module, data, out: str | os.PathLike, *, generation: dict[str, Any] | None = None
) -> str:
    """Write ``model`` (an attnkit Transformer translator) and what maps of ``data``'s
    tokenizer as a MarianMT folder ``out``; return a one-line note on the tokenizer.

    Args:
        model: the translator (float weights; prepacked layers are plain ones).
        data: its ``TranslationData`` (special ids, suppressed ids, tokenizer).
        out: the folder to write (created).
        generation: the generation settings of the model's source folder (an imported
            model's ``config["generation_config"]``): written back as they came, over
            the ids attnkit decodes with (``num_beams`` 4 stays 4, ``max_length``,
            ``bad_words_ids`` ...). None: attnkit's own (greedy, the model's length).

    Raises:
        MarianMappingError: a model Marian cannot compute (the message says why).
    """
    from safetensors.torch import save_file

    state, _ = hf_state_dict(model)
    hf = marian_hf_config(model, data.special_ids)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(hf, indent=2))
    settings = _generation_config(hf, tuple(getattr(data, "suppress_ids", ())))
    if generation:
        settings.update(generation)
    (out / "generation_config.json").write_text(json.dumps(settings, indent=2))
    return _tokenizer_files(data, out)
