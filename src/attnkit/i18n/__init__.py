"""attnkit in its readers' languages: one lookup for every user-facing string.

Short messages (help, errors, log lines, findings, claims, labels) are gettext messages:
written in English in the code as ``_("... {name} ...")`` (``N_`` marks a string defined at
import time, translated where it is shown), extracted with Babel into one catalog, a ``.po``
file per language and area (``i18n/locale/<lang>/LC_MESSAGES/<area>.po``, compiled to
``.mo`` and shipped), and looked up here. Long prose that is written per language anyway
(exercise answers) is parallel text, served by :func:`pick`. ``tools/i18n.py`` extracts,
updates and compiles; ``tests/i18n`` checks that every message has its translations, none
is stale, and every Chinese string keeps d2l-zh's terms and style.

The language, first match wins:

1. :func:`use_language` (a ``with`` block; the explorer uses it per request);
2. :func:`set_language` (``--lang`` on the command line, or a notebook's first cell);
3. ``ATTNKIT_LANG``;
4. the locale, as gettext reads it: ``LANGUAGE`` (a ``:`` list), ``LC_ALL``,
   ``LC_MESSAGES``, ``LANG``; ``zh_CN.UTF-8`` gives ``zh``;
5. English.

A language attnkit lacks falls back to English, never to an error; so does a message not
yet translated.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

__all__ = [
    "LANGUAGES",
    "N_",
    "_",
    "chosen_language",
    "get_language",
    "gettext",
    "language_from_accept",
    "language_from_environment",
    "ngettext",
    "normalize_language",
    "pick",
    "set_language",
    "use_language",
]

# the languages attnkit speaks, English (the source) first
LANGUAGES: tuple[str, ...] = ("en", "zh", "pt")
# what each is called in itself (the explorer's switch, `--lang`'s help)
LANGUAGE_NAMES: dict[str, str] = {"en": "English", "zh": "中文", "pt": "Português"}
_ENV_ORDER = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")

_request_language: ContextVar[str | None] = ContextVar("attnkit_language", default=None)
_chosen: str | None = None
_looked_up: set[str] | None = None  # while recording (see ``recording``)


def normalize_language(value: object) -> str | None:
    """``"zh_CN.UTF-8"``, ``"zh-Hans"``, ``"ZH"`` -> ``"zh"``; ``"pt_BR"`` -> ``"pt"``;
    ``"C"``, ``"POSIX"``, ``""`` or a language attnkit lacks -> ``None``."""
    if not isinstance(value, str):
        return None
    code = value.strip().split(".")[0].split("@")[0].replace("-", "_").split("_")[0].lower()
    return code if code in LANGUAGES else None


def language_from_environment(environ: Mapping[str, str] | None = None) -> str:
    """The language the environment asks for: ``ATTNKIT_LANG``, else the locale
    (``LANGUAGE``, ``LC_ALL``, ``LC_MESSAGES``, ``LANG``: the first one set decides, as
    gettext reads them), else ``"en"``."""
    env = os.environ if environ is None else environ
    chosen = normalize_language(env.get("ATTNKIT_LANG", ""))
    if chosen:
        return chosen
    for var in _ENV_ORDER:
        value = env.get(var, "")
        if not value:
            continue
        # LANGUAGE is a priority list ("zh_CN:en"); the first one we have wins
        for part in value.split(":") if var == "LANGUAGE" else [value]:
            found = normalize_language(part)
            if found:
                return found
        if var != "LANGUAGE":  # the first locale variable that is set decides
            return "en"
    return "en"


def language_from_accept(header: str | None) -> str:
    """The best of :data:`LANGUAGES` for an HTTP ``Accept-Language`` header
    (``"zh-CN,zh;q=0.9,en;q=0.8"`` -> ``"zh"``); ``"en"`` when none matches."""
    if header is not None and not isinstance(header, str):
        raise TypeError(f"header must be a str or None, got {type(header).__name__}")
    best, best_q = "en", -1.0
    for position, item in enumerate((header or "").split(",")):
        tag, _sep, params = item.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _eq, val = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(val)
                except ValueError:
                    q = 0.0
        lang = normalize_language(tag)
        # equal weights keep the header's order: earlier wins
        if lang and q > 0 and q - position * 1e-9 > best_q:
            best, best_q = lang, q - position * 1e-9
    return best


def set_language(language: str | None) -> str:
    """Speak ``language`` (``"en"``, ``"zh"``, ``"pt"``, or a locale name such as
    ``"zh_CN.UTF-8"``) from now on in this process; ``None`` goes back to the environment's
    choice. Returns the language now in force. A language attnkit lacks gives English."""
    global _chosen
    _chosen = _checked_language(language)
    return get_language()


def _checked_language(language: object) -> str | None:
    """``language`` as one of LANGUAGES (English for one we lack), None for None;
    TypeError for anything but a str or None."""
    if language is not None and not isinstance(language, str):
        raise TypeError(f"language must be a str or None, got {type(language).__name__}")
    return None if language is None else (normalize_language(language) or "en")


@contextlib.contextmanager
def use_language(language: str | None) -> Iterator[str]:
    """Speak ``language`` inside the ``with`` block only (this thread or task)."""
    token = _request_language.set(_checked_language(language))
    try:
        yield get_language()
    finally:
        _request_language.reset(token)


def chosen_language() -> str | None:
    """What :func:`set_language` chose (None: the environment decides)."""
    return _chosen


def get_language() -> str:
    """The language in force now (see the module's docstring for the order)."""
    return _request_language.get() or _chosen or language_from_environment()


def gettext(message: str) -> str:
    """``message`` (the English source) in the language in force; English when there is
    no translation."""
    if _looked_up is not None:
        _looked_up.add(message)
    language = get_language()
    if language == "en":
        return message
    from attnkit.i18n.catalog import translations

    return translations(language).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form of a message for ``n``, in the language in force."""
    language = get_language()
    if language == "en":
        return singular if n == 1 else plural
    from attnkit.i18n.catalog import translations

    return translations(language).ngettext(singular, plural, n)


@contextlib.contextmanager
def recording() -> Iterator[set[str]]:
    """Collect every message looked up inside the ``with`` block (the catalog's checks use
    it to know which messages a surface shows, e.g. the command line's help)."""
    global _looked_up
    previous, _looked_up = _looked_up, set()
    try:
        yield _looked_up
    finally:
        _looked_up = previous


def N_(message: str) -> str:  # noqa: N802 (gettext's name for the marker)
    """Mark ``message`` for the catalog without translating it now (a string defined at
    import time: translate it with ``_`` where it is shown)."""
    return message


def pick(texts: Mapping[str, str]) -> str:
    """The language in force's text from parallel text ``{"en": ..., "zh": ...}``;
    English when that language has none."""
    language = get_language()
    return texts.get(language) or texts["en"]


_ = gettext
