"""Random-weight models at real sizes, built by Hugging Face transformers and saved as a
Hugging Face folder: the one set of weights each real-size benchmark hands to every
contender (attnkit through its converters, CTranslate2 through its Marian converter).

- ``OPUS_MT_EN_FR``: MarianMT at Helsinki-NLP/opus-mt-en-fr's shapes (width 512, 6 + 6
  post-norm layers, 8 heads, FFN 2048 with swish, 59,514 tied ids, static sinusoids with
  the embeddings scaled by sqrt(512), decoding from the pad id, ``</s>`` = 0);
- ``GPT2_SMALL``: GPT-2 small (width 768, 12 layers, 12 heads, 50,257 ids, context 1024).

transformers and ctranslate2 are imported inside the functions only.
"""

from __future__ import annotations

from pathlib import Path

import torch

OPUS_MT_EN_FR = dict(
    vocab_size=59514, d_model=512, encoder_layers=6, decoder_layers=6,
    encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
    decoder_ffn_dim=2048, activation_function="swish", scale_embedding=True,
    static_position_embeddings=True, share_encoder_decoder_embeddings=True,
    tie_word_embeddings=True, pad_token_id=59513, decoder_start_token_id=59513,
    eos_token_id=0, max_position_embeddings=512, dropout=0.1, attention_dropout=0.0,
    activation_dropout=0.0, bad_words_ids=[[59513]],
)  # fmt: skip
GPT2_SMALL = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)


def hf_marian(folder: Path, seed: int = 0):
    """A random-weight ``MarianMTModel`` (eager attention), saved to ``folder``; eval mode."""
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**OPUS_MT_EN_FR, attn_implementation="eager"))
    model.save_pretrained(folder)
    return model.eval()


def hf_gpt2(folder: Path, seed: int = 0, **config):
    """A random-weight ``GPT2LMHeadModel`` (eager attention; ``config`` overrides GPT-2 small's
    fields), saved to ``folder``; eval mode."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**{**GPT2_SMALL, **config}, attn_implementation="eager"))
    model.save_pretrained(folder)
    return model.eval()


class _Vocabulary:
    """What CTranslate2's Marian loader asks of a tokenizer: ids as tokens ``t0``, ``t1``, ...
    with ``</s>`` at 0, ``<unk>`` at 1 and ``<pad>`` last (random weights need no pieces)."""

    def __init__(self, size: int, eos: int, pad: int) -> None:
        self.tokens = [f"t{i}" for i in range(size)]
        self.tokens[eos], self.tokens[1], self.tokens[pad] = "</s>", "<unk>", "<pad>"
        self.eos_token, self.unk_token = "</s>", "<unk>"

    def get_vocab(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.tokens)}


def ct2_tokens(size: int, eos: int, pad: int) -> list[str]:
    """The tokens of the ids in a folder :func:`ct2_marian` wrote."""
    return _Vocabulary(size, eos, pad).tokens


def ct2_marian(model, out: Path) -> list[str]:
    """Convert a ``MarianMTModel`` with CTranslate2's own Marian loader into the folder ``out``
    (float32 weights; quantize with ``compute_type`` when loading). Returns the tokens of the
    ids (the ``<pad>`` id has none: CTranslate2 starts the decoder from a zero embedding)."""
    from ctranslate2.converters.transformers import MarianMTLoader

    cfg = model.config
    vocab = _Vocabulary(cfg.vocab_size, cfg.eos_token_id, cfg.pad_token_id)
    save_ct2_spec(MarianMTLoader()(model, vocab), out)
    return vocab.tokens


def save_ct2_spec(spec, out: Path) -> None:
    """Validate a CTranslate2 model spec and save it into ``out`` with float32 weights
    (``compute_type`` quantizes them when a translator or generator loads the folder)."""
    spec.validate()
    spec.optimize(quantization=None)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))


def equal_rows(a: list[list[int]], b: list[list[int]]) -> str:
    """``n/N``: how many sequences of ``b`` are the same ids as ``a``'s."""
    return f"{sum(x == y for x, y in zip(a, b))}/{len(a)}"


# each int8 engine's own float32 model: its ids are compared with that one's as well
OWN_FLOAT = {"attnkit int8": "attnkit", "CT2 int8": "CT2 float32"}


def int8_columns(times: dict[str, list[float]], outputs: dict[str, list], reference: str):
    """The columns a table with int8 engines adds: (headers, {contender: cells}): the ids
    against ``reference``'s and against the contender's own float32 model's (int8 engines),
    and attnkit int8's speed over the contender's per round (when attnkit int8 runs)."""
    from benchmarks.harness import round_ratios, spread

    int8 = round_ratios(times, "attnkit int8") if "attnkit int8" in times else None
    cells = {}
    for name, ids in outputs.items():
        own = OWN_FLOAT.get(name)
        row = [equal_rows(outputs[reference], ids),
               equal_rows(outputs[own], ids) if own in outputs else "-"]  # fmt: skip
        if int8 is not None:
            row.append("1.00x" if name == "attnkit int8" else
                       spread([1 / r for r in int8[name]], "{:.2f}x"))  # fmt: skip
        cells[name] = row
    headers = [f"ids = {reference}'s", "ids = its float32's"]
    return headers + (["attnkit int8 / it"] if int8 else []), cells
