"""Tiny MarianMT folders for the Marian import/export tests, built once per test session.

``marian_folder()`` is a Hugging Face MarianMT folder written by transformers'
``save_pretrained``: a random tiny ``MarianMTModel`` (weights drawn wide, so that the
comparisons test something: N(0, 0.3²) matrices, random LayerNorm gains and biases, a
random logits bias with ``</s>`` raised so that some sentences end, ``<pad>`` raised so
that suppressing it matters)
plus a tokenizer of two SentencePiece models trained here on a few sentences, and a
vocab.json in Marian's layout (``</s>`` 0, ``<unk>`` 1, the pieces, ``<pad>`` last) that
leaves some pieces out (they become ``<unk>``, as in Marian).
"""

from __future__ import annotations

import io
import json
import tempfile
from functools import cache
from pathlib import Path

import torch

EN = [
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
    "I lost my keys at the station yesterday.",
    "Where is the nearest bakery?",
    "She reads a book every evening, and he writes letters.",
    "We will travel to Paris in June with our friends.",
    "The children are playing in the garden behind the house.",
    "Can you help me carry these heavy boxes upstairs?",
]
FR = [
    "L'animal n'a pas traversé la rue parce qu'il était trop fatigué.",
    "L'animal n'a pas traversé la rue parce qu'elle était trop large.",
    "J'ai perdu mes clés à la gare hier.",
    "Où est la boulangerie la plus proche ?",
    "Elle lit un livre chaque soir, et il écrit des lettres.",
    "Nous voyagerons à Paris en juin avec nos amis.",
    "Les enfants jouent dans le jardin derrière la maison.",
    "Peux-tu m'aider à porter ces lourdes boîtes en haut ?",
]
# strings the tokenizer tests encode (unknown characters, a language code, spaces)
TEXTS = [
    *EN[:3],
    "Ωmega ☃ snowman — naïve café",
    ">>fra<< The street was wide.",
    "  leading and   inner spaces  ",
    "UPPER case AND 12345 numbers!",
    "x",
]
DROPPED = 6  # vocab.json leaves out the last few pieces of each model: they are <unk>


def _train_spm(lines: list[str], vocab_size: int) -> bytes:
    import sentencepiece

    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines * 4),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type="unigram",
        hard_vocab_limit=False,
        character_coverage=1.0,
        minloglevel=2,
    )
    return buffer.getvalue()


def _vocab(protos: list[bytes]) -> dict[str, int]:
    """Marian's layout: </s> 0, <unk> 1, the pieces of both models, <pad> last."""
    import sentencepiece

    pieces: dict[str, None] = {}
    for proto in protos:
        sp = sentencepiece.SentencePieceProcessor(model_proto=proto)
        ids = [i for i in range(len(sp)) if not (sp.is_control(i) or sp.is_unknown(i))]
        pieces.update((sp.id_to_piece(i), None) for i in ids[:-DROPPED])
    names = ["</s>", "<unk>", *(p for p in pieces if p not in ("</s>", "<unk>", "<pad>"))]
    names.append("<pad>")
    return {p: i for i, p in enumerate(names)}


def tiny_config(vocab_size: int, **overrides):
    from transformers import MarianConfig

    settings = dict(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        activation_function="swish",
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        pad_token_id=vocab_size - 1,
        eos_token_id=0,
        decoder_start_token_id=vocab_size - 1,
        forced_eos_token_id=0,
        bad_words_ids=[[vocab_size - 1]],
        dropout=0.1,
    )
    settings.update(overrides)
    return MarianConfig(**settings)


def random_marian(config, seed: int = 0):
    """A MarianMTModel with wide random weights (eager attention: weights returned)."""
    from transformers import MarianMTModel

    torch.manual_seed(seed)
    model = MarianMTModel(config)
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            elif "embed_positions" not in name:
                p.normal_(0.0, 0.3)
        model.final_logits_bias.normal_(0.0, 0.5)
        model.final_logits_bias[0, config.eos_token_id] += 1.5  # sentences end, at times
        model.final_logits_bias[0, config.pad_token_id] += 3.0  # suppressing <pad> matters
    return model.eval()


@cache
def marian_folder() -> Path:
    """The tiny MarianMT folder (model + tokenizer), written once per session."""
    folder = Path(tempfile.mkdtemp(prefix="attnkit-marian-")) / "tiny-marian"
    folder.mkdir()
    src, tgt = _train_spm(EN, 60), _train_spm(FR, 60)
    vocab = _vocab([src, tgt])
    (folder / "source.spm").write_bytes(src)
    (folder / "target.spm").write_bytes(tgt)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    settings = {"separate_vocabs": False, "source_lang": "en", "target_lang": "fr"}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    random_marian(tiny_config(len(vocab))).save_pretrained(folder)
    return folder


def hf_model(folder: Path):
    """The folder's model as transformers loads it (eager attention, eval mode)."""
    from transformers import MarianMTModel

    return MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval()


def hf_tokenizer(folder: Path):
    from transformers import MarianTokenizer

    return MarianTokenizer.from_pretrained(folder)
