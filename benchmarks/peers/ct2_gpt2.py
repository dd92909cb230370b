"""GPT-2 in CTranslate2 for ``benchmarks/peers/gpt2_generation.py``: the conversion with
CTranslate2's own GPT-2 loader, and greedy generation of a fixed number of ids.

A random-weight model has no tokenizer files, and CTranslate2's ``TransformersConverter``
loads one (``AutoTokenizer``) only to list the vocabulary and name the special tokens. So
the loader (``ctranslate2.converters.transformers.GPT2Loader``, what the converter runs
for a ``GPT2Config``) is called directly with :class:`Vocabulary`, tokens ``t0``, ``t1``,
... for the ids and ``<|endoftext|>`` at GPT-2's end-of-text id. The weights are written as
float32; ``compute_type`` (``"int8"``: int8 weights, float32 elsewhere) quantizes them
when a ``ctranslate2.Generator`` loads the folder.

Generation: ``generate_batch(include_prompt_in_result=False, max_length=new,
sampling_topk=1, end_token=[])`` forwards the prompt in one pass (the key/value cache),
then runs exactly ``new`` greedy steps: with ``include_prompt_in_result=False`` the
``max_length`` counts the new ids only, and an empty ``end_token`` list turns the
end-of-text stop off without masking any logit (``min_length`` would mask the end token,
changing the argmax where it wins). Checked on a 2-layer model: the same ids as Hugging
Face's greedy ``generate``; with the end token renamed to the first id generated, the
default stops at once and ``end_token=[]`` does not.

ctranslate2 is imported inside the functions only (it is optional).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch


class Vocabulary:
    """What CTranslate2's GPT-2 loader asks of a tokenizer: ids as tokens ``t0``, ``t1``, ...
    with ``<|endoftext|>`` (beginning, end and unknown token, as GPT-2's) at ``eos``."""

    def __init__(self, size: int, eos: int) -> None:
        self.tokens = [f"t{i}" for i in range(size)]
        self.tokens[eos] = "<|endoftext|>"
        self.bos_token = self.eos_token = self.unk_token = "<|endoftext|>"

    def get_vocab(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.tokens)}


def ct2_gpt2(model, out: Path) -> list[str]:
    """Convert a ``GPT2LMHeadModel`` with CTranslate2's GPT-2 loader into the folder ``out``
    (float32 weights). Returns the tokens of the ids."""
    from ctranslate2.converters.transformers import GPT2Loader

    from benchmarks.peers.real_sizes import save_ct2_spec

    vocab = Vocabulary(model.config.vocab_size, model.config.eos_token_id)
    save_ct2_spec(GPT2Loader()(model, vocab), out)
    return vocab.tokens


def ct2_generators(folder: Path, threads: int, compute_types=("float32", "int8")) -> dict:
    """compute type -> a ``ctranslate2.Generator`` of ``folder`` on ``threads`` CPU threads."""
    import ctranslate2

    return {
        ct: ctranslate2.Generator(
            str(folder), device="cpu", compute_type=ct, intra_threads=threads, inter_threads=1
        )
        for ct in compute_types
    }


def ct2_generate(
    generator, tokens: list[str], prompts: torch.Tensor, new: int
) -> Callable[[], list[list[int]]]:
    """A function generating ``new`` greedy ids after ``prompts`` (B, P): B lists of ids."""
    start = [[tokens[i] for i in row] for row in prompts.tolist()]

    def run() -> list[list[int]]:
        results = generator.generate_batch(
            start, include_prompt_in_result=False, max_length=new, sampling_topk=1, end_token=[]
        )
        return [r.sequences_ids[0] for r in results]

    return run
