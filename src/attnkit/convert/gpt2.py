"""A Hugging Face GPT-2 folder as attnkit's own decoder-only language model.

    model = gpt2_model("path/to/gpt2")               # DecoderLM, eval mode (config + weights)
    model, tokenizer, hf = load_gpt2("gpt2")          # + the byte-level BPE (a hub name: fetched)
    import_gpt2("gpt2", "runs/gpt2")                  # an attnkit LM checkpoint folder

GPT-2 is attnkit's ``DecoderLM`` with learned positions, biases everywhere, GPT-2's tanh
GELU (``gelu_new``), LayerNorm epsilon ``layer_norm_epsilon``, tied input/output
embeddings and a final LayerNorm. Shape legend: D n_embd, F n_inner (4 D when null), V
vocab_size, N n_positions, L n_layer. The weights map one to one (HF's ``Conv1D`` stores
(in, out), the transpose of ``nn.Linear``'s (out, in)):

    wte.weight (V, D)                  -> embedding.weight (tied: also the output layer)
    wpe.weight (N, D)                  -> input_positions.weight
    h.i.ln_1.{weight,bias} (D,)        -> blocks.i.norm1
    h.i.attn.c_attn.weight (D, 3D)     -> blocks.i.attention.W_qkv.weight (3D, D), rows q, k, v
    h.i.attn.c_proj.weight (D, D)      -> blocks.i.attention.W_o.weight, transposed
    h.i.ln_2                           -> blocks.i.norm2
    h.i.mlp.c_fc.weight (D, F)         -> blocks.i.ffn.0.weight (F, D)
    h.i.mlp.c_proj.weight (F, D)       -> blocks.i.ffn.2.weight (D, F)
    ln_f                               -> final_norm

(biases as they are; names with or without the ``transformer.`` prefix; ``lm_head.weight``
must equal ``wte.weight``; the causal-mask buffers ``attn.bias``/``attn.masked_bias`` of old
files are skipped). What does not map is refused with the reason (``GPT2_REFUSED``): layer-
index scaling, unscaled scores, cross-attention, untied output embeddings, an activation
outside ``HF_ACTIVATIONS``. The three dropout rates become the model's one ``dropout``
(``resid_pdrop``); they act in training only. ``reorder_and_upcast_attn`` is accepted: it
computes the scores in float32 under autocast, which a float32 model does anyway.

The model's end-of-text id (``gpt2_eos_id``: generation_config.json's ``eos_token_id``,
else config.json's, else the tokenizer's ``<|endoftext|>``) is recorded with it, so that
``attnkit lm generate`` stops there as transformers' ``generate`` does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnkit.convert.gpt2_tokenizer import GPT2BPETokenizer, has_gpt2_tokenizer
from attnkit.convert.hf_files import (
    HFSourceError,
    check_not_lfs_pointer,
    hf_model_type,
    read_config,
    read_generation_config,
    read_weights,
    resolve_source,
    weights_name,
)
from attnkit.i18n import N_, _, ngettext
from attnkit.models.activations import HF_ACTIVATIONS
from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig

__all__ = [
    "GPT2_DEFAULTS",
    "GPT2_REFUSED",
    "GPT2_TOKENIZER_FILES",
    "gpt2_config",
    "gpt2_eos_id",
    "gpt2_model",
    "gpt2_state_dict",
    "hf_gpt2_names",
    "import_gpt2",
    "lm_record",
    "load_gpt2",
]

GPT2_TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer.json")

# GPT2Config's defaults (transformers' configuration_gpt2.py): what a missing key means
GPT2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
    "n_inner": None, "activation_function": "gelu_new", "resid_pdrop": 0.1,
    "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5,
    "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False, "add_cross_attention": False,
    "tie_word_embeddings": True,
}  # fmt: skip

# config key -> (the value that maps, why another does not)
GPT2_REFUSED: dict[str, tuple[Any, str]] = {
    "scale_attn_weights": (
        True, N_("unscaled attention scores (attnkit scales by 1/sqrt(head width))")),
    "scale_attn_by_inverse_layer_idx": (False, N_(
        "scores also divided by the layer index + 1 (attnkit's attention has no such scale)")),
    "add_cross_attention": (False, N_("cross-attention blocks (attnkit's LM is decoder-only)")),
    "tie_word_embeddings": (
        True, N_("an output layer of its own (attnkit ties it to the embedding)")),
}  # fmt: skip

_SKIPPED = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers of old files


def _value(config: Mapping[str, Any], key: str) -> Any:
    return config.get(key, GPT2_DEFAULTS.get(key))


def gpt2_config(config: Mapping[str, Any], where: str = "config.json") -> DecoderLMConfig:
    """The ``DecoderLMConfig`` of a GPT-2 config.json (a dict), or a ValueError naming the
    first key that does not map and why."""
    if not isinstance(config, Mapping):
        message = _("config must be a config.json dict, got {type}")
        raise TypeError(message.format(type=type(config).__name__))
    if config.get("model_type") != "gpt2":
        message = _("{where}: model_type {model_type!r} is not 'gpt2'")
        raise ValueError(message.format(where=where, model_type=config.get("model_type")))
    for key, (ok, why) in GPT2_REFUSED.items():
        if _value(config, key) != ok:
            message = _("{where}: {key}={value!r} does not map onto attnkit's DecoderLM: {why}")
            raise ValueError(
                message.format(where=where, key=key, value=_value(config, key), why=_(why))
            )
    act = _value(config, "activation_function")
    if act not in HF_ACTIVATIONS:
        message = _(
            "{where}: activation_function {act!r} does not map onto attnkit's "
            "DecoderLM (supported: {listed})"
        )
        raise ValueError(
            message.format(where=where, act=act, listed=", ".join(sorted(HF_ACTIVATIONS)))
        )
    d = _value(config, "n_embd")
    inner = _value(config, "n_inner")
    try:
        return DecoderLMConfig(
            vocab_size=_value(config, "vocab_size"), d_model=d, num_heads=_value(config, "n_head"),
            num_layers=_value(config, "n_layer"), ffn_hidden=4 * d if inner is None else inner,
            dropout=float(_value(config, "resid_pdrop")),
            context_length=_value(config, "n_positions"), positions="learned", bias=True,
            activation=HF_ACTIVATIONS[act], norm_eps=float(_value(config, "layer_norm_epsilon")),
        )  # fmt: skip
    except (TypeError, ValueError) as e:
        raise ValueError(_("{where}: {error}").format(where=where, error=e)) from None


def hf_gpt2_names(num_layers: int) -> dict[str, tuple[str, bool]]:
    """attnkit's state-dict name -> (HF's name without the ``transformer.`` prefix, whether
    the tensor is stored transposed), for a model with biases and learned positions."""
    names = {"embedding.weight": ("wte.weight", False),
             "input_positions.weight": ("wpe.weight", False)}  # fmt: skip
    for i in range(num_layers):
        ours, hf = f"blocks.{i}.", f"h.{i}."
        for a, b, transposed in (("norm1", "ln_1", False), ("attention.W_qkv", "attn.c_attn", True),
                                 ("attention.W_o", "attn.c_proj", True), ("norm2", "ln_2", False),
                                 ("ffn.0", "mlp.c_fc", True), ("ffn.2", "mlp.c_proj", True)):  # fmt: skip
            names[f"{ours}{a}.weight"] = (f"{hf}{b}.weight", transposed)
            names[f"{ours}{a}.bias"] = (f"{hf}{b}.bias", False)
    names["final_norm.weight"], names["final_norm.bias"] = (
        ("ln_f.weight", False),
        ("ln_f.bias", False),
    )
    return names


def gpt2_state_dict(
    weights: Mapping[str, Tensor], config: DecoderLMConfig, where: str = N_("the weights")
) -> dict[str, Tensor]:
    """HF GPT-2 tensors by name (with or without ``transformer.``) -> a ``DecoderLM`` state
    dict of ``config`` (``gpt2_config``'s); a missing, extra or misshapen tensor, or an
    ``lm_head`` that is not the embedding, is a ValueError naming it."""
    where = _(where)  # the default in the language in force
    hf = {(k[len("transformer.") :] if k.startswith("transformer.") else k): v
          for k, v in weights.items() if not k.endswith(_SKIPPED)}  # fmt: skip
    head = hf.pop("lm_head.weight", None)  # (V, D), the tied embedding when present
    names = hf_gpt2_names(config.num_layers)
    missing = sorted({n for n, _ in names.values()} - set(hf))
    extra = sorted(set(hf) - {n for n, _ in names.values()})
    if missing or extra:
        said = [
            _("missing {names}").format(names=missing[:6]) if missing else "",
            _("unexpected {names}").format(names=extra[:6]) if extra else "",
        ]
        message = _("{where} are not GPT-2 weights of this config.json ({listed})")
        raise ValueError(message.format(where=where, listed="; ".join(s for s in said if s)))
    shapes = _shapes(config)
    state, wrong = {}, []
    for ours, (theirs, transposed) in names.items():
        t = hf[theirs].t() if transposed else hf[theirs]
        if tuple(t.shape) != shapes[ours]:
            expected = shapes[ours][::-1] if transposed else shapes[ours]
            wrong.append((theirs, tuple(hf[theirs].shape), expected))
        state[ours] = t.contiguous()
    if wrong:
        (theirs, stored, expected), n = wrong[0], len(wrong) - 1
        more = ngettext(" (and {n} more tensor)", " (and {n} more tensors)", n).format(n=n)
        message = _(
            "{where}: {theirs} has shape {stored}, expected {expected} for config.json's "
            "sizes{more}: the config does not match the weights; use the config.json that "
            "came with them"
        )
        more = more if n else ""
        fields = dict(where=where, theirs=theirs, stored=stored, expected=expected, more=more)
        raise ValueError(message.format(**fields))
    wte = hf["wte.weight"]  # (V, D)
    if head is not None and not (
        head is wte  # a live model's state dict: the one tied tensor
        or (head.shape == wte.shape and (head.is_meta or torch.equal(head.to(wte.dtype), wte)))
    ):
        message = _(
            "{where}: lm_head.weight is not wte.weight: an untied output layer "
            "does not map onto attnkit's DecoderLM (its output layer is the "
            "embedding)"
        )
        raise ValueError(message.format(where=where))
    return state


def _shapes(config: DecoderLMConfig) -> dict[str, tuple[int, ...]]:
    """The state-dict shapes of ``config``'s model, without building it (meta tensors)."""
    with torch.device("meta"):
        model = DecoderLM(config)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def gpt2_model(source: str | os.PathLike, *, device: torch.device | str = "cpu") -> DecoderLM:
    """The ``DecoderLM`` of a GPT-2 folder (or hub name): config.json and the weights only
    (no tokenizer files needed), float32, in eval mode, plain ``nn.Linear`` layers."""
    folder = resolve_source(source)
    config = gpt2_config(read_config(folder), f"{folder / 'config.json'}")
    where = _("the weights in {file}").format(file=weights_name(folder))
    state = gpt2_state_dict(read_weights(folder), config, where)
    with torch.device("meta"):
        model = DecoderLM(config)  # no initialization drawn: every tensor is assigned
    model.load_state_dict({k: v.float() for k, v in state.items()}, assign=True)
    return model.to(device).eval()


def load_gpt2(
    source: str | os.PathLike, *, device: torch.device | str = "cpu", tokenizer: bool = True
) -> tuple[DecoderLM, GPT2BPETokenizer | None, dict[str, Any]]:
    """``(model, tokenizer, config)`` of a GPT-2 folder or hub name: the model as
    :func:`gpt2_model`, its byte-level BPE (None with ``tokenizer=False``; a folder
    without tokenizer files is an error) and config.json as a dict."""
    folder = resolve_source(source, files=GPT2_TOKENIZER_FILES)
    hf_model_type(folder, {"gpt2": N_("GPT-2 language models")})
    model = gpt2_model(folder, device=device)  # first: what does not map is said first
    tok = None
    if tokenizer:
        if not has_gpt2_tokenizer(folder):
            message = _(
                "{folder} holds no GPT-2 tokenizer: put its tokenizer.json, or "
                "vocab.json and merges.txt, beside config.json"
            )
            raise HFSourceError(message.format(folder=folder))
        for name in GPT2_TOKENIZER_FILES:
            check_not_lfs_pointer(folder / name)
        tok = GPT2BPETokenizer.from_folder(folder)
    if tok is not None and len(tok) > model.vocab_size:
        message = _("{folder}: the tokenizer has {tokens} tokens, the model only {vocab_size}")
        raise ValueError(
            message.format(folder=folder, tokens=len(tok), vocab_size=model.vocab_size)
        )
    return model, tok, read_config(folder)


def gpt2_eos_id(folder: str | os.PathLike, tokenizer: GPT2BPETokenizer | None = None) -> Any:
    """The end-of-text id(s) generation stops at, as transformers' ``generate`` reads them:
    generation_config.json's ``eos_token_id``, else config.json's, else the tokenizer's
    ``<|endoftext|>``; an int, a list of ints, or None (none known)."""
    for found in (read_generation_config(folder), read_config(folder)):
        if found.get("eos_token_id") is not None:
            return found["eos_token_id"]
    return None if tokenizer is None else tokenizer.eos_id


def lm_record(
    model: DecoderLM, tokenizer_meta: dict[str, Any], source: str, eos_token_id: Any = None
) -> dict[str, Any]:
    """What an imported model's config.json records (as ``attnkit lm train``'s: task,
    arch, the model's fields; the tokenizer's file; where it came from; the end-of-text
    id generation stops at)."""
    record = {"task": "lm", "arch": "transformer", **model.config.to_dict(),
              "tokenizer": "gpt2-bpe", "tokenizer_model": tokenizer_meta,
              "imported_from": {"format": "hf", "model_type": "gpt2", "source": source}}  # fmt: skip
    if eos_token_id is not None:
        record["eos_token_id"] = eos_token_id
    return record


def import_gpt2(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
    say: Callable[[str], Any] = lambda _: None,
) -> Path:
    """Write the GPT-2 of ``source`` (a folder or hub name) as an attnkit language-model
    checkpoint in ``out`` (``attnkit lm generate --checkpoint OUT``); returns ``out``. A
    folder that already holds a checkpoint is refused unless ``overwrite``."""
    from attnkit.checkpoint import save_checkpoint

    out = Path(out)
    if (out / "config.json").exists() and not overwrite:
        message = _("{out} already holds a checkpoint: pass --overwrite to replace it")
        raise FileExistsError(message.format(out=out))
    folder = resolve_source(source, files=GPT2_TOKENIZER_FILES)
    model, tok, _found = load_gpt2(folder)
    params = sum(p.numel() for p in model.parameters())
    c = model.config
    line = _("GPT-2: {layers} blocks, d_model {d_model}, {heads} heads, context {context}, "
             "vocab {vocab}, {params:,} parameters")  # fmt: skip
    say(line.format(layers=c.num_layers, d_model=c.d_model, heads=c.num_heads,
                    context=c.context_length, vocab=c.vocab_size, params=params))  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    meta = tok.save(out)
    record = lm_record(model, meta, os.fspath(source), gpt2_eos_id(folder, tok))
    return save_checkpoint(out, record, model.state_dict())
