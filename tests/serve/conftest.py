"""Explorer test fixtures: tiny checkpoints (translators, language models), live servers."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

with warnings.catch_warnings():  # starlette's notice about httpx versions
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from attnkit.data.translation import load_translation_data
from attnkit.models.registry import build_model
from attnkit.serve import create_app
from attnkit.training.translation import TrainConfig, Trainer


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--explorer-screenshot",
        action="store_true",
        help="the browser test also writes docs/explorer.png (the README screenshot)",
    )


TINY = {"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32, "dropout": 0.0}
# --explorer-screenshot: a model that translates well enough to show (about 30 s to train)
SHOWCASE = {"d_model": 32, "num_heads": 4, "num_layers": 2, "d_ff": 64, "dropout": 0.1}


def make_checkpoint(
    directory: Path,
    arch: str = "transformer",
    epochs: int = 0,
    config: dict | None = None,
    num_pairs: int = 1200,
) -> Path:
    """A small checkpoint of ``arch`` trained ``epochs`` epochs (0: initial weights)."""
    torch.manual_seed(0)
    data = load_translation_data(num_pairs=num_pairs, seed=1)
    if config is None:
        config = TINY if arch == "transformer" else {"embed_size": 8, "num_hiddens": 8}
    model = build_model(arch, config, len(data.src_vocab), len(data.tgt_vocab))
    train = TrainConfig(
        epochs=max(epochs, 1),
        out_dir=str(directory),
        progress=False,
        bleu_sentences=20,
        eval_every=max(epochs, 1),
    )
    trainer = Trainer(model, data, train, arch=arch, model_config=config)
    if epochs:
        trainer.fit()
    else:
        trainer.save()
    return directory


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory, request) -> Path:
    directory = tmp_path_factory.mktemp("serve") / "transformer"
    if request.config.getoption("--explorer-screenshot"):
        return make_checkpoint(directory, epochs=30, config=SHOWCASE, num_pairs=3000)
    return make_checkpoint(directory)


@pytest.fixture(scope="session")
def bahdanau_checkpoint(tmp_path_factory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("serve") / "bahdanau", arch="bahdanau")


@pytest.fixture(scope="session")
def app(checkpoint):
    return create_app(checkpoint, max_chars=200)


@pytest.fixture(scope="session")
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


@contextmanager
def serving(app) -> Iterator[str]:
    """``app`` served by uvicorn on a free localhost port, in a thread; yields its URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="session")
def live_server(app) -> Iterator[str]:
    with serving(app) as url:
        yield url


LM_TEXT = "the time machine by h g wells the time traveller for so it will be convenient"


def make_lm_checkpoint(
    directory: Path, arch: str = "transformer", context_length: int = 32, tokenizer=None
) -> Path:
    """A language-model checkpoint of ``attnkit lm train``'s format with initial weights:
    a small Transformer (RoPE, 2 layers, 2 heads) or a GRU over characters, or over the
    pieces of a SentencePiece ``tokenizer``."""
    from attnkit.data.text import Vocab
    from attnkit.models.decoder_lm import DecoderLMConfig
    from attnkit.models.registry import lm_config
    from attnkit.training.lm import save_lm_checkpoint

    torch.manual_seed(0)
    vocab = Vocab(list(LM_TEXT)) if tokenizer is None else tokenizer.vocab
    if arch == "transformer":
        config = DecoderLMConfig(d_model=16, num_heads=2, num_layers=2, ffn_hidden=32,
                                 dropout=0.0, context_length=context_length)  # fmt: skip
        model = config.build(len(vocab))
        record = {"arch": "transformer", **model.config.to_dict()}
    else:
        config = lm_config("rnn", {"cell": "gru", "num_hiddens": 8})
        model = config.build(len(vocab))
        record = {"arch": "rnn", **dataclasses.asdict(config)}
    if tokenizer is None:
        record["token"] = "char"
    else:
        record.update(tokenizer="sentencepiece", tokenizer_model=tokenizer.meta())
    save_lm_checkpoint(directory, model, vocab, record)
    if tokenizer is not None:
        tokenizer.save(directory)
    return directory


@pytest.fixture(scope="session")
def make_lm():
    """``make_lm_checkpoint`` itself, for tests that build their own."""
    return make_lm_checkpoint


@pytest.fixture(scope="session")
def lm_checkpoint(tmp_path_factory) -> Path:
    return make_lm_checkpoint(tmp_path_factory.mktemp("serve") / "lm")


@pytest.fixture(scope="session")
def lm_app(lm_checkpoint):
    return create_app(lm_checkpoint, max_new_tokens=30)


@pytest.fixture(scope="session")
def lm_server(lm_app) -> Iterator[str]:
    with serving(lm_app) as url:
        yield url


@pytest.fixture(scope="session")
def bahdanau_app(bahdanau_checkpoint):
    return create_app(bahdanau_checkpoint)


@pytest.fixture(scope="session")
def bahdanau_server(bahdanau_app) -> Iterator[str]:
    with serving(bahdanau_app) as url:
        yield url
