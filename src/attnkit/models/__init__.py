"""Models: RNN language models, GRU seq2seq (plain and Bahdanau), the Transformer.

Importing this package registers every encoder-decoder architecture with
``attnkit.models.registry`` (so ``build_model("transformer", ...)`` works).
"""

from attnkit.models import transformer as _transformer  # noqa: F401  (registers "transformer")
