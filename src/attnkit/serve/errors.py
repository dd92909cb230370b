"""The explorer's error answers: every refused request gets ``{"detail", "field"}`` JSON
(plus ``errors``, pydantic's list, for a body it could not validate), its ``detail`` in the
request's language (``attnkit.serve.page.LanguageMiddleware`` sets it; pydantic's own
``msg`` inside stays English), and no response can fail to encode."""

from __future__ import annotations

import math
import sys
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from attnkit.i18n import N_, _
from attnkit.serve.model_service import escape_unencodable

__all__ = ["SafeJSONResponse", "error", "http_error", "validation_error", "wrong_task"]

# Starlette's and the app's own HTTP error details (looked up in the catalog)
HTTP_DETAILS = [N_("Not Found"), N_("Method Not Allowed"), N_("not found")]


def _json_safe(obj: Any) -> Any:
    """``obj`` with what JSON cannot carry made readable: lone surrogates in strings (keys
    included) as ``\\udxxx`` text, non-finite floats as the strings ``inf``, ``-inf``, ``nan``."""
    if isinstance(obj, str):
        return escape_unencodable(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    if isinstance(obj, dict):
        return {_json_safe(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


class SafeJSONResponse(JSONResponse):
    """A ``JSONResponse`` that never fails to encode: when the content holds a lone
    surrogate or a non-finite float (``UnicodeEncodeError``, ``ValueError``), it is
    rendered again through ``_json_safe``. Valid content is rendered unchanged."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except ValueError:  # UnicodeEncodeError is a ValueError too
            return super().render(_json_safe(content))


def error(status: int, detail: str, field: str | None, **extra: Any) -> JSONResponse:
    body = {"detail": detail, "field": field, **extra}
    return SafeJSONResponse(_json_safe(body), status_code=status)


def _non_finite(value: Any) -> str | None:
    """A note for a non-finite number in a request (JSON 1e309 parses as infinity)."""
    if not isinstance(value, float) or math.isfinite(value):
        return None
    if math.isnan(value):
        return _("got NaN; send a finite number")
    sign = "-" if value < 0 else ""
    return _(
        "got {sign}infinity: numbers beyond about {sign}1.8e308 (such as {sign}1e309) "
        "overflow to infinity; send a finite number"
    ).format(sign=sign)


def _describe(errors: list[dict]) -> str:
    parts = []
    for err in errors:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        if not loc and err.get("type") == "missing":
            parts.append(_("the request body is missing: send a JSON object (see /openapi.json)"))
            continue
        msg = err.get("msg", "invalid")
        if err.get("type") == "string_unicode":  # e.g. a key "\\ud800" with no pair
            loc = loc or "body"
            msg = _(
                "not valid Unicode: it contains a lone surrogate (a JSON \\ud800-\\udfff "
                "escape without its pair), which cannot be encoded as UTF-8"
            )
        if not loc:  # the body itself is not an object
            loc = _("body (a JSON object is expected)")
        note = _non_finite(err.get("input"))
        if note:
            parts.append(_("{where}: {message} ({note})").format(where=loc, message=msg, note=note))
        else:
            parts.append(_("{where}: {message}").format(where=loc, message=msg))
    # i18n: what joins the problems of one request
    return _("; ").join(parts)


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    # each error's "input" and "ctx" are echoed, made JSON-safe (inf, lone surrogates)
    errors = jsonable_encoder(exc.errors())
    bad_json = [e for e in errors if e.get("type") == "json_invalid"]
    if bad_json:
        err = bad_json[0]
        where = err.get("loc", ())[-1:] or ("?",)
        msg = err.get("ctx", {}).get("error", err.get("msg", "invalid"))
        detail = _("the request body is not valid JSON: {error} at character {position}").format(
            error=msg, position=where[0]
        )
        return error(400, detail, None, errors=errors)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    not_an_object = any(
        tuple(e.get("loc", ())) == ("body",) and e.get("type") != "missing" for e in errors
    )
    if not_an_object and not ctype.endswith("json"):  # form data, text, no content type
        detail = _(
            "the request body must be JSON sent with Content-Type: application/json "
            "(got {content_type})"
        ).format(content_type=ctype or _("no Content-Type"))
        return error(415, detail, None, errors=errors)
    detail = _describe(errors)
    fields = [str(e["loc"][-1]) for e in errors if e.get("loc") and len(e["loc"]) > 1]
    return error(422, detail, fields[0] if fields else None, errors=errors)


async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """HTTP errors (404, 405, a body FastAPI could not parse) as ``{"detail", "field"}``."""
    detail = _(str(exc.detail))
    if exc.status_code == 400 and str(exc.detail) == "There was an error parsing the body":
        cause = exc.__cause__
        if isinstance(cause, ValueError) and "digits" in str(cause):  # int('1' * 5000)
            detail = _(
                "the request body could not be parsed: a number in it has more than {digits} digits"
            ).format(digits=sys.get_int_max_str_digits())
        else:
            detail = _("the request body could not be parsed as JSON")
    response = error(exc.status_code, detail, None)
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


def wrong_task(endpoint: str, needs_translator: bool, other: str) -> JSONResponse:
    """404: ``endpoint`` needs the other kind of checkpoint; ``other`` is this one's."""
    if needs_translator:
        detail = _(
            "{endpoint} needs a translator; this server holds a language model "
            "(attnkit lm train): use {other}"
        )
    else:
        detail = _("{endpoint} needs a language model; this server holds a translator: use {other}")
    return error(404, detail.format(endpoint=endpoint, other=other), None)
