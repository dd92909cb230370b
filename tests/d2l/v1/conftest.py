"""Fixtures for attnkit.d2l.v1: small data files in tmp_path, no network."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
import torch

FRA_LINES = [
    "Go.\tVa !",
    "Hi.\tSalut !",
    "Run!\tCours\u202f!",
    "Run!\tCourez\u202f!",
    "Who?\tQui ?",
    "Wow!\tÇa alors\u202f!",
    "Fire!\tAu feu !",
    "Help!\tÀ l'aide\u202f!",
    "Jump.\tSaute.",
    "Stop!\tÇa suffit\u202f!",
    "Stop!\tStop\u202f!",
    "Wait!\tAttends !",
    "Wait!\tAttendez !",
    "Go on.\tPoursuis.",
    "Go on.\tContinuez.",
    "Hello!\tBonjour !",
    "I see.\tJe comprends.",
    "I try.\tJ'essaye.",
    "I won!\tJ'ai gagné !",
    "I lost.\tJ'ai perdu.",
    "He's calm.\tIl est calme.",
    "I'm home.\tJe suis chez moi.",
    "I'm OK.\tJe vais bien.",
    "Go away!\tVa-t'en !",
    "not a pair",
    "Be calm.\tSois calme !",
]


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No network, an empty attnkit cache, no ATTNKIT_* data variables, one torch thread."""

    def refuse(*args, **kwargs):
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTNKIT_FRA", raising=False)
    monkeypatch.delenv("ATTNKIT_TIMEMACHINE", raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def fra_root(tmp_path):
    """A book-style data folder: root/fra-eng/fra.txt (as the book's extract leaves it)."""
    root = tmp_path / "data"
    (root / "fra-eng").mkdir(parents=True)
    (root / "fra-eng" / "fra.txt").write_text("\n".join(FRA_LINES) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def timemachine_file(tmp_path):
    path = tmp_path / "tm.txt"
    path.write_text(
        "The Time Machine, by H. G. Wells [1898]\n\nI\nThe Time Traveller (for so it will be "
        "convenient to speak of him)\nwas expounding a recondite matter to us.\nThe quick brown fox jumps over the lazy dog.\n",
        encoding="utf-8",
    )
    return path
