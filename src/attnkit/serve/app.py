"""The explorer's web app: a JSON API (OpenAPI at ``/openapi.json``) and a static page.

    POST /api/translate         text -> tokens, translation, time and every attention map
    POST /api/generate          prompt -> continuation and each new token's attention
    GET  /api/info              the task, arch, vocabulary sizes and request limits
    POST /api/nadaraya-watson   kernel width -> fitted curve and attention matrix
    GET  /                      the page; GET /static/<name> its scripts and style

Every request is answered in its language (``?lang=zh``, else ``Accept-Language``;
``attnkit.serve.page``): the page's words, and the ``detail`` of every error
(``attnkit.serve.errors``).

A translator checkpoint (``attnkit translate train``, ``attnkit demo``) serves
``/api/translate``, a language model (``attnkit lm train``) ``/api/generate``; the other
one answers 404 saying which checkpoint it needs. Static files come from a fixed table
read at start-up (``heatmap.js``, the drawing code, is the notebook views' own file,
``attnkit/views/static``): no part of a request path is ever joined to a file-system path. FastAPI's ``/docs`` pages are turned off because
they load Swagger UI from a CDN; the schema itself is served.
"""

from __future__ import annotations

import os
from importlib import resources
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt
from starlette.exceptions import HTTPException as StarletteHTTPException

from attnkit.checkpoint import read_checkpoint_config
from attnkit.i18n import _, get_language
from attnkit.serve.errors import SafeJSONResponse, error, http_error, validation_error, wrong_task
from attnkit.serve.lm_service import LMService
from attnkit.serve.model_service import CheckpointLoadError, InputError, ModelService
from attnkit.serve.nadaraya_watson import MAX_WIDTH, MIN_WIDTH, nadaraya_watson
from attnkit.serve.page import LanguageMiddleware, render_page
from attnkit.views.assets import read_static

__all__ = ["SafeJSONResponse", "create_app", "create_app_for_service", "load_service"]

# name -> media type of every file the page needs; nothing else is ever served
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "heatmap.js": "text/javascript; charset=utf-8",  # attnkit/views/static: the shared drawing
}
SHARED_FILES = {"heatmap.js"}  # served from attnkit.views (one copy with the notebook views)
# the page loads nothing from elsewhere (and so works offline)
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)

Maps = list[list[list[list[float]]]] | None  # (L, H, rows, cols) or None


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="An English sentence.", examples=["the cat is happy ."])
    beam_size: StrictInt = Field(1, description="1 = greedy decoding; k > 1 = beam search.")
    allow_unknown: StrictBool = Field(
        False, description="Translate words missing from the vocabulary as <unk> (else a 422)."
    )
    merge_pieces: StrictBool = Field(
        False,
        description="Subword models: maps over words instead of pieces (attention to a word "
        "= sum over its pieces; attention from a word = mean of its pieces' rows).",
    )


class TranslateResponse(BaseModel):
    text: str = Field(description="The input text as received.")
    translation: str = Field(
        description="The French translation (word models: tokens joined by spaces; "
        "subword models: detokenized text)."
    )
    beam_size: int
    finished: bool = Field(description="False when decoding stopped at the length limit.")
    seconds: float = Field(description="Time spent decoding and recording attention.")
    arch: str
    unknown_words: list[str] = Field(description="Input words translated as <unk>.")
    source: list[str] = Field(description="Source tokens, <eos> included (S).")
    decoder_inputs: list[str] = Field(description="<bos> + translation tokens (T).")
    outputs: list[str] = Field(description="Translation tokens + <eos> (T).")
    encoder_self: Maps = Field(description="Encoder self-attention (L, H, S, S); Transformer.")
    decoder_self: Maps = Field(description="Decoder self-attention (L, H, T, T); Transformer.")
    cross: Maps = Field(
        description="Encoder-decoder attention (L, H, T, S); a Bahdanau alignment is (1, 1, T, S)."
    )


class GenerateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: str = Field(description="Text to continue.", examples=["the time traveller"])
    max_new_tokens: StrictInt | None = Field(
        None,
        description="Tokens to add, 1 to the server's limit (null: 50, or fewer where the "
        "limit or the model's context leaves less room).",
    )
    temperature: float = Field(
        0.0, allow_inf_nan=False, description="0 = greedy; > 0 samples from softmax(logits / T)."
    )
    top_k: StrictInt | None = Field(None, description="Sample among the k most likely tokens.")
    top_p: float | None = Field(
        None, allow_inf_nan=False, description="Sample in the smallest set with mass >= top_p."
    )
    seed: StrictInt | None = Field(
        None, ge=0, le=2**63 - 1, description="The same seed gives the same sample."
    )


class GenerateResponse(BaseModel):
    prompt: str = Field(description="The prompt as the model read it (character and word "
                        "models: normalized like their corpus).")  # fmt: skip
    text: str = Field(description="The prompt followed by its continuation.")
    continuation: str = Field(description="The new text only.")
    prompt_tokens: list[str] = Field(description="The prompt's tokens (P).")
    new_tokens: list[str] = Field(description="The new tokens (N).")
    seconds: float = Field(description="Time spent generating and recording attention.")
    arch: str
    attention: Maps = Field(
        description="Transformer: (L, H, N, K), row j = the attention that chose new token "
        "j, over the K = P + N - 1 positions (prompt + new tokens) up to it; null for an RNN."
    )


class InfoResponse(BaseModel):
    task: str = Field(description='"translation" or "language-model".')
    arch: str
    tokenizer: str = Field(
        description='"word" or "sentencepiece" (subword pieces, Marian\'s included); a language '
        'model: "char", "word", "sentencepiece" or "gpt2-bpe" (GPT-2\'s byte-level BPE).'
    )
    model_config_: dict[str, Any] = Field(alias="model_config")
    max_chars: int
    device: str
    src_vocab_size: int | None = Field(None, description="Translation only.")
    tgt_vocab_size: int | None = Field(None, description="Translation only.")
    max_tokens: int | None = Field(
        None,
        description="Translation: most English words (punctuation included), or subword "
        "pieces, per text.",
    )
    max_beam: int | None = Field(None, description="Translation only.")
    vocab_size: int | None = Field(None, description="Language model only.")
    context_length: int | None = Field(
        None, description="Language model: a Transformer's context (null for an RNN)."
    )
    max_new_tokens: int | None = Field(None, description="Language model only.")


class NWRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    width: float = Field(
        1.0, ge=MIN_WIDTH, le=MAX_WIDTH, allow_inf_nan=False, description="Kernel width 1 / w."
    )
    n_train: StrictInt = Field(50, ge=2, le=200, description="Training points.")
    seed: StrictInt = Field(0, ge=0, le=2**31 - 1)


class NWResponse(BaseModel):
    width: float
    w: float
    x_train: list[float]
    y_train: list[float]
    x_test: list[float]
    y_truth: list[float]
    y_hat: list[float]
    attention: list[list[float]] = Field(description="(test points, training points).")


class ErrorResponse(BaseModel):
    detail: str
    field: str | None = None


def _load_static() -> dict[str, bytes]:
    root = resources.files("attnkit.serve") / "static"
    return {
        name: read_static(name) if name in SHARED_FILES else (root / name).read_bytes()
        for name in STATIC_FILES
    }


def create_app_for_service(service: ModelService | LMService) -> FastAPI:
    """The app around an already loaded ``ModelService`` (a translator) or ``LMService``
    (a language model)."""
    if not isinstance(service, ModelService | LMService):
        raise TypeError(
            _("service must be a ModelService or an LMService, got {type}").format(
                type=type(service).__name__
            )
        )
    static = _load_static()
    pages: dict[str, bytes] = {}  # language -> index.html in it
    app = FastAPI(
        title="attnkit attention explorer",
        description="Translate English to French, or continue a prompt with a language "
        "model, and look at the model's attention.",
        version="1",
        docs_url=None,  # Swagger UI and ReDoc load from a CDN; /openapi.json is enough
        redoc_url=None,
        default_response_class=SafeJSONResponse,  # no response can fail to encode
    )
    app.state.service = service
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_middleware(LanguageMiddleware)  # each request in its language (?lang=, Accept-Language)
    errors = {code: {"model": ErrorResponse} for code in (400, 415, 422)}

    @app.post("/api/translate", response_model=TranslateResponse, responses=errors)
    async def translate(req: TranslateRequest) -> dict[str, Any]:
        """Translate one sentence and return every attention map as nested lists."""
        if not isinstance(service, ModelService):
            return wrong_task("/api/translate", True, "/api/generate")
        try:
            result = await run_in_threadpool(
                service.translate, req.text, req.beam_size, req.allow_unknown, req.merge_pieces
            )
        except InputError as e:
            return error(422, str(e), e.field)
        return {
            **result.maps,
            "text": req.text,
            "translation": result.text,
            "beam_size": result.beam_size,
            "finished": result.finished,
            "seconds": result.seconds,
            "arch": service.arch,
            "unknown_words": result.unknown_words,
        }

    @app.post("/api/generate", response_model=GenerateResponse, responses=errors)
    async def generate(req: GenerateRequest) -> dict[str, Any]:
        """Continue a prompt; a Transformer's response holds each new token's attention."""
        if not isinstance(service, LMService):
            return wrong_task("/api/generate", False, "/api/translate")
        sampling = {"temperature": req.temperature, "top_k": req.top_k, "top_p": req.top_p,
                    "seed": req.seed}  # fmt: skip
        try:
            result = await run_in_threadpool(
                lambda: service.generate(req.prompt, req.max_new_tokens, **sampling)
            )
        except InputError as e:
            return error(422, str(e), e.field)
        return {**vars(result), "arch": service.arch}

    @app.get("/api/info", response_model=InfoResponse, response_model_exclude_none=True)
    async def info() -> dict[str, Any]:
        """The task, the model's architecture, vocabulary sizes and the request limits."""
        return service.info()

    @app.post("/api/nadaraya-watson", response_model=NWResponse, responses=errors)
    async def nw(req: NWRequest) -> dict[str, Any]:
        """Nadaraya-Watson regression of the book's data with a chosen kernel width."""
        return await run_in_threadpool(nadaraya_watson, req.width, req.n_train, req.seed)

    def page() -> Response:  # index.html in the request's language
        language = get_language()
        if language not in pages:
            pages[language] = render_page(static["index.html"].decode("utf-8"), language)
        return _static_response({"index.html": pages[language]}, "index.html")

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        return page()

    @app.get("/static/{name}", include_in_schema=False)
    async def static_file(name: str) -> Response:
        return page() if name == "index.html" else _static_response(static, name)

    return app


def _static_response(static: dict[str, bytes], name: str) -> Response:
    if name not in static:  # a lookup in a fixed table, never a file-system path
        raise HTTPException(404, detail="not found")  # (errors.HTTP_DETAILS translates it)
    return Response(
        static[name],
        media_type=STATIC_FILES[name],
        headers={"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"},
    )


def create_app(
    checkpoint_dir: str | os.PathLike,
    max_chars: int = 200,
    *,
    max_beam: int = 10,
    max_new_tokens: int = 200,
    max_len: int | None = None,
    device: str = "cpu",
) -> FastAPI:
    """Load ``checkpoint_dir`` (``CheckpointLoadError`` on failure) and build the app: a
    translator's (``max_beam``; ``max_len``: the most new tokens of a translation, its end
    token included, as HF's ``max_new_tokens``) or a language model's (``max_new_tokens``)."""
    return create_app_for_service(
        load_service(
            checkpoint_dir,
            device=device,
            max_chars=max_chars,
            max_beam=max_beam,
            max_new_tokens=max_new_tokens,
            max_len=max_len,
        )
    )


def load_service(
    directory: str | os.PathLike,
    *,
    device: str = "cpu",
    max_chars: int = 200,
    max_beam: int = 10,
    max_new_tokens: int = 200,
    max_len: int | None = None,
) -> ModelService | LMService:
    """The service of a checkpoint folder, by its task: a ``ModelService`` for a translator,
    an ``LMService`` for a language model; ``CheckpointLoadError`` with the reason."""
    from attnkit.convert.hf_files import hf_model_type, is_hf_folder

    try:
        if is_hf_folder(directory):  # a Hugging Face folder: GPT-2 is a language model
            task = "lm" if hf_model_type(directory) == "gpt2" else "translation"
        else:
            task = read_checkpoint_config(directory, task=None).get("task", "translation")
    except (OSError, ValueError) as e:
        raise CheckpointLoadError(
            _("cannot load checkpoint {directory}: {reason}").format(directory=directory, reason=e)
        ) from e
    if task != "lm":
        return ModelService.from_checkpoint(
            directory, device=device, max_chars=max_chars, max_beam=max_beam, max_len=max_len
        )
    try:
        return LMService.from_checkpoint(
            directory, device=device, max_chars=max_chars, max_new_tokens=max_new_tokens
        )
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
        raise CheckpointLoadError(
            _("cannot load checkpoint {directory}: {reason}").format(directory=directory, reason=e)
        ) from e
