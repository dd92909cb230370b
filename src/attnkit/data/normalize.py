"""One text normalization for the subword translator, at training and at run time.

The word-level pipeline keeps the book's ``preprocess_nmt`` (lower-case, a space before
``, . ! ?``). The subword pipeline keeps real text and only removes the differences that
carry no meaning, so that a sentence typed the ordinary way ("I'm hungry.") and in the
book's form ("i'm hungry .") reach the model as the same string:

- Unicode NFC; every kind of space (no-break U+00A0, narrow no-break U+202F, thin, tab...)
  becomes a plain space; runs of spaces become one; the ends are stripped;
- typographic apostrophes and single quotes (U+2019, U+2018, U+02BC, U+0060, U+00B4) become
  ``'``;
- source (English) only: lower-cased, and no space before ``. , ! ? ; :`` (English
  writes none; the book's form has one).

The target (French) keeps its capitals and its spacing: French writes a space before
``! ? ; :`` (the corpus's narrow no-break space, normalized to a plain one), so references
and translations are scored as French is written.
"""

from __future__ import annotations

import re
import unicodedata

from attnkit.i18n import _

__all__ = ["normalize_source", "normalize_target", "normalize_text"]

_SPACES = re.compile(r"[\s\u00a0\u1680\u2000-\u200b\u202f\u205f\u3000\ufeff]+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u00b4": "'"})
_SPACE_BEFORE_PUNCT = re.compile(r" +([.,!?;:])")


def normalize_text(text: str) -> str:
    """NFC, one kind of space (single, stripped) and one apostrophe; case kept."""
    if not isinstance(text, str):
        raise TypeError(_("text must be a str, got {type}").format(type=type(text).__name__))
    text = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    return _SPACES.sub(" ", text).strip()


def normalize_source(text: str) -> str:
    """An English sentence as the subword model sees it: :func:`normalize_text`,
    lower-case, and no space before ``. , ! ? ; :``."""
    return _SPACE_BEFORE_PUNCT.sub(r"\1", normalize_text(text).lower())


def normalize_target(text: str) -> str:
    """A French sentence as it is trained on and scored against: :func:`normalize_text`."""
    return normalize_text(text)
