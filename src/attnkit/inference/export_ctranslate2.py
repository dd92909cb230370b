"""Export a trained Transformer translator to a CTranslate2 model folder.

    export_ctranslate2("runs/base", "runs/base-ct2")     # attnkit translate export ...

The folder holds what ``ctranslate2.Translator(folder)`` loads (``model.bin``,
``config.json``, ``shared_vocabulary.json`` or ``source_``/``target_vocabulary.json``),
the SentencePiece model(s) of the checkpoint and a README saying how to load and call it.
Greedy decoding in CTranslate2 then gives attnkit's token ids (tested).

``ctranslate2`` is imported inside the functions only: attnkit never needs it, and its
absence is an error naming ``pip install 'attnkit[peers]'``.

How attnkit's Transformer maps onto CTranslate2's ``TransformerSpec``:

- pre-norm or post-norm (``pre_norm`` of the config); pre-norm's final LayerNorm of the
  encoder and the decoder is the spec's ``layer_norm``; every LayerNorm has eps 1e-5
  (PyTorch's, recorded as ``layer_norm_epsilon``);
- embeddings times sqrt(D) or 1 (``scale_embedding`` of the config: the spec's
  ``scale_embeddings``) plus the model's own sinusoidal table (the book's interleaved
  sin/cos, or Marian's halves), given as the spec's ``position_encodings``; the encoder's
  and decoder's embeddings are written as two matrices even when tied (``tie_embeddings``:
  the same values; CTranslate2 aliases equal weights) and CTranslate2 writes one
  ``shared_vocabulary.json`` when the two vocabularies are the same list (a joint
  SentencePiece model, an imported Marian one);
- self-attention: the fused ``W_qkv`` (3D, D), rows q, k, v, is the spec's ``linear[0]``
  as it is; encoder-decoder attention: rows q of ``W_qkv`` are ``linear[0]``, rows k, v
  ``linear[1]``; ``W_o`` the last ``linear``; biases when the model has them;
- the position-wise FFN is ``ffn.linear_0``/``linear_1``, its activation the spec's
  (relu RELU, gelu GELU, gelu-tanh GELUTanh, silu SWISH); ``decoder.dense`` the output
  ``projection``, its bias (Marian's logits bias) the projection's;
- tokens: unk, bos (the decoder's start), eos (appended to every source,
  ``add_source_eos``) by the data's ids (``TranslationData.special_ids``): ``<unk>``,
  ``<bos>``, ``<eos>`` for attnkit's SentencePiece models, ``<unk>``, ``<pad>``, ``</s>``
  for Marian's. Ids decoding suppresses (Marian's pad) are CTranslate2's
  ``suppress_sequences`` argument at translation time (the README says so).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from torch import nn

from attnkit._validate import one_of, optional
from attnkit.i18n import _

__all__ = ["PEERS_INSTALL", "QUANTIZATIONS", "export_ctranslate2", "transformer_spec"]

# attnkit's FFN activation -> the name of CTranslate2's common_spec.Activation member
_CT2_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "gelu-tanh": "GELUTanh", "silu": "SWISH"}

PEERS_INSTALL = "pip install 'attnkit[peers]'"
QUANTIZATIONS = ("float32", "float16", "bfloat16", "int8", "int8_float32", "int16")


def _ctranslate2():
    """The ``ctranslate2`` package, or an error that says how to install it."""
    try:
        import ctranslate2.specs
    except ImportError:
        message = _(
            "exporting to CTranslate2 needs the ctranslate2 package: {install} (or "
            "pip install ctranslate2)"
        )
        raise ModuleNotFoundError(message.format(install=PEERS_INSTALL)) from None
    return ctranslate2


def transformer_spec(
    model: nn.Module,
    src_tokens: list[str],
    tgt_tokens: list[str],
    special_ids: dict[str, int] | None = None,
) -> Any:
    """CTranslate2's ``TransformerSpec`` of an attnkit Transformer, weights and vocabularies set.

    Args:
        model: an ``EncoderDecoder`` built by ``build_transformer`` (arch "transformer").
        src_tokens, tgt_tokens: the source and target vocabularies in id order; they must
            match the embeddings' sizes and hold the special tokens.
        special_ids: the target ids of ``unk``, ``bos`` (the decoder's start) and ``eos``
            (``TranslationData.special_ids``); None: ``<unk>``, ``<bos>``, ``<eos>`` by name.

    Returns:
        A ``ctranslate2.specs.TransformerSpec`` (not yet validated or saved).

    Raises:
        ModuleNotFoundError: ctranslate2 is not installed.
        TypeError: a model that is not an attnkit Transformer.
        ValueError: vocabularies that do not fit the model.
    """
    from attnkit.models.transformer import TransformerDecoder, TransformerEncoder

    encoder, decoder = getattr(model, "encoder", None), getattr(model, "decoder", None)
    if not (isinstance(encoder, TransformerEncoder) and isinstance(decoder, TransformerDecoder)):
        message = _(
            "CTranslate2 export needs an attnkit Transformer (arch 'transformer'), "
            "got {type} with {encoder}/{decoder}"
        )
        raise TypeError(
            message.format(
                type=type(model).__name__,
                encoder=type(encoder).__name__,
                decoder=type(decoder).__name__,
            )
        )
    _check_supported(model, encoder, decoder)
    for side, tokens, stack in (("source", src_tokens, encoder), ("target", tgt_tokens, decoder)):
        if len(tokens) != stack.vocab_size:
            message = _(
                "the {side} vocabulary has {tokens} tokens, the model's embedding {vocab_size}"
            )
            raise ValueError(
                message.format(side=side, tokens=len(tokens), vocab_size=stack.vocab_size)
            )
        if special_ids is None:
            missing = [t for t in ("<unk>", "<bos>", "<eos>") if t not in tokens]
            if missing:
                message = _("the {side} vocabulary has no {missing}")
                raise ValueError(message.format(side=side, missing=", ".join(missing)))
    if special_ids is None:
        unk, bos, eos = "<unk>", "<bos>", "<eos>"
    else:
        unk, bos, eos = (tgt_tokens[special_ids[k]] for k in ("unk", "bos", "eos"))
    specs = _ctranslate2().specs
    config = encoder.config
    activation = getattr(specs.common_spec.Activation, _CT2_ACTIVATIONS[config.activation])
    spec = specs.TransformerSpec.from_config(
        (config.num_layers, decoder.config.num_layers),
        config.num_heads,
        pre_norm=config.pre_norm,
        activation=activation,
    )
    _set_stack(spec.encoder, encoder)
    _set_stack(spec.decoder, decoder)
    for layer, block in zip(spec.encoder.layer, encoder.blks, strict=True):
        _set_self_attention(layer.self_attention, block.attention, block.addnorm1.ln)
        _set_ffn(layer.ffn, block.ffn, block.addnorm2.ln)
    for layer, block in zip(spec.decoder.layer, decoder.blks, strict=True):
        _set_self_attention(layer.self_attention, block.attention1, block.addnorm1.ln)
        _set_cross_attention(layer.attention, block.attention2, block.addnorm2.ln)
        _set_ffn(layer.ffn, block.ffn, block.addnorm3.ln)
    _set_linear(spec.decoder.projection, decoder.dense)
    spec.register_source_vocabulary(list(src_tokens))
    spec.register_target_vocabulary(list(tgt_tokens))
    cfg = spec.config
    cfg.unk_token, cfg.bos_token, cfg.eos_token = unk, bos, eos
    cfg.decoder_start_token, cfg.add_source_bos, cfg.add_source_eos = bos, False, True
    cfg.layer_norm_epsilon = _layer_norm_eps(model)
    return spec


def _check_supported(model: nn.Module, *stacks: nn.Module) -> None:
    """A clear error for what the mapping does not cover: positions other than the
    sinusoidal table added to the embeddings, grouped-query attention."""
    from attnkit.attention.multihead import MultiHeadAttention
    from attnkit.attention.positional import PositionalEncoding

    for stack in stacks:
        if not isinstance(getattr(stack, "pos_encoding", None), PositionalEncoding):
            message = _(
                "CTranslate2 export covers the sinusoidal positions added to the "
                "embeddings; this model's are {type}"
            )
            raise ValueError(
                message.format(type=type(getattr(stack, "pos_encoding", None)).__name__)
            )
    for name, mha in model.named_modules():
        if not isinstance(mha, MultiHeadAttention):
            continue
        if getattr(mha, "positions", "none") != "none":
            message = _("CTranslate2 export: {name} uses positions={positions!r}")
            raise ValueError(message.format(name=name, positions=mha.positions))
        if getattr(mha, "num_kv_heads", mha.num_heads) != mha.num_heads:
            message = _(
                "CTranslate2 export: {name} has {num_kv_heads} key/value heads for "
                "{num_heads} query heads (grouped-query attention is not mapped)"
            )
            raise ValueError(
                message.format(name=name, num_kv_heads=mha.num_kv_heads, num_heads=mha.num_heads)
            )


def _weight(t):
    return t.detach().float().cpu().contiguous()


def _set_linear(spec, layer: nn.Linear) -> None:
    spec.weight = _weight(layer.weight)
    if layer.bias is not None:
        spec.bias = _weight(layer.bias)


def _set_layer_norm(spec, ln: nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _weight(ln.weight), _weight(ln.bias)


def _set_stack(spec, stack) -> None:
    """Embeddings (scaled by sqrt(D) or not), positions, final LayerNorm."""
    # the encoder's spec holds a list of source embeddings (one here), the decoder's one
    table = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    table.weight = _weight(stack.embedding.weight)
    spec.scale_embeddings = bool(stack.config.scale_embedding)
    spec.position_encodings.encodings = _weight(stack.pos_encoding.P[0])  # (max_len, D)
    if stack.config.pre_norm:
        _set_layer_norm(spec.layer_norm, stack.final_norm)


def _qkv(mha) -> tuple[Any, Any]:
    """The (3D, D) weight [W_q; W_k; W_v] and its (3D,) bias (or None), either layout."""
    import torch

    if mha.fused_qkv:
        bias = mha.W_qkv.bias
        return _weight(mha.W_qkv.weight), None if bias is None else _weight(bias)
    layers = (mha.W_q, mha.W_k, mha.W_v)
    weight = torch.cat([_weight(m.weight) for m in layers])
    if layers[0].bias is None:
        return weight, None
    return weight, torch.cat([_weight(m.bias) for m in layers])


def _set_self_attention(spec, mha, ln: nn.LayerNorm) -> None:
    weight, bias = _qkv(mha)
    spec.linear[0].weight = weight
    if bias is not None:
        spec.linear[0].bias = bias
    _set_linear(spec.linear[1], mha.W_o)
    _set_layer_norm(spec.layer_norm, ln)


def _set_cross_attention(spec, mha, ln: nn.LayerNorm) -> None:
    weight, bias = _qkv(mha)
    D = mha.num_hiddens
    spec.linear[0].weight, spec.linear[1].weight = weight[:D], weight[D:]
    if bias is not None:
        spec.linear[0].bias, spec.linear[1].bias = bias[:D], bias[D:]
    _set_linear(spec.linear[2], mha.W_o)
    _set_layer_norm(spec.layer_norm, ln)


def _set_ffn(spec, ffn, ln: nn.LayerNorm) -> None:
    _set_linear(spec.linear_0, ffn.dense1)
    _set_linear(spec.linear_1, ffn.dense2)
    _set_layer_norm(spec.layer_norm, ln)


def _layer_norm_eps(model: nn.Module) -> float:
    eps = {m.eps for m in model.modules() if isinstance(m, nn.LayerNorm)}
    if len(eps) != 1:
        message = _("CTranslate2 takes one LayerNorm epsilon; the model has {eps}")
        raise ValueError(message.format(eps=sorted(eps)))
    return float(eps.pop())


def export_ctranslate2(
    checkpoint: str | os.PathLike, out: str | os.PathLike, *, quantization: str | None = None
) -> Path:
    """Write a CTranslate2 model folder ``out`` from a Transformer translator checkpoint.

    Args:
        checkpoint: a folder of ``attnkit translate train`` (arch "transformer", trained
            with ``--tokenizer sentencepiece``).
        out: the folder to create; it must not exist (nothing is replaced).
        quantization: CTranslate2's weight type (``QUANTIZATIONS``); None keeps float32.

    Returns:
        ``out``: ``model.bin``, ``config.json``, the vocabularies, the SentencePiece
        model(s) (``sentencepiece.model`` when joint, else ``source.model`` and
        ``target.model``) and ``README.md``. The folder appears whole or not at all.

    Raises:
        FileExistsError: ``out`` exists. FileNotFoundError: no checkpoint there, or no
            parent folder for ``out``.
        ValueError: a language-model checkpoint, another arch (Bahdanau, GRU seq2seq), a
            checkpoint without a subword tokenizer (word-level), a damaged checkpoint.
        ModuleNotFoundError: ctranslate2 is not installed (``pip install 'attnkit[peers]'``).
    """
    from attnkit.checkpoint import read_checkpoint_config
    from attnkit.convert.hf_files import is_hf_folder
    from attnkit.inference.translator import Translator

    quantization = optional(one_of, "quantization", quantization, QUANTIZATIONS)
    checkpoint, out = Path(checkpoint), Path(out)
    if out.exists() or out.is_symlink():
        message = _("{out} already exists: give the export a new folder")
        raise FileExistsError(message.format(out=out))
    if not out.parent.is_dir():
        message = _("cannot create {out}: the folder {parent} does not exist")
        raise FileNotFoundError(message.format(out=out, parent=out.parent))
    what = _("cannot export {checkpoint} to CTranslate2").format(checkpoint=checkpoint)
    hf_folder = is_hf_folder(checkpoint)  # a MarianMT folder: imported as it loads
    try:
        cfg = (
            Translator.load(checkpoint).config if hf_folder else read_checkpoint_config(checkpoint)
        )
    except ValueError as e:
        raise ValueError(_("{what}: {error}").format(what=what, error=e)) from None
    if cfg.get("arch") != "transformer":
        message = _(
            "{what}: it is arch {arch!r}; the export takes Transformer translators "
            "(arch 'transformer') only"
        )
        raise ValueError(message.format(what=what, arch=cfg.get("arch")))
    record = (cfg.get("data") or {}).get("tokenizer")
    if record is None:
        message = _(
            "{what}: it has no subword tokenizer (it was trained on word tokens); "
            "CTranslate2 takes the SentencePiece pieces: train with --tokenizer "
            "sentencepiece"
        )
        raise ValueError(message.format(what=what))
    _ctranslate2()
    translator = Translator.load(checkpoint)  # checks the weights' and tokenizer's sha256
    data = translator.data
    spec = transformer_spec(
        translator.model, data.src_vocab.idx_to_token, data.tgt_vocab.idx_to_token,
        data.special_ids,
    )  # fmt: skip
    spec.validate()
    spec.optimize(quantization=quantization)
    sp_files = [checkpoint / Path(name).name for name in record["files"]]
    marian = record.get("kind") == "marian"
    if marian:  # Marian's two SentencePiece models (its vocab.json: the vocabulary here)
        sp_files, sp_names = sp_files[:2], ["source.spm", "target.spm"]
    elif record.get("joint"):
        sp_names = ["sentencepiece.model"]
    else:
        sp_names = ["source.model", "target.model"]
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        spec.save(str(tmp))
        for src, name in zip(sp_files, sp_names, strict=True):
            shutil.copyfile(src, tmp / name)
        readme = _readme(out.name, sp_names, translator.decode_steps(), data.max_len, quantization)
        if marian:
            readme += _MARIAN_NOTE
        (tmp / "README.md").write_text(readme, encoding="utf-8")
        os.chmod(tmp, 0o755)
        if out.exists():
            message = _("{out} appeared while exporting: give the export a new folder")
            raise FileExistsError(message.format(out=out))
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _readme(
    name: str, sp_names: list[str], steps: int, max_len: int, quantization: str | None
) -> str:
    joint = len(sp_names) == 1
    load_sp = (
        f'sp = spm.SentencePieceProcessor(model_file="{name}/{sp_names[0]}")'
        if joint
        else f'sp = spm.SentencePieceProcessor(model_file="{name}/{sp_names[0]}")\n'
        f'sp_target = spm.SentencePieceProcessor(model_file="{name}/{sp_names[1]}")'
    )
    decoder = "sp" if joint else "sp_target"
    models = (
        f"`{sp_names[0]}` (one SentencePiece model for both languages)"
        if joint
        else f"`{sp_names[0]}` (English) and `{sp_names[1]}` (French)"
    )
    return f"""# {name}: an attnkit Transformer translator for CTranslate2

Exported by `attnkit translate export --to ctranslate2` (weights {quantization or "float32"}).
It holds `model.bin`, `config.json`, the vocabularies (`*_vocabulary.json`: SentencePiece
pieces in attnkit's id order) and {models}.

Greedy decoding here gives the token ids of attnkit's greedy decoding (`attnkit translate
run`) with the settings below.

```python
import ctranslate2
import sentencepiece as spm
from attnkit.data.normalize import normalize_source  # or the rules below

translator = ctranslate2.Translator("{name}", device="cpu")
{load_sp}
sentences = ["I'm hungry.", "Where is the station?"]
pieces = [sp.encode(normalize_source(s), out_type=str) for s in sentences]
results = translator.translate_batch(
    pieces, beam_size=1, max_decoding_length={steps}, min_decoding_length=0
)
print([{decoder}.decode(r.hypotheses[0]) for r in results])
```

- **Source text** is normalized before SentencePiece (whose own normalization is off):
  Unicode NFC, every kind of space made one plain space (runs collapsed, ends
  stripped), typographic apostrophes made `'`, lower-cased, no space before
  `. , ! ? ; :`. That is `attnkit.data.normalize.normalize_source`.
- CTranslate2 appends `<eos>` to the source (`add_source_eos` in config.json) and starts
  the decoder from `<bos>`. The model was trained on sentences of up to {max_len - 1} pieces.
- `max_decoding_length={steps}` and `min_decoding_length=0` are attnkit's defaults (its
  decoder steps, `<eos>` included; an immediate `<eos>` allowed).
- Beam search: CTranslate2 divides a hypothesis's log-probability by
  `length ** length_penalty`, attnkit by the GNMT penalty `((5 + length) / 6) ** alpha`,
  so beam outputs may differ from attnkit's.
"""


_MARIAN_NOTE = """
## An imported Marian model

The SentencePiece models are Marian's `source.spm` (English) and `target.spm` (French);
the text goes in **as it is** (no lower-casing: the rules above are attnkit's own
models'), the vocabulary is Marian's (`</s>` ends, decoding starts from `<pad>`).
Marian never emits `<pad>`: pass `suppress_sequences=[["<pad>"]]` to `translate_batch`
(attnkit and Hugging Face suppress it), and decode the target pieces with
`"".join(pieces).replace("\u2581", " ").strip()`.
"""
