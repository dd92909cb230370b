"""``attnkit serve``: the attention explorer, a local web page over a checkpoint (its help,
``DESCRIPTION``, says how to use it).
"""

from __future__ import annotations

import argparse
import socket
import sys

from attnkit.i18n import N_, _

__all__ = ["register", "run_serve"]

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")

# `attnkit serve --help`'s description (kept as written: RawDescriptionHelpFormatter)
DESCRIPTION = N_("""``attnkit serve``: the attention explorer, a local web page over a checkpoint.

    attnkit serve --checkpoint runs/transformer            # http://127.0.0.1:8000
    attnkit serve --checkpoint runs/bahdanau --port 8080 --max-chars 120
    attnkit serve --checkpoint runs/lm --max-new-tokens 100   # a language model

A translator (``attnkit translate train``, ``attnkit demo``) gets the translation page; a
language model (``attnkit lm train``) the generation page: a prompt, its continuation,
and each new token's attention over the context per layer and head.

The checkpoint is loaded before the port is bound: a missing or corrupted checkpoint
prints the reason and exits with code 1. The JSON API is documented at /openapi.json.
""")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help=_("web page to translate or generate and look at attention (local server)"),
        description=_(DESCRIPTION),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--checkpoint", required=True, metavar="DIR",
                   help=_("a checkpoint directory"))  # fmt: skip
    p.add_argument("--host", default="127.0.0.1",
                   help=_("address to listen on (default 127.0.0.1)"))  # fmt: skip
    p.add_argument("--port", type=int, default=8000,
                   help=_("port (default 8000; 0 = any free)"))  # fmt: skip
    p.add_argument("--max-chars", type=int, default=200,
                   help=_("longest accepted text (default 200)"))  # fmt: skip
    p.add_argument("--max-beam", type=int, default=10, help=_("largest beam size (default 10)"))
    p.add_argument("--max-new-tokens", type=int, default=200, metavar="N",
                   help=_("language models: most tokens one request may generate (default "
                          "200)"))  # fmt: skip
    p.add_argument("--max-len", type=int, default=None, metavar="N",
                   help=_("translators: at most N new tokens per translation, the end token "
                          "included (HF's max_new_tokens; default: the model's own limit)"))  # fmt: skip
    p.add_argument("--device", default="cpu", help=_("cpu, cuda, cuda:0 ... (default cpu)"))
    p.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    p.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        print(_("attnkit serve: error: --port must be in [0, 65535], got {port}")
              .format(port=args.port), file=sys.stderr)  # fmt: skip
        return 2
    try:
        import uvicorn

        from attnkit.serve import CheckpointLoadError, create_app
    except ImportError as e:  # pragma: no cover - both are dependencies
        print(_("attnkit serve: error: {error}; pip install fastapi uvicorn").format(error=e),
              file=sys.stderr)  # fmt: skip
        return 1
    try:
        app = create_app(
            args.checkpoint, args.max_chars, max_beam=args.max_beam,
            max_new_tokens=args.max_new_tokens, max_len=args.max_len, device=args.device,
        )  # fmt: skip
    except (CheckpointLoadError, ValueError) as e:
        if args.debug:
            raise
        print(_("attnkit serve: error: {error}").format(error=e), file=sys.stderr)
        return 1
    if args.host not in LOCAL_HOSTS:
        print(
            _("attnkit serve: warning: listening on {host}; anyone who can reach it can use the "
              "model (there is no authentication)").format(host=args.host),
            file=sys.stderr,
        )  # fmt: skip
    try:
        sock = _listen(args.host, args.port)
    except OSError as e:
        print(_("attnkit serve: error: cannot listen on {host}:{port}: {error}")
              .format(host=args.host, port=args.port, error=e), file=sys.stderr)  # fmt: skip
        return 1
    port = sock.getsockname()[1]
    print(
        _("attnkit serve: {arch} from {checkpoint} on {url} (Ctrl+C stops)").format(
            arch=app.state.service.arch, checkpoint=args.checkpoint,
            url=f"http://{_url_host(args.host)}:{port}/"),
        file=sys.stderr,
    )  # fmt: skip
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A bound socket for ``host:port`` (so a port in use is a clear error, port 0 works)."""
    family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
