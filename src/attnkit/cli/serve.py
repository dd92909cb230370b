"""``attnkit serve``: the attention explorer, a local web page over a checkpoint.

    attnkit serve --checkpoint runs/transformer            # http://127.0.0.1:8000
    attnkit serve --checkpoint runs/bahdanau --port 8080 --max-chars 120
    attnkit serve --checkpoint runs/lm --max-new-tokens 100   # a language model

A translator (``attnkit translate train``, ``attnkit demo``) gets the translation page; a
language model (``attnkit lm train``) the generation page: a prompt, its continuation,
and each new token's attention over the context per layer and head.

The checkpoint is loaded before the port is bound: a missing or corrupted checkpoint
prints the reason and exits with code 1. The JSON API is documented at /openapi.json.
"""

from __future__ import annotations

import argparse
import socket
import sys

__all__ = ["register", "run_serve"]

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="web page to translate or generate and look at attention (local server)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--checkpoint", required=True, metavar="DIR", help="a checkpoint directory")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any free)")
    p.add_argument("--max-chars", type=int, default=200, help="longest accepted text (default 200)")
    p.add_argument("--max-beam", type=int, default=10, help="largest beam size (default 10)")
    p.add_argument("--max-new-tokens", type=int, default=200, metavar="N",
                   help="language models: most tokens one request may generate (default 200)")  # fmt: skip
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:0 ... (default cpu)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        print(
            f"attnkit serve: error: --port must be in [0, 65535], got {args.port}", file=sys.stderr
        )
        return 2
    try:
        import uvicorn

        from attnkit.serve import CheckpointLoadError, create_app
    except ImportError as e:  # pragma: no cover - both are dependencies
        print(f"attnkit serve: error: {e}; pip install fastapi uvicorn", file=sys.stderr)
        return 1
    try:
        app = create_app(
            args.checkpoint, args.max_chars, max_beam=args.max_beam,
            max_new_tokens=args.max_new_tokens, device=args.device,
        )  # fmt: skip
    except (CheckpointLoadError, ValueError) as e:
        if args.debug:
            raise
        print(f"attnkit serve: error: {e}", file=sys.stderr)
        return 1
    if args.host not in LOCAL_HOSTS:
        print(
            f"attnkit serve: warning: listening on {args.host}; anyone who can reach it "
            "can use the model (there is no authentication)",
            file=sys.stderr,
        )
    try:
        sock = _listen(args.host, args.port)
    except OSError as e:
        print(
            f"attnkit serve: error: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr
        )
        return 1
    port = sock.getsockname()[1]
    print(
        f"attnkit serve: {app.state.service.arch} from {args.checkpoint} on "
        f"http://{_url_host(args.host)}:{port}/ (Ctrl+C stops)",
        file=sys.stderr,
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A bound socket for ``host:port`` (so a port in use is a clear error, port 0 works)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
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
