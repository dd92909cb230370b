"""The explorer in its reader's language: which language a request asks for, and the page
rendered in it, every word from attnkit's one catalog.

A request's language is its ``?lang=`` (``en``, ``zh``, ``pt``: the page's switch), else
its ``Accept-Language`` header (``attnkit.i18n.language_from_accept``; the page's script
sends the page's own language with every API call). ``LanguageMiddleware`` holds it for the
whole request (``use_language``), so API errors come back in it.

The page (``static/index.html``) is written in English; :func:`render_page` gives it in a
language: the text of each element marked ``data-i18n`` (``data-i18n="html"``: markup
included) and the ``title``, ``placeholder`` and ``aria-label`` attributes listed in
``PAGE_MESSAGES`` translated, ``<html lang>`` set, and the words ``app.js`` shows (and the
shared drawing code's, ``attnkit.views.text``) embedded as a ``{English: translation}``
table. A word the catalog lacks stays English.
"""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs

from attnkit.i18n import N_, _, language_from_accept, normalize_language, use_language
from attnkit.views.text import html_lang, json_table, script_table

__all__ = ["PAGE_MESSAGES", "SCRIPT_MESSAGES", "LanguageMiddleware", "render_page"]

# index.html: element text (data-i18n) and attributes (title, placeholder, aria-label)
PAGE_MESSAGES = [
    N_("attnkit attention explorer"),
    N_("loading model information…"),
    N_("language"),
    N_("Translate"),
    N_("Generate"),
    N_("Nadaraya-Watson"),
    N_("English sentence"),
    N_("decoding"),
    N_("greedy"),
    N_("allow unknown words"),
    N_("attention to a word = sum over its pieces; from a word = mean of its pieces' rows"),
    N_("merge pieces into words"),
    N_("attention of"),
    N_("head"),
    N_("Prompt"),
    N_("new tokens"),
    N_("auto"),
    N_("empty: 50, or what the context leaves"),
    N_("0 = greedy: always the most likely token"),
    N_("temperature"),
    N_("all"),
    N_("the same seed gives the same sample"),
    N_("seed"),
    N_("none"),
    N_("Pick a new token to see where it looked: the context shaded by its attention weights."),
    # i18n: HTML: keep the tags (<i>x</i>, <sub>i</sub>) around the same symbols
    N_(
        "Nadaraya-Watson regression: each test point <i>x</i> attends to the training points "
        "<i>x<sub>i</sub></i> with weights softmax(−((<i>x</i> − <i>x<sub>i</sub></i>) / "
        "width)² / 2) and predicts the weighted mean of their <i>y<sub>i</sub></i>."
    ),
    N_("kernel width"),
    N_("data, truth and fit"),
    N_("attention: test points (rows) × training points (columns)"),
]

# app.js: what the script shows (it also uses the drawing code's, attnkit.views.text)
SCRIPT_MESSAGES = [
    N_("encoder self-attention"),
    N_("decoder self-attention"),
    N_("encoder-decoder attention"),
    N_("alignment (Bahdanau)"),
    N_("query"),
    N_("key"),
    N_("target"),
    N_("source"),
    N_("(empty translation)"),
    N_("beam search, size {k}"),
    N_("greedy decoding"),
    N_("stopped at the length limit"),
    N_("unknown: {words}"),
    N_("{n} / {max} characters"),
    N_("{arch} ({config}) · vocabularies {src} EN / {tgt} FR {unit} · at most {max} {unit}"),
    N_("subword pieces"),
    N_("words"),
    N_("greedy"),
    N_("beam {k}"),
    N_("could not load model information: {error}"),
    N_("characters"),
    N_("byte-level BPE pieces"),
    N_(" · context {n} tokens"),
    N_("language model {arch} ({config}) · {n} {unit}{context}"),
    N_("attention of each new token over its context · {where}"),
    N_("new token"),
    N_("context token"),
    N_("sampled at temperature {t}"),
    N_(", top-k {k}"),
    N_(", top-p {p}"),
    N_(", seed {seed}"),
    N_(" · a recurrent model: no attention to show"),
    N_("{n} new tokens · {how} · {ms} ms{none}"),
    N_("truth"),
    N_("prediction"),
    N_("training data"),
    N_("max weight {w}"),
    N_("test x"),
    N_("training x"),
    N_("could not compute: {error}"),
    # a link that opens a sentence with a head picked: /?text=…&kind=…&layer=…&head=…
    N_("opened from the link: {picked}"),
    # i18n: {name}={value} is the link's own text (kind=foo, layer=9): keep it as it is
    N_("ignored from the link: {name}={value} ({why})"),
    N_("encoder, decoder or cross"),
    N_("this model has no {kind}"),
    N_("a whole number from 1 to {n}"),
    N_("a whole number from 1 to {n}, or mean"),
]

_ELEMENT = re.compile(r'(<(\w+)\b[^>]*\sdata-i18n(?:="(html)")?(?=[\s>])[^>]*>)(.*?)(</\2>)', re.S)
_ATTRIBUTE = re.compile(r'\b(title|placeholder|aria-label)="([^"]*)"')
_TABLE = '<script type="application/json" id="attnkit-i18n">{}</script>'
_ATTRIBUTE_TEXT = frozenset(PAGE_MESSAGES)


def request_language(query_string: bytes, accept_language: str | None) -> str:
    """The language a request asks for: ``?lang=`` when it names one attnkit speaks, else
    the best match of its ``Accept-Language``, else English."""
    asked = parse_qs(query_string.decode("latin-1")).get("lang", [])
    chosen = normalize_language(asked[-1]) if asked else None
    return chosen or language_from_accept(accept_language)


class LanguageMiddleware:
    """Each HTTP request runs in its language (:func:`request_language`); its answer says
    which (``Content-Language``) and that it depends on ``Accept-Language`` (``Vary``)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        accept = next((v.decode("latin-1") for k, v in scope["headers"]
                       if k == b"accept-language"), None)  # fmt: skip
        language = request_language(scope.get("query_string", b""), accept)

        async def send_with_language(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-language", html_lang(language).encode()),
                            (b"vary", b"Accept-Language")]  # fmt: skip
                message = {**message, "headers": headers}
            await send(message)

        with use_language(language):
            await self.app(scope, receive, send_with_language)


def _translated_element(match: re.Match) -> str:
    start, _tag, is_html, inner, end = match.groups()
    source = " ".join(inner.split())  # the page's line breaks are not part of the message
    if not is_html:
        source = html.unescape(source)
    text = _(source)
    if text == source:  # English, or a word not yet translated: as the page has it
        return match.group(0)
    # markup (data-i18n="html") is the catalog's own, trusted; text is escaped
    return start + (text if is_html else html.escape(text, False)) + end


def _translated_attribute(match: re.Match) -> str:
    name, value = match.groups()
    source = html.unescape(value)
    if source not in _ATTRIBUTE_TEXT:
        return match.group(0)  # an example sentence, a number: as it is
    return f'{name}="{html.escape(_(source), False).replace(chr(34), "&quot;")}"'


def render_page(template: str, language: str) -> bytes:
    """``index.html`` (``template``) in ``language``: see the module's docstring."""
    with use_language(language):
        page = _ELEMENT.sub(_translated_element, template)
        page = _ATTRIBUTE.sub(_translated_attribute, page)
        table = json_table(script_table(SCRIPT_MESSAGES))
    page = page.replace(
        '<html lang="en">', f'<html lang="{html_lang(language)}" data-language="{language}">', 1
    )
    page = page.replace(_TABLE, _TABLE.replace("{}", table), 1)
    return page.encode("utf-8")
