"""100 concurrent translations against the explorer's server: one model lock vs none.

Starts uvicorn in this process (a thread) on a free port for each mode, sends ``--requests``
``POST /api/translate`` requests at once (httpx, one connection each), and prints the wall
time, the throughput and the latency percentiles of each mode, side by side, in one run:

    python -m benchmarks.models.serve_concurrency --checkpoint runs/demo/checkpoint --requests 100

``one at a time``: every translation under one lock (the explorer before attention maps
were values); ``2 at a time``: at most two (``ModelService(max_concurrent=2)``, the
default); ``unbounded``: every request at once (each records its maps in its own context).
Every response is checked against the same sentence translated alone.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import threading
import time

import httpx
import uvicorn

from attnkit.serve.app import create_app_for_service
from attnkit.serve.model_service import ModelService
from benchmarks.harness import set_threads

MODES = {"one at a time": 1, "2 at a time": 2, "unbounded": None}  # max_concurrent
SENTENCES = [
    "the happy girl watches the cat .",
    "they are not beautiful .",
    "the cat is happy .",
    "the red cars are not big .",
    "we eat the green apples .",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _hammer(url: str, n: int, beam: int) -> tuple[float, list[float], list[dict]]:
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def one(i: int):
            start = time.perf_counter()
            body = {"text": SENTENCES[i % len(SENTENCES)], "beam_size": beam}
            r = await client.post("/api/translate", json=body)
            r.raise_for_status()
            return time.perf_counter() - start, r.json()

        start = time.perf_counter()
        results = await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - start, [t for t, _ in results], [j for _, j in results]


def run(service: ModelService, n: int, beam: int) -> tuple[float, list[float], list[dict]]:
    port = _free_port()
    config = uvicorn.Config(
        create_app_for_service(service), host="127.0.0.1", port=port, log_level="error"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        return asyncio.run(_hammer(f"http://127.0.0.1:{port}", n, beam))
    finally:
        server.should_exit = True
        thread.join()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--requests", type=int, default=100)
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    set_threads(args.threads)
    alone = {}
    rows = {}
    for repeat in range(args.repeats):
        for mode, bound in MODES.items():
            service = ModelService.from_checkpoint(args.checkpoint, max_concurrent=bound)
            if not alone:
                alone = {s: service.translate(s, args.beam) for s in SENTENCES}
            wall, latencies, bodies = run(service, args.requests, args.beam)
            for body in bodies:  # the same answer as alone: no request saw another's state
                ref = alone[body["text"]]
                assert body["translation"] == ref.text, body["text"]
                assert body["cross"] == ref.maps["cross"], body["text"]
            rows.setdefault(mode, []).append((wall, latencies))
            print(f"repeat {repeat + 1} {mode}: {wall:.2f} s", flush=True)
    print(f"\n{args.requests} concurrent translations (beam {args.beam}), {args.threads} torch "
          f"threads, median of {args.repeats}:\n")  # fmt: skip
    print("| mode | wall s | translations/s | p50 latency s | p95 latency s |")
    print("| --- | --- | --- | --- | --- |")
    walls = {}
    for mode, runs in rows.items():
        wall, latencies = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
        walls[mode] = wall
        q = statistics.quantiles(latencies, n=20)
        print(f"| {mode} | {wall:.2f} | {args.requests / wall:.1f} | "
              f"{statistics.median(latencies):.2f} | {q[18]:.2f} |")  # fmt: skip
    for mode in MODES:
        print(f"{mode} / one at a time, throughput: {walls['one at a time'] / walls[mode]:.2f}x")


if __name__ == "__main__":
    main()
