"""100 concurrent requests against a real uvicorn server complete without error."""

from __future__ import annotations

import asyncio
import time

import httpx

SENTENCES = ["the happy girl watches the cat .", "they are not beautiful .", "the cat is happy ."]


async def _hammer(url: str, n: int) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:

        def request(i: int):
            kind = i % 10
            if kind == 0:
                return client.get("/api/info")
            if kind == 1:
                return client.post("/api/nadaraya-watson", json={"width": 0.1 + i / 100})
            if kind == 2:  # a bad request among good ones
                return client.post("/api/translate", json={"text": ""})
            body = {"text": SENTENCES[i % 3], "beam_size": 1 + i % 3}
            return client.post("/api/translate", json=body)

        return await asyncio.gather(*(request(i) for i in range(n)))


def test_100_concurrent_requests(live_server):
    start = time.perf_counter()
    responses = asyncio.run(asyncio.wait_for(_hammer(live_server, 100), timeout=60))
    elapsed = time.perf_counter() - start
    assert len(responses) == 100
    for i, r in enumerate(responses):
        assert r.status_code == (422 if i % 10 == 2 else 200), (i, r.text)
    translations = {}
    for i, r in enumerate(responses):
        if i % 10 > 2:
            key = (SENTENCES[i % 3], 1 + i % 3)
            translations.setdefault(key, r.json()["translation"])
            assert r.json()["translation"] == translations[key]  # no mixed-up state
    assert elapsed < 60
    # and it still serves afterwards
    assert httpx.get(f"{live_server}/api/info", timeout=10).status_code == 200
