"""attnkit's decoder-only language model written as a Hugging Face GPT-2 folder.

    export_gpt2(model, "out/gpt2", tokenizer=tok)   # config.json, model.safetensors (+ tokenizer)
    GPT2LMHeadModel.from_pretrained("out/gpt2")     # the same logits

A ``DecoderLM`` maps onto GPT-2 when its positions are a table added to the embeddings
(``learned``; ``sinusoidal`` and ``none`` too: the table, or zeros, becomes ``wpe``, for
``context_length`` positions), every head has its own keys and values (no grouped-query
attention), and its activation is one GPT-2 can name (relu, gelu, gelu-tanh as
``gelu_new``, silu). Without biases (``bias=False``), GPT-2's biases are written as zeros:
the same function. RoPE and ALiBi act inside attention, where GPT-2 has nothing: refused
with the reason, as grouped-query attention. The inverse of ``attnkit.convert.gpt2``'s
mapping (``hf_gpt2_names``); ``safetensors`` is imported inside the function.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnkit.convert.gpt2 import hf_gpt2_names
from attnkit.convert.gpt2_tokenizer import GPT2BPETokenizer
from attnkit.i18n import _
from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig

__all__ = ["GPT2_ACTIVATION_NAMES", "export_gpt2", "gpt2_hf_config"]

# attnkit's activation -> GPT-2's activation_function (transformers' ACT2FN names)
GPT2_ACTIVATION_NAMES = {"relu": "relu", "gelu": "gelu", "gelu-tanh": "gelu_new", "silu": "silu"}
_TABLE_POSITIONS = ("learned", "sinusoidal", "none")


def gpt2_hf_config(config: DecoderLMConfig, eos_id: int | None = None) -> dict[str, Any]:
    """GPT-2's config.json for a model of ``config``, or a ValueError saying what does not
    map. ``eos_id``: the tokenizer's ``<|endoftext|>`` (bos and eos ids; None: none)."""
    if not isinstance(config, DecoderLMConfig):
        message = _("config must be a DecoderLMConfig, got {type}")
        raise TypeError(message.format(type=type(config).__name__))
    if config.positions not in _TABLE_POSITIONS:
        message = _(
            "positions={positions!r} does not map onto GPT-2: it rotates or biases "
            "inside attention, GPT-2 only adds a table of positions (wpe) to the "
            "embeddings; export a model with positions in {table}"
        )
        raise ValueError(message.format(positions=config.positions, table=_TABLE_POSITIONS))
    if config.kv_heads != config.num_heads:
        message = _(
            "num_kv_heads={num_kv_heads} (grouped-query attention) does not map "
            "onto GPT-2: every one of its {num_heads} heads has its own keys and "
            "values"
        )
        raise ValueError(
            message.format(num_kv_heads=config.num_kv_heads, num_heads=config.num_heads)
        )
    if config.activation not in GPT2_ACTIVATION_NAMES:
        message = _("activation {activation!r} has no GPT-2 name")
        raise ValueError(message.format(activation=config.activation))
    if config.vocab_size is None:
        raise ValueError(_("config.vocab_size is not set"))
    p = config.dropout
    return {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
        "vocab_size": config.vocab_size, "n_positions": config.context_length,
        "n_embd": config.d_model, "n_layer": config.num_layers, "n_head": config.num_heads,
        "n_inner": config.ffn_hidden,
        "activation_function": GPT2_ACTIVATION_NAMES[config.activation],
        "resid_pdrop": p, "embd_pdrop": p, "attn_pdrop": p,
        "layer_norm_epsilon": config.norm_eps, "initializer_range": 0.02,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False, "tie_word_embeddings": True, "use_cache": True,
        "bos_token_id": eos_id, "eos_token_id": eos_id, "torch_dtype": "float32",
    }  # fmt: skip


@torch.no_grad()
def _hf_weights(model: DecoderLM) -> dict[str, Tensor]:
    """The model's tensors under GPT-2's names (``transformer.`` prefix; ``lm_head`` left
    out: tied), float32, contiguous, each its own storage (as safetensors needs)."""
    c = model.config
    state = model.state_dict()
    dev = model.embedding.weight.device
    zeros = torch.zeros(1, c.context_length, c.d_model, device=dev)  # (1, N, D)
    table = zeros if model.input_positions is None else model.input_positions(zeros, 0)
    state["input_positions.weight"] = table[0]  # (N, D): learned rows, sinusoids or zeros
    out = {}
    for ours, (theirs, transposed) in hf_gpt2_names(c.num_layers).items():
        if ours not in state:  # a bias of a bias-free model: zeros of the weight's outputs
            weight = state[ours[: -len("bias")] + "weight"]
            t = torch.zeros(weight.shape[0], device=dev)  # (out,)
        else:
            t = state[ours]
        t = t.t() if transposed else t
        out[f"transformer.{theirs}"] = t.detach().float().cpu().contiguous().clone()
    return out


def export_gpt2(
    model: DecoderLM,
    out: str | os.PathLike,
    *,
    tokenizer: GPT2BPETokenizer | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``model`` as a GPT-2 folder ``out``: config.json, model.safetensors, and with
    ``tokenizer`` its vocab.json, merges.txt and tokenizer.json. Refuses (ValueError, with
    the reason) a model GPT-2 cannot express, and a non-empty ``out`` unless ``overwrite``.
    Returns ``out``."""
    from attnkit.checkpoint import atomic_write

    if not isinstance(model, DecoderLM):
        message = _("model must be a DecoderLM, got {type}")
        raise TypeError(message.format(type=type(model).__name__))
    if tokenizer is not None and not isinstance(tokenizer, GPT2BPETokenizer):
        message = _(
            "tokenizer must be a GPT2BPETokenizer (GPT-2's byte-level BPE) or "
            "None, got {type}: GPT-2 folders hold that tokenizer only"
        )
        raise TypeError(message.format(type=type(tokenizer).__name__))
    eos = None if tokenizer is None else tokenizer.eos_id
    config = gpt2_hf_config(model.config, eos)
    _check_plain(model)
    out = Path(out)
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        message = _("{out} is not empty: pass overwrite=True (--overwrite) to write there")
        raise FileExistsError(message.format(out=out))
    try:
        from safetensors.torch import save_file
    except ImportError:
        raise ImportError(
            _("writing model.safetensors needs safetensors (pip install 'attnkit[hf]')")
        ) from None
    weights = _hf_weights(model)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "model.safetensors",
                 lambda tmp: save_file(weights, tmp, metadata={"format": "pt"}))  # fmt: skip
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    text = json.dumps(config, indent=2) + "\n"
    atomic_write(out / "config.json", lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return out


def _check_plain(model: DecoderLM) -> None:
    """Refuse quantized layers (int8 rows cannot be written back as GPT-2's floats)."""
    quantized = [n for n, m in model.named_modules() if type(m).__name__ == "Int8Linear"]
    if quantized:
        message = _(
            "the model has int8 layers ({quantized} ...): export the float model "
            "(load it without --int8)"
        )
        raise ValueError(message.format(quantized=quantized[0]))
