"""attnkit.cpu_memory: glibc's malloc thresholds, set once, where there is a glibc."""

from __future__ import annotations

import subprocess
import sys

import pytest

import attnkit.cpu_memory as cpu_memory


class FakeMallopt:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(cpu_memory, "_done", None)
    monkeypatch.delenv("ATTNKIT_MALLOC", raising=False)


def test_sets_both_thresholds_once(fresh, monkeypatch):
    fake = FakeMallopt()
    monkeypatch.setattr(cpu_memory, "_load_libc", lambda: fake)
    assert cpu_memory.keep_freed_memory() is True
    assert cpu_memory.keep_freed_memory() is True  # the second call does nothing more
    # M_MMAP_THRESHOLD = -3: 32 MiB; M_TRIM_THRESHOLD = -1: 64 MiB (<malloc.h>)
    assert fake.calls == [(-3, 32 * 2**20), (-1, 64 * 2**20)]


def test_no_glibc_or_a_refusal_is_false(fresh, monkeypatch):
    monkeypatch.setattr(cpu_memory, "_load_libc", lambda: None)
    assert cpu_memory.keep_freed_memory() is False
    monkeypatch.setattr(cpu_memory, "_done", None)
    refusing = FakeMallopt(answer=0)
    monkeypatch.setattr(cpu_memory, "_load_libc", lambda: refusing)
    assert cpu_memory.keep_freed_memory() is False
    assert refusing.calls == [(-3, 32 * 2**20)]  # stops at the first refusal


def test_the_environment_opts_out_and_is_checked(fresh, monkeypatch):
    fake = FakeMallopt()
    monkeypatch.setattr(cpu_memory, "_load_libc", lambda: fake)
    monkeypatch.setenv("ATTNKIT_MALLOC", "default")
    assert cpu_memory.keep_freed_memory() is False and fake.calls == []
    monkeypatch.setenv("ATTNKIT_MALLOC", "fast")
    with pytest.raises(ValueError, match="ATTNKIT_MALLOC must be 'tuned' or 'default', got 'fast'"):
        cpu_memory.keep_freed_memory()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_cpu_engine_sets_the_real_thresholds():
    # a fresh interpreter: the real libc, the engine's call
    code = (
        "import attnkit.cpu_memory as m, torch\n"
        "from attnkit.training.engine import Engine\n"
        "from attnkit.training.config import EngineConfig\n"
        "from attnkit.training.task import Task\n"
        "assert m._done is None\n"
        "class T(Task):\n"
        "    def batches(self, *a): return []\n"
        "Engine(torch.nn.Linear(2, 2), T(), EngineConfig(progress=False))\n"
        "print(m._done)\n"
    )
    assert _printed_by_a_fresh_interpreter(code) == str(cpu_memory._load_libc() is not None)


def _printed_by_a_fresh_interpreter(code: str) -> str:
    """What ``code`` prints, run by a new Python (the real libc, nothing set before)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_decoding_also_stops_mapping_blocks_of_their_own(fresh, monkeypatch):
    monkeypatch.setattr(cpu_memory, "_large_done", None)
    fake = FakeMallopt()
    monkeypatch.setattr(cpu_memory, "_load_libc", lambda: fake)
    assert cpu_memory.keep_large_blocks() is True
    assert cpu_memory.keep_large_blocks() is True  # once
    # then M_MMAP_MAX = -4: 0 (no block of its own mapping), M_TRIM_THRESHOLD: 512 MiB
    assert fake.calls == [(-3, 32 * 2**20), (-1, 64 * 2**20), (-4, 0), (-1, 512 * 2**20)]
    monkeypatch.setattr(cpu_memory, "_large_done", None)
    monkeypatch.setenv("ATTNKIT_MALLOC", "default")
    assert cpu_memory.keep_large_blocks() is False and len(fake.calls) == 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_greedy_decoding_on_the_cpu_sets_the_real_decoding_thresholds():
    code = (
        "import attnkit.cpu_memory as m, torch\n"
        "from attnkit.inference.decoding import greedy_decode\n"
        "from attnkit.models.transformer import TransformerConfig, build_transformer\n"
        "model = build_transformer(TransformerConfig(d_model=8, num_heads=2, num_layers=1,"
        " d_ff=16), 10, 10)\n"
        "assert m._large_done is None\n"
        "greedy_decode(model, torch.tensor([[4, 5, 3]]), torch.tensor([3]), bos_id=2,"
        " eos_id=3, max_len=3)\n"
        "print(m._large_done)\n"
    )
    assert _printed_by_a_fresh_interpreter(code) == str(cpu_memory._load_libc() is not None)
