"""``attnkit lm generate``: continue prompts with a language model of ``attnkit lm train``.

    attnkit lm generate --checkpoint runs/lm --prompt "time traveller" --max-new-tokens 80 \
        --temperature 0.8 --top-k 20 --top-p 0.9 --seed 1
    attnkit lm generate --checkpoint runs/lm --input prompts.txt      # one prompt a line

One ``--prompt``: its continuation is printed as it is generated (a token at a time).
``--input FILE``: every non-blank line is a prompt; they are generated together in batches
(left-padded, each row as it would be alone) and printed one line each, in order.
Character and word models see their prompts normalized like their corpus (letters,
lowercase; said on stderr when that changes a prompt); SentencePiece and GPT-2 models
take the text as it is. ``--checkpoint`` also takes a GPT-2 folder (or hub name, fetched
when online) directly, or the checkpoint ``attnkit lm import`` wrote; ``--int8`` runs the
linear layers with int8 weights (CPU); ``--heatmap PNG`` draws a Transformer's attention of
every new token over its context (the explorer's rows, ``attnkit.serve.lm_service``).
``--temperature 0`` (the default) is greedy; ``--seed`` repeats a sample.
A prompt longer than a Transformer's context is cut, with a warning on stderr, where its
positions extrapolate (RoPE, ALiBi, none), and refused otherwise. Generation stops, as
transformers' ``generate`` does, at the model's end-of-text id (a GPT-2's
``<|endoftext|>``; ``--ignore-eos`` goes on past it), and, for positions that stop at the
context (learned, sinusoidal: GPT-2's), when the context is full, said on stderr.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from attnkit.i18n import _

__all__ = ["register_generate", "run_generate"]

# the generate() arguments as the command line spells them (for its error messages)
_FLAGS = {"max_new_tokens": "--max-new-tokens", "temperature": "--temperature",
          "top_k": "--top-k", "top_p": "--top-p", "seed": "--seed"}  # fmt: skip


def register_generate(verbs) -> None:
    g = verbs.add_parser("generate", help=_("continue prompts with a trained language model"))
    g.add_argument("--checkpoint", required=True, metavar="DIR",
                   help=_("folder from `lm train` or `lm import`, or a GPT-2 folder or hub "
                          "name"))  # fmt: skip
    prompts = g.add_mutually_exclusive_group(required=True)
    prompts.add_argument("--prompt", metavar="TEXT", help=_("one prompt, streamed as it comes"))
    prompts.add_argument("--input", metavar="FILE",
                         help=_("a UTF-8 file of prompts, one a line"))  # fmt: skip
    g.add_argument("--max-new-tokens", type=int, default=50, metavar="N",
                   help=_("tokens to add to each prompt (default 50)"))  # fmt: skip
    g.add_argument("--temperature", type=float, default=0.0,
                   help=_("0 = greedy (default); > 0 samples from softmax(logits / T)"))  # fmt: skip
    g.add_argument("--top-k", type=int, default=None, metavar="K",
                   help=_("sample among the K most likely tokens only"))  # fmt: skip
    g.add_argument("--top-p", type=float, default=None, metavar="P",
                   help=_("sample in the nucleus: the smallest set of tokens with mass >= P, "
                          "in (0, 1]"))  # fmt: skip
    g.add_argument("--seed", type=int, default=None,
                   help=_("seed of the sampling (the same seed: the same sample)"))  # fmt: skip
    g.add_argument("--ignore-eos", action="store_true",
                   help=_("go on past the model's end-of-text token (GPT-2's <|endoftext|>); "
                          "default: stop there"))  # fmt: skip
    g.add_argument("--batch-size", type=int, default=32, metavar="B",
                   help=_("--input prompts generated together (default 32)"))  # fmt: skip
    g.add_argument("--device", default="cpu")
    g.add_argument("--heatmap", metavar="PNG",
                   help=_("with --prompt, a Transformer: each new token's attention over its "
                          "context, one panel per layer (mean over heads), drawn into PNG (the "
                          "text is printed when done, not streamed)"))  # fmt: skip
    g.add_argument("--int8", action="store_true",
                   help=_("int8 weights in the linear layers (CPU; attnkit.inference.int8)"))  # fmt: skip
    g.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    g.set_defaults(func=run_generate)


def _in_flags(error: Exception) -> Exception:
    """``error`` with its leading argument name as the flag that set it."""
    message = str(error)
    for name, flag in _FLAGS.items():
        # "temperature must be ..." (English), "temperature必须是..." (Chinese)
        after = message[len(name) : len(name) + 1]
        if message.startswith(name) and not (after.isascii() and (after.isalnum() or after == "_")):
            return type(error)(flag + message[len(name) :])
    return error


def _options(a: argparse.Namespace) -> dict:
    """The sampling options, checked before the model is loaded."""
    from attnkit._validate import non_negative_int, positive_int
    from attnkit.inference.sampling import token_picker

    try:
        non_negative_int("max_new_tokens", a.max_new_tokens)
        token_picker(a.temperature, a.top_k, a.top_p, a.seed)
    except (TypeError, ValueError) as e:
        raise _in_flags(e) from None
    positive_int("--batch-size", a.batch_size)
    return {"temperature": a.temperature, "top_k": a.top_k, "top_p": a.top_p, "seed": a.seed}


def _prompts(a: argparse.Namespace, normalize) -> list[str]:
    """The prompts of --prompt or --input (blank lines skipped), normalized like the
    corpus for character and word models (``normalize``: None for subword models)."""
    if a.prompt is not None:
        texts, where = [a.prompt], ["--prompt"]
    else:
        path = Path(a.input)
        if not path.is_file():
            raise FileNotFoundError(_("--input {path} does not exist or is not a file")
                                    .format(path=repr(str(path))))  # fmt: skip
        lines = path.read_text(encoding="utf-8").splitlines()
        found = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
        if not found:
            raise ValueError(_("--input {path} holds no prompt (every line is blank)")
                             .format(path=path))  # fmt: skip
        texts = [t for _n, t in found]
        where = [_("--input {path} line {n}").format(path=path, n=n) for n, _t in found]
    for w, t in zip(where, texts, strict=True):
        if not t.strip():
            raise ValueError(_("{where} is empty: a prompt needs at least one token to continue")
                             .format(where=w))  # fmt: skip
    if normalize is None:
        return texts
    out = [normalize(t) for t in texts]
    for w, t, n in zip(where, texts, out, strict=True):
        if not n:
            raise ValueError(
                _("{where} {prompt} has no letter: the model reads letters and spaces only (its "
                  "corpus was normalized so), nothing is left to continue")
                .format(where=w, prompt=repr(t))
            )  # fmt: skip
    changed = [t for t, n in zip(texts, out, strict=True) if t != n]
    if len(texts) == 1 and changed:
        print(_("prompt normalized like the corpus: {before} -> {after}")
              .format(before=repr(texts[0]), after=repr(out[0])), file=sys.stderr)  # fmt: skip
    elif changed:
        print(_("{n} of {total} prompts normalized like the corpus (letters, lowercase)")
              .format(n=len(changed), total=len(texts)), file=sys.stderr)  # fmt: skip
    return out


def _warn_on_stderr(message, category, filename, lineno, file=None, line=None) -> None:
    print(_("attnkit lm generate: warning: {message}").format(message=message), file=sys.stderr,
          flush=True)  # fmt: skip


def run_generate(a: argparse.Namespace) -> int:
    from attnkit.data.lm import normalize_line
    from attnkit.inference.generation import ContextFullWarning, PromptCutWarning, generate
    from attnkit.inference.loading import lm_eos_id, load_lm_checkpoint, load_lm_tokenizer

    options = _options(a)
    heatmap = None if a.heatmap is None else _heatmap_path(a)
    if a.int8 and a.device != "cpu":
        raise ValueError(_("--int8 runs on the CPU only, got --device {device}")
                         .format(device=a.device))  # fmt: skip
    model, vocab, config = load_lm_checkpoint(a.checkpoint, a.device)
    if a.int8:
        from attnkit.inference.int8 import quantize_int8

        quantize_int8(model)
    tokenizer = load_lm_tokenizer(a.checkpoint, config)
    if tokenizer is not None:
        codec, normalize = {"tokenizer": tokenizer}, None
    else:
        codec, normalize = {"vocab": vocab, "token": config.get("token", "char")}, normalize_line
    prompts = _prompts(a, normalize)
    if heatmap is not None:
        return _with_heatmap(model, vocab, config, tokenizer, prompts[0], a, options, heatmap)
    eos = None if a.ignore_eos else lm_eos_id(config, tokenizer)
    kwargs = {"max_new_tokens": a.max_new_tokens, "device": a.device, "eos_id": eos,
              "stop_at_context": True, **codec, **options}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("always", PromptCutWarning)
        warnings.simplefilter("always", ContextFullWarning)
        warnings.showwarning = _warn_on_stderr  # one line, as it happens (restored on exit)
        if a.prompt is not None:  # streamed: the prompt, then each token as it comes
            _stream(model, prompts[0], kwargs)
            return 0
        for start in range(0, len(prompts), a.batch_size):
            for text in generate(model, prompts[start : start + a.batch_size], **kwargs):
                print(text, flush=True)
    return 0


def _heatmap_path(a: argparse.Namespace) -> Path:
    """--heatmap's path, checked before the model loads: --prompt only, an image file
    matplotlib writes, in an existing folder."""
    from attnkit.cli.translate_trained import _check_heatmap_path

    if a.prompt is None:
        raise ValueError(_("--heatmap draws one prompt's attention: give --prompt, not --input"))
    return _check_heatmap_path(a.heatmap)


def _with_heatmap(model, vocab, config, tokenizer, prompt: str, a, options, path: Path) -> int:
    """Generate with the explorer's service (the same generation and attention rows),
    print the text and draw (L, N, K) rows, the heads' mean, into ``path``."""
    import matplotlib.pyplot as plt
    import torch

    from attnkit.serve.lm_service import LMService
    from attnkit.viz import figure_text, show_heatmaps

    if getattr(model, "context_length", None) is None:
        raise ValueError(
            _("--heatmap needs a Transformer language model: an RNN has no attention"))  # fmt: skip
    service = LMService(model, vocab, config, tokenizer, max_chars=len(prompt),
                        max_new_tokens=max(1, a.max_new_tokens), max_concurrent=None)  # fmt: skip
    res = service.generate(prompt, a.max_new_tokens, **options)
    print(res.text, flush=True)
    rows = torch.tensor(res.attention).mean(1)  # (L, N, K): each layer, heads averaged
    context = [*res.prompt_tokens, *res.new_tokens[:-1]]  # K: what each new token could see
    with figure_text():  # in the language figures are drawn in
        xlabel, ylabel = _("context"), _("new token")
        titles = [_("layer {n}").format(n=i + 1) for i in range(len(rows))]
    fig = show_heatmaps(
        rows.unsqueeze(0), xlabel, ylabel, titles,
        figsize=(max(2.5, 0.3 * len(context)), max(2.5, 0.3 * len(res.new_tokens))),
        xticklabels=[repr(t)[1:-1] for t in context],
        yticklabels=[repr(t)[1:-1] for t in res.new_tokens], path=path,
    )  # fmt: skip
    plt.close(fig)
    print(_("attention of the {n} new tokens: {path}").format(n=len(res.new_tokens), path=path),
          file=sys.stderr)  # fmt: skip
    return 0


def _stream(model, text: str, kwargs: dict) -> None:
    """Print ``text``, then each new token's text as soon as it is chosen (the prompt waits
    for generate's checks: an error is all that is printed)."""
    from attnkit.inference.generation import generate

    shown = []

    def show(_row: int, piece: str) -> None:
        if not shown:
            print(text, end="")
            shown.append(True)
        print(piece, end="", flush=True)

    generate(model, text, stream=show, **kwargs)
    print("" if shown else text, flush=True)
