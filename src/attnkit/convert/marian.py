"""Hugging Face MarianMT folders as attnkit Transformer translators (attnkit's own modules).

Shape legend: V vocabulary, D d_model, F ffn width, L layers.

A MarianMT model (OPUS-MT) is the book's post-norm Transformer with biases everywhere, a
silu ("swish") FFN, Marian's sinusoidal table (sines, then cosines: ``positions_layout=
"halves"``), embeddings scaled by sqrt(D), one (V, D) matrix for the source embedding, the
target embedding and the output layer, and a logits bias (``final_logits_bias``, the
output layer's bias). So it maps onto ``build_transformer`` with these config fields, names
mapped one to one (q, k, v projections concatenated into the fused ``W_qkv``):

    model.shared.weight (or encoder/decoder embed_tokens, lm_head)  -> embeddings, dense.weight
    final_logits_bias (1, V)                                        -> decoder.dense.bias
    model.encoder.layers.i.self_attn.{q,k,v}_proj                    -> encoder.blks.block{i}.attention.W_qkv
                          .self_attn.out_proj / self_attn_layer_norm -> .attention.W_o / .addnorm1.ln
                          .fc1 / .fc2 / final_layer_norm            -> .ffn.dense1 / .ffn.dense2 / .addnorm2.ln
    model.decoder.layers.i.self_attn / encoder_attn (+ layer norms)  -> decoder.blks.block{i}.attention1 / attention2
                          .fc1 / .fc2 / final_layer_norm            -> .ffn.dense1 / .ffn.dense2 / .addnorm3.ln

What does not map is refused with the reason (:class:`MarianMappingError`): encoder and
decoder stacks of different depth, heads or FFN width, separate vocabularies of different
sizes, pre-norm (``normalize_before``), a LayerNorm on the embeddings
(``normalize_embedding``/``layernorm_embedding``), learned positions
(``static_position_embeddings: false``), a final LayerNorm, an activation attnkit lacks.
Marian's three dropouts (residual, attention, activation) become attnkit's one
``dropout`` (the residual one): inference does not use them.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnkit.convert.hf_files import (
    check_shapes,
    hf_model_type,
    read_config,
    read_generation_config,
    read_weights,
    resolve_source,
    weights_name,
)
from attnkit.i18n import N_, _
from attnkit.models.activations import HF_ACTIVATIONS
from attnkit.models.seq2seq import EncoderDecoder
from attnkit.models.transformer import TransformerConfig, build_transformer

__all__ = [
    "MARIAN_DEFAULTS",
    "MARIAN_FILES",
    "MarianMappingError",
    "attnkit_state_dict",
    "import_marian",
    "marian_config",
    "marian_data",
    "marian_hf_shapes",
    "marian_model",
    "source_generation_config",
]

MARIAN_FILES = ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json")

# config.json flags of older Marian configs and the value attnkit maps (the others refuse)
_FLAGS = {
    "normalize_before": (False, N_("pre-norm blocks (attnkit's pre_norm adds a final LayerNorm)")),
    "normalize_embedding": (False, N_("a LayerNorm on the embeddings")),
    "layernorm_embedding": (False, N_("a LayerNorm on the embeddings")),
    "add_final_layer_norm": (False, N_("a final LayerNorm after each stack")),
    "static_position_embeddings": (True, N_("learned positions (attnkit's Marian is sinusoidal)")),
    "add_bias_logits": (False, N_("a second logits bias")),
}
_LAYER_NORMS = {
    "encoder": {"self_attn_layer_norm": "addnorm1", "final_layer_norm": "addnorm2"},
    "decoder": {
        "self_attn_layer_norm": "addnorm1",
        "encoder_attn_layer_norm": "addnorm2",
        "final_layer_norm": "addnorm3",
    },
}
_ATTENTIONS = {
    "encoder": {"self_attn": "attention"},
    "decoder": {"self_attn": "attention1", "encoder_attn": "attention2"},
}


# MarianConfig's defaults (transformers' configuration_marian.py): what a missing key means
MARIAN_DEFAULTS: dict[str, Any] = {
    "vocab_size": 58101, "max_position_embeddings": 1024, "d_model": 1024,
    "encoder_layers": 12, "decoder_layers": 12, "encoder_attention_heads": 16,
    "decoder_attention_heads": 16, "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096,
    "activation_function": "gelu", "dropout": 0.1, "scale_embedding": False,
    "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
}  # fmt: skip


class MarianMappingError(ValueError):
    """A MarianMT model attnkit's Transformer cannot hold; the message says why."""


def marian_config(hf: dict[str, Any], *, where: str = "config.json") -> TransformerConfig:
    """The ``TransformerConfig`` of a MarianMT config.json (a dict); refuses, naming the
    key, what does not map."""
    if hf.get("model_type", "marian") != "marian":
        message = _("{where}: model_type {model_type!r} is not 'marian'")
        raise MarianMappingError(message.format(where=where, model_type=hf.get("model_type")))

    hf = {**MARIAN_DEFAULTS, **{k: v for k, v in hf.items() if v is not None}}

    def get(key: str) -> Any:
        return hf[key]

    pairs = [("encoder_layers", "decoder_layers"), ("encoder_attention_heads",
             "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")]  # fmt: skip
    for enc, dec in pairs:
        if get(enc) != get(dec):
            message = _(
                "{where}: {enc}={enc_value} but {dec}={dec_value}; attnkit's "
                "Transformer has one depth, head count and FFN width for both stacks"
            )
            raise MarianMappingError(
                message.format(where=where, enc=enc, enc_value=hf[enc], dec=dec, dec_value=hf[dec])
            )
    for key, (mapped, what) in _FLAGS.items():
        if key in hf and bool(hf[key]) != mapped:
            message = _("{where}: {key}={value} ({what}) does not map onto attnkit's Transformer")
            raise MarianMappingError(
                message.format(where=where, key=key, value=hf[key], what=_(what))
            )
    vocab, dec_vocab = get("vocab_size"), hf.get("decoder_vocab_size") or hf.get("vocab_size")
    if dec_vocab != vocab:
        message = _(
            "{where}: decoder_vocab_size={dec_vocab} differs from "
            "vocab_size={vocab} (separate vocabularies); attnkit imports Marian "
            "models with one vocabulary"
        )
        raise MarianMappingError(message.format(where=where, dec_vocab=dec_vocab, vocab=vocab))
    act = get("activation_function")
    if act not in HF_ACTIVATIONS:
        message = _(
            "{where}: activation_function {act!r} has no attnkit counterpart; attnkit maps {listed}"
        )
        raise MarianMappingError(
            message.format(where=where, act=act, listed=", ".join(sorted(HF_ACTIVATIONS)))
        )
    return TransformerConfig(
        d_model=int(get("d_model")),
        num_heads=int(hf["encoder_attention_heads"]),
        num_layers=int(hf["encoder_layers"]),
        d_ff=int(hf["encoder_ffn_dim"]),
        dropout=float(hf["dropout"]),
        max_len=int(get("max_position_embeddings")),
        pre_norm=False,
        bias=True,
        activation=HF_ACTIVATIONS[act],
        positions_layout="halves",
        scale_embedding=bool(hf["scale_embedding"]),
        tie_embeddings=_tied(hf),
    )


def _tied(hf: dict[str, Any]) -> bool:
    """Marian ties the embeddings and lm_head when its vocabulary is shared (the default)
    and ``tie_word_embeddings`` is not false."""
    return bool(hf.get("share_encoder_decoder_embeddings", True)) and bool(
        hf.get("tie_word_embeddings", True)
    )


def _strip_prefix(weights: dict[str, Tensor]) -> dict[str, Tensor]:
    """Names as MarianMTModel's (``model.`` prefix; a bare MarianModel's lack it)."""
    if any(k.startswith("model.") for k in weights):
        return weights
    return {(k if k in ("final_logits_bias", "lm_head.weight") else f"model.{k}"): v
            for k, v in weights.items()}  # fmt: skip


def attnkit_state_dict(
    weights: dict[str, Tensor], config: TransformerConfig, *, where: str = "the weights"
) -> dict[str, Tensor]:
    """attnkit's state dict (``build_transformer``'s names) from a MarianMTModel's
    weights by their Hugging Face names; every attnkit tensor must be found, and every HF
    tensor used (the sinusoidal tables aside: attnkit computes its own)."""
    hf = _strip_prefix(dict(weights))
    used: set[str] = set()

    def take(name: str) -> Tensor:
        if name not in hf:
            raise MarianMappingError(_("{where} lack {name!r}").format(where=where, name=name))
        used.add(name)
        return hf[name]

    shared = "model.shared.weight" in hf
    enc_emb = take("model.shared.weight" if shared else "model.encoder.embed_tokens.weight")
    dec_emb = take("model.shared.weight" if shared else "model.decoder.embed_tokens.weight")
    out_w = hf.get("lm_head.weight", dec_emb)
    used.add("lm_head.weight")
    for name in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
        if name in hf and shared and not _same(hf[name], enc_emb):
            message = _("{where}: {name} differs from model.shared.weight")
            raise MarianMappingError(message.format(where=where, name=name))
        used.add(name)
    if config.tie_embeddings and not (_same(enc_emb, dec_emb) and _same(out_w, dec_emb)):
        message = _("{where}: the config ties the embeddings and lm_head, but the tensors differ")
        raise MarianMappingError(message.format(where=where))
    V = dec_emb.shape[0]
    bias = hf.get("final_logits_bias")
    used.add("final_logits_bias")
    state = {
        "encoder.embedding.weight": enc_emb,
        "decoder.embedding.weight": dec_emb,
        "decoder.dense.weight": out_w,
        "decoder.dense.bias": torch.zeros(V, dtype=out_w.dtype, device=out_w.device)
        if bias is None
        else bias.reshape(V),
    }
    for side in ("encoder", "decoder"):
        for i in range(config.num_layers):
            src, dst = f"model.{side}.layers.{i}.", f"{side}.blks.block{i}."
            for hf_name, ours in _ATTENTIONS[side].items():
                for kind in ("weight", "bias"):
                    state[f"{dst}{ours}.W_qkv.{kind}"] = torch.cat(
                        [take(f"{src}{hf_name}.{p}_proj.{kind}") for p in "qkv"]
                    )  # (3D, D) / (3D,): rows q, k, v
                    state[f"{dst}{ours}.W_o.{kind}"] = take(f"{src}{hf_name}.out_proj.{kind}")
            for hf_name, ours in _LAYER_NORMS[side].items():
                for kind in ("weight", "bias"):
                    state[f"{dst}{ours}.ln.{kind}"] = take(f"{src}{hf_name}.{kind}")
            for hf_name, ours in (("fc1", "dense1"), ("fc2", "dense2")):
                for kind in ("weight", "bias"):
                    state[f"{dst}ffn.{ours}.{kind}"] = take(f"{src}{hf_name}.{kind}")
    left = sorted(k for k in hf if k not in used and "embed_positions" not in k)
    if left:
        message = _(
            "{where} hold tensors attnkit's Transformer has no place for: "
            "{names}{more} (a deeper stack than config.json says?)"
        )
        raise MarianMappingError(
            message.format(where=where, names=left[:6], more=" ..." if len(left) > 6 else "")
        )
    return state


def _same(a: Tensor, b: Tensor) -> bool:
    if a is b:
        return True
    if a.shape != b.shape or a.device.type == "meta" or b.device.type == "meta":
        return a.shape == b.shape
    return bool(torch.equal(a, b))


def marian_hf_shapes(config: TransformerConfig, vocab_size: int) -> dict[str, tuple[int, ...]]:
    """The shape of every MarianMTModel tensor (by its Hugging Face name, ``model.``
    prefixed) that ``config`` and ``vocab_size`` imply; checked before the mapping, so that
    a config.json that does not match its weights is said in the file's own names."""
    V, D, F = vocab_size, config.d_model, config.d_ff
    shapes: dict[str, tuple[int, ...]] = {
        name: (V, D) for name in ("model.shared.weight", "model.encoder.embed_tokens.weight",
                                  "model.decoder.embed_tokens.weight", "lm_head.weight")
    }  # fmt: skip
    shapes["final_logits_bias"] = (1, V)
    for side in ("encoder", "decoder"):
        for i in range(config.num_layers):
            src = f"model.{side}.layers.{i}."
            for hf_name in _ATTENTIONS[side]:
                for p in ("q", "k", "v", "out"):
                    shapes[f"{src}{hf_name}.{p}_proj.weight"] = (D, D)
                    shapes[f"{src}{hf_name}.{p}_proj.bias"] = (D,)
            for hf_name in _LAYER_NORMS[side]:
                shapes[f"{src}{hf_name}.weight"] = shapes[f"{src}{hf_name}.bias"] = (D,)
            shapes.update({f"{src}fc1.weight": (F, D), f"{src}fc1.bias": (F,),
                           f"{src}fc2.weight": (D, F), f"{src}fc2.bias": (D,)})  # fmt: skip
    return shapes


def _setting(hf: dict[str, Any], key: str) -> Any:
    """config.json's ``key``, or transformers' default when it is missing."""
    value = hf.get(key)
    return MARIAN_DEFAULTS[key] if value is None else value


def marian_model(folder: str | os.PathLike) -> EncoderDecoder:
    """The attnkit Transformer of a MarianMT folder (config.json + weights; no tokenizer
    files needed), float32, in eval mode, on the CPU, not prepacked.

    Raises:
        HFSourceError: no such folder, no config.json or weights, weights that cannot be
            read or whose shapes are not config.json's (said in the file's tensor names).
        MarianMappingError: a model that does not map (the message says what).
    """
    folder = Path(folder)
    hf = read_config(folder)
    config = marian_config(hf, where=str(folder / "config.json"))
    V = int(_setting(hf, "vocab_size"))
    file = weights_name(folder)
    weights = _strip_prefix(read_weights(folder))
    check_shapes(weights, marian_hf_shapes(config, V), file)
    model = build_transformer(config, V, V)
    where = _("the weights in {file}").format(file=file)
    state = attnkit_state_dict(weights, config, where=where)
    state = {k: v.float() for k, v in state.items()}
    model.load_state_dict(state, strict=True)
    return model.eval()


def marian_data(folder: str | os.PathLike, hf: dict[str, Any] | None = None):
    """A ``TranslationData`` (no splits) holding the folder's Marian tokenizer, its
    ``max_len`` the model's positions."""
    from attnkit.data.marian_tokenizer import MarianTokenizer
    from attnkit.data.translation_data import TranslationData

    folder = Path(folder)
    hf = read_config(folder) if hf is None else hf
    tokenizer = MarianTokenizer.from_folder(folder, hf)
    vocab_size = int(_setting(hf, "vocab_size"))
    if len(tokenizer.src_vocab) != vocab_size:
        message = _(
            "{folder}: vocab.json lists {pieces} pieces but config.json's "
            "vocab_size is {vocab_size}"
        )
        raise MarianMappingError(
            message.format(folder=folder, pieces=len(tokenizer.src_vocab), vocab_size=vocab_size)
        )
    return TranslationData(
        tokenizer.src_vocab, tokenizer.tgt_vocab, [], [], [],
        int(_setting(hf, "max_position_embeddings")), source="huggingface", tokenizer=tokenizer,
    )  # fmt: skip


def load_marian(folder: str | os.PathLike) -> tuple[EncoderDecoder, Any, dict[str, Any]]:
    """``(model, data, config)`` of a MarianMT folder: the model (eval mode, CPU), its
    ``TranslationData`` and the attnkit checkpoint config it corresponds to, whose
    tokenizer record names the folder's own files (``TranslationData.from_dict(
    config["data"], folder)`` reads them)."""
    folder = Path(folder)
    model = marian_model(folder)
    data = marian_data(folder)
    cfg = _checkpoint_config(folder, model, data, folder)
    cfg["data"]["tokenizer"] = data.tokenizer.folder_meta(folder)
    return model, data, cfg


# GenerationConfig's fields a config.json written before generation_config.json held
_GENERATION_KEYS = (
    "bad_words_ids", "bos_token_id", "decoder_start_token_id", "eos_token_id",
    "forced_bos_token_id", "forced_eos_token_id", "pad_token_id", "max_length", "min_length",
    "max_new_tokens", "num_beams", "length_penalty", "early_stopping", "no_repeat_ngram_size",
    "repetition_penalty", "renormalize_logits", "do_sample", "temperature", "top_k", "top_p",
    "num_return_sequences",
)  # fmt: skip


def source_generation_config(folder: str | os.PathLike) -> dict[str, Any]:
    """How the folder's model is meant to generate: its generation_config.json, or, for a
    folder written before that file existed, config.json's generation keys (what
    transformers derives it from). An export writes it back (``num_beams`` 4 stays 4)."""
    found = read_generation_config(folder)
    if found:
        return found
    hf = read_config(folder)
    return {k: hf[k] for k in _GENERATION_KEYS if hf.get(k) is not None}


def _checkpoint_config(source, model, data, folder) -> dict[str, Any]:
    return {
        "task": "translation",
        "arch": "transformer",
        "model_config": dataclasses.asdict(model.encoder.config),
        "data": data.to_dict(),
        "imported_from": {"format": "huggingface-marian", "source": str(source)},
        "generation_config": source_generation_config(folder),
        "epoch": 0,
        "step": 0,
    }


def import_marian(source: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write the MarianMT model ``source`` (a folder or a hub name) as an attnkit checkpoint
    folder ``out`` (the one format: config.json, model weights, the tokenizer's files; the
    source's generation settings kept in config.json's "generation_config")."""
    from attnkit.checkpoint import save_checkpoint

    folder = resolve_source(source, files=("*.spm", "vocab.json", "tokenizer_config.json"))
    hf_model_type(folder, {"marian": N_("MarianMT translators")})
    model, data = marian_model(folder), marian_data(folder)
    cfg = _checkpoint_config(str(source), model, data, folder)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data.tokenizer.save(out)  # beside config.json, before it names them
    return save_checkpoint(out, cfg, model.state_dict())
