"""attnkit: attention mechanisms and Transformers from Dive into Deep Learning.

The public API is re-exported here; the book's names and signatures live in
``attnkit.d2l`` (``from attnkit import d2l``). ``set_language("zh")`` (or a ``with
use_language("zh"):`` block) makes errors and training lines speak Chinese.
"""

from attnkit.attention import (
    AdditiveAttention,
    BilinearAttention,
    DotProductAttention,
    KVCache,
    MultiHeadAttention,
    NadarayaWatson,
    NWKernelRegression,
    PositionalEncoding,
    as_mask,
    attention_mask,
    causal_mask,
    key_padded_attention,
    lengths_to_mask,
    masked_softmax,
    record_attention,
    scaled_dot_product,
    sequence_mask,
    sinusoidal_table,
)
from attnkit.data.hub import DatasetUnavailableError, download
from attnkit.data.lm import LMDataLoader, load_corpus, load_lm_data
from attnkit.data.synthetic_fr import generate_pairs
from attnkit.data.text import Vocab, count_corpus, tokenize
from attnkit.data.translation import TranslationBatch, TranslationData, load_translation_data
from attnkit.i18n import get_language, set_language, use_language
from attnkit.inference.attention_maps import AttentionMaps, attention_maps, plot_attention_maps
from attnkit.inference.beam_search import BeamHypothesis, BeamSearch
from attnkit.inference.decoding import DecodeResult, greedy_decode, translate
from attnkit.inference.generation import generate, generate_ids
from attnkit.inference.loading import load_lm_checkpoint, load_model
from attnkit.inference.sampling import next_token_probs
from attnkit.metrics import bleu, corpus_bleu, corpus_chrf, perplexity
from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig
from attnkit.models.registry import LMConfig, available_archs, build_model, register_arch
from attnkit.models.rnn import RNNLM, ScratchRNN, build_lm
from attnkit.models.seq2seq import (
    Decoder,
    Encoder,
    EncoderDecoder,
    Seq2SeqAttentionDecoder,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
)
from attnkit.models.transformer import (
    TransformerConfig,
    TransformerDecoder,
    TransformerEncoder,
    build_transformer,
)
from attnkit.training.lm import train_lm
from attnkit.training.recipes import PRESETS
from attnkit.training.translation import TrainConfig, Trainer

__version__ = "0.1.0"

# Drawing needs matplotlib: imported on first use, so ``import attnkit`` stays light; so
# are the notebook views (``show_attention``: attnkit.views, above training in the layers).
_LAZY = {
    "plot_curves": "attnkit.viz",
    "show_heatmaps": "attnkit.viz",
    "show_attention": "attnkit.views",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")


__all__ = [
    "PRESETS",
    "RNNLM",
    "AdditiveAttention",
    "AttentionMaps",
    "BeamHypothesis",
    "BeamSearch",
    "BilinearAttention",
    "DatasetUnavailableError",
    "DecodeResult",
    "Decoder",
    "DecoderLM",
    "DecoderLMConfig",
    "DotProductAttention",
    "Encoder",
    "EncoderDecoder",
    "KVCache",
    "LMConfig",
    "LMDataLoader",
    "MultiHeadAttention",
    "NWKernelRegression",
    "NadarayaWatson",
    "PositionalEncoding",
    "ScratchRNN",
    "Seq2SeqAttentionDecoder",
    "Seq2SeqDecoder",
    "Seq2SeqEncoder",
    "TrainConfig",
    "Trainer",
    "TransformerConfig",
    "TransformerDecoder",
    "TransformerEncoder",
    "TranslationBatch",
    "TranslationData",
    "Vocab",
    "__version__",
    "as_mask",
    "attention_maps",
    "attention_mask",
    "available_archs",
    "bleu",
    "build_lm",
    "build_model",
    "build_transformer",
    "causal_mask",
    "corpus_bleu",
    "corpus_chrf",
    "count_corpus",
    "download",
    "generate",
    "generate_ids",
    "generate_pairs",
    "get_language",
    "greedy_decode",
    "key_padded_attention",
    "lengths_to_mask",
    "load_corpus",
    "load_lm_checkpoint",
    "load_lm_data",
    "load_model",
    "load_translation_data",
    "masked_softmax",
    "next_token_probs",
    "perplexity",
    "plot_attention_maps",
    "plot_curves",
    "record_attention",
    "register_arch",
    "scaled_dot_product",
    "sequence_mask",
    "set_language",
    "show_attention",
    "show_heatmaps",
    "sinusoidal_table",
    "tokenize",
    "train_lm",
    "translate",
    "use_language",
]
