"""Shared test setup: seed everything, keep threads low, find optional real data."""

from __future__ import annotations

import os
import random
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
# spawned worker processes (the DDP tests) unpickle functions of ``tests.*`` modules: with
# the repository root on sys.path (inherited by spawn) that works under plain `pytest` too,
# not only `python -m pytest`
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


# the suite asserts English messages whatever the machine's locale (tests/i18n choose
# their languages themselves); subprocesses inherit it
os.environ["ATTNKIT_LANG"] = "en"

# tiny models on a 2-core machine shared with other jobs: one intra-op thread avoids
# oversubscription (the recurrent models' many tiny matmuls get tens of times slower)
torch.set_num_threads(1)


@pytest.fixture
def drawn(monkeypatch):
    """(maps, panel titles) of every plot_attention_maps call the CLI makes."""
    import importlib

    module = importlib.import_module("attnkit.inference.attention_maps")
    plot = module.plot_attention_maps
    calls = []

    def spy(maps, path, all_heads=False):
        calls.append((maps, plot(maps, path, all_heads=all_heads)))
        return calls[-1][1]

    monkeypatch.setattr(module, "plot_attention_maps", spy)
    return calls


@pytest.fixture(autouse=True)
def _seed() -> None:
    random.seed(0)
    torch.manual_seed(0)


def real_data_file(env: str, relative: str) -> Path:
    """Path of a real dataset from ``$env`` or ../shared/data; skip the test when absent."""
    path = Path(os.environ[env]) if env in os.environ else SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"real dataset not available ({path}); set {env} to run this test")
    return path


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fra_file(monkeypatch) -> Path:
    """The real Tatoeba ``fra.txt`` (skips when absent); also sets ``$ATTNKIT_FRA``."""
    path = real_data_file("ATTNKIT_FRA", "fra-eng/fra.txt")
    monkeypatch.setenv("ATTNKIT_FRA", str(path))
    return path


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """A function giving a free TCP port on 127.0.0.1 (for torch.distributed's rendezvous)."""

    def pick() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    return pick


def _written(sentence: str, french: bool) -> str:
    """A generated book-form sentence ("the cat is happy .") written the ordinary way:
    a capital, the final mark attached in English, a narrow no-break space in French."""
    words = sentence.split()
    text, mark = " ".join(words[:-1]), words[-1]
    space = "\u202f" if french and mark in "!?" else ""
    return text[0].upper() + text[1:] + space + mark


@pytest.fixture(scope="session")
def real_format_file(tmp_path_factory) -> Callable[..., Path]:
    """A function writing ``n`` pairs in the real ``fra.txt`` format (capitals, attached
    English punctuation, French narrow no-break spaces), made from the generated corpus."""
    from attnkit.data.synthetic_fr import generate_pairs

    def write(n: int = 400, seed: int = 0) -> Path:
        path = tmp_path_factory.mktemp("fra") / "fra.txt"
        pairs = generate_pairs(n, seed)
        lines = [f"{_written(en, False)}\t{_written(fr, True)}" for en, fr in pairs]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    return write


# a tiny pre-norm subword Transformer (2 + 2 layers, d_model 32): seconds to train
SUBWORD_TRAIN = [
    "translate", "train", "--arch", "transformer", "--tokenizer", "sentencepiece",
    "--vocab-size", "400", "--d-model", "32", "--num-layers", "2", "--d-ff", "64",
    "--num-heads", "4", "--batch-tokens", "1024", "--bleu-sentences", "8", "--epochs", "12",
    "--lr", "0.005", "--dropout", "0", "--pre-norm", "true", "--no-progress", "--threads", "1",
]  # fmt: skip


@pytest.fixture(scope="session")
def subword_train_argv() -> list[str]:
    """The command line of ``subword_checkpoint`` (without --data and --out)."""
    return list(SUBWORD_TRAIN)


@pytest.fixture(scope="session")
def subword_checkpoint(real_format_file, tmp_path_factory) -> Path:
    """``SUBWORD_TRAIN`` on 300 real-format pairs (``real_format_file(300, seed=1)``), once
    per session: varied translations, most of them ending with <eos>. Read it, never write
    into it."""
    import torch

    from attnkit.cli import main

    out = tmp_path_factory.mktemp("subword") / "tf"
    threads = torch.get_num_threads()
    try:
        argv = [*SUBWORD_TRAIN, "--data", str(real_format_file(300, seed=1)), "--out", str(out)]
        assert main(argv) == 0
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.fixture(scope="session")
def tiny_data():
    """~300 generated EN-FR pairs (seconds to train on)."""
    from attnkit.data.translation import load_translation_data

    return load_translation_data(None, num_pairs=300, max_len=12, seed=0)


@pytest.fixture
def tiny_model(tiny_data):
    """A function building a tiny translator of ``tiny_data``'s vocabularies."""
    from attnkit.models.registry import build_model

    def make(arch: str = "bahdanau", seed: int = 0, **config):
        torch.manual_seed(seed)
        config = {"embed_size": 16, "num_hiddens": 16, "num_layers": 2, "dropout": 0.1, **config}
        return build_model(arch, config, len(tiny_data.src_vocab), len(tiny_data.tgt_vocab))

    return make


class LMRuns:
    """Language-model checkpoints compared: two runs that should have ended identically."""

    @staticmethod
    def state(out: Path) -> dict:
        """The checkpoint's trainer state, with its weights and history added."""
        from attnkit.checkpoint import load_checkpoint

        ck = load_checkpoint(out, task="lm")
        return {**ck.trainer_state, "model": ck.model_state, "history": ck.config["history"]}

    @classmethod
    def assert_same(cls, a: Path, b: Path) -> None:
        """Equal weights bit for bit, the same epoch (b at an epoch's end), the same losses."""
        sa, sb = cls.state(a), cls.state(b)
        assert sa["model"].keys() == sb["model"].keys()
        for name, value in sa["model"].items():
            assert torch.equal(value, sb["model"][name]), name
        assert sa["epoch"] == sb["epoch"] and sb["batch_in_epoch"] == 0
        assert sb["history"]["train_loss"] == pytest.approx(sa["history"]["train_loss"], rel=1e-12)


@pytest.fixture
def lm_runs() -> type[LMRuns]:
    return LMRuns
