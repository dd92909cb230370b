"""A tiny random GPT-2 folder built with transformers, shared by the GPT-2 tests (built
once a session): config.json + model.safetensors of ``GPT2LMHeadModel`` (eager attention,
so HF returns attention weights) and a byte-level BPE vocab.json + merges.txt trained with
``tokenizers`` on a few lines, ``<|endoftext|>`` in its vocabulary."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import torch

CORPUS = [
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
    "Hello world! It's 2024, we're 12345 strong; they'll say I'm done.",
    "naïve café — 東京 🙂🚀 über façade",
    "  spaces   and\nnewlines\n\n\ttabs",
]
STRINGS = [  # the test set of strings: tokenizer and generation prompts
    "Hello world",
    " Hello  world ",
    "line one\nline two\n\n  indented\ttab\r\n",
    "naïve café — 東京 🙂🚀👩‍👩‍👧 Ωμέγα",
    "12345 3.14159 1,000,000 -7e10",
    "I'm can't won't they'll we've she'd You're it's",
    "<|endoftext|>next document",
    "x" * 40,
    "The animal didn't cross the street",
]
SIZES = {"n_positions": 48, "n_embd": 32, "n_layer": 2, "n_head": 4}


@functools.cache
def tiny_gpt2() -> Path:
    """The folder (built once; removed at exit)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel

    root = Path(tempfile.mkdtemp(prefix="attnkit-gpt2-"))
    atexit.register(shutil.rmtree, root, True)
    folder = root / "gpt2-tiny"
    folder.mkdir()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=360, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    tok.train_from_iterator(CORPUS * 10, trainer)
    tok.model.save(str(folder))  # vocab.json, merges.txt
    eos = tok.token_to_id("<|endoftext|>")
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=tok.get_vocab_size(), bos_token_id=eos, eos_token_id=eos, **SIZES,
        attn_implementation="eager",
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    with torch.no_grad():  # biases and LayerNorms off their zero/one start: all of it maps
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name or "ln_f" in name:
                p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(folder)
    return folder


@functools.cache
def hf_gpt2():
    """The folder's model as transformers loads it (eager attention, eval mode)."""
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(tiny_gpt2(), attn_implementation="eager").eval()


@functools.cache
def hf_tokenizer():
    from transformers import GPT2Tokenizer

    return GPT2Tokenizer.from_pretrained(tiny_gpt2())
