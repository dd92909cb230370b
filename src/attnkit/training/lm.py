"""Language modelling on the engine (the book's ``train_ch8``), checkpoints and sampling.

Shape legend: B batch, T steps, V vocabulary.

``LMTask`` is the adapter: minibatches ``(X, Y)`` (B, T) from a loader such as
``LMDataLoader``; truncated backprop through time (with sequential partitioning the
hidden state is carried across minibatches but detached, with random sampling it is
re-initialized); the mean cross-entropy per token. The engine adds clipping, the
optimizer (SGD as the book, Adam, or the book's scratch ``sgd`` updater), DDP, Ctrl-C,
checkpoints and exact resume: the loader's ``random.Random`` state at the start of the
epoch and, mid-epoch, the carried hidden state gathered over ranks into global batch rows
are part of the trainer state, so a resumed run sees the batches of an uninterrupted one
with any number of processes.

``train_lm``/``train_epoch`` are the function forms; ``perplexity`` is
``attnkit.metrics.perplexity`` (exp of the mean NLL per token).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from attnkit.data.text import Vocab
from attnkit.metrics import perplexity
from attnkit.models.rnn import RNNLM, build_lm
from attnkit.training.checkpoint import (
    CONFIG_NAME,
    is_legacy_lm_checkpoint,
    load_checkpoint,
    load_model_state,
    save_checkpoint,
)
from attnkit.training.engine import Engine, EngineConfig, StepLoss, Task

__all__ = [
    "MODEL_KEYS",
    "EpochStats",
    "LMHistory",
    "LMTask",
    "detach_state",
    "generate",
    "load_lm_checkpoint",
    "save_lm_checkpoint",
    "train_epoch",
    "train_lm",
]

# config keys that define the model (the rest is informational)
MODEL_KEYS = ("cell", "num_hiddens", "num_layers", "bidirectional", "scratch", "reset_after")


@dataclass
class EpochStats:
    perplexity: float
    tokens_per_sec: float
    num_tokens: int
    seconds: float


@dataclass
class LMHistory:
    perplexity: list[float] = field(default_factory=list)
    tokens_per_sec: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @classmethod
    def from_engine(cls, history: dict[str, list[float]]) -> LMHistory:
        return cls(
            [perplexity(x) for x in history["train_loss"]],
            list(history["tokens_per_s"]),
            float(sum(history.get("seconds", []))),
        )


def detach_state(state):
    """Cut the autograd graph at a minibatch boundary (tensor or tuple of tensors)."""
    if isinstance(state, tuple | list):
        return type(state)(s.detach() for s in state)
    return state.detach()


def _module(model):
    return model.module if isinstance(model, DistributedDataParallel) else model


def _map_state(state, fn):
    if isinstance(state, tuple | list):
        return type(state)(fn(s) for s in state)
    return fn(state)


class LMTask(Task):
    """Truncated BPTT on ``data_iter``'s ``(X, Y)`` minibatches (see the module docstring).

    ``loss``: None for the token-mean cross-entropy, or the book's ``loss(y_hat, y)``
    (its mean is the objective). ``run_config`` and ``vocab``: what a checkpoint records
    (the CLI's options).
    """

    name = "lm"

    def __init__(
        self,
        data_iter: Iterable[tuple[Tensor, Tensor]],
        *,
        use_random_iter: bool = False,
        loss: Callable[[Tensor, Tensor], Tensor] | None = None,
        vocab: Vocab | None = None,
        run_config: dict[str, Any] | None = None,
    ) -> None:
        self.data_iter = data_iter
        self.use_random_iter = use_random_iter
        self.loss_fn = loss
        self.vocab = vocab
        self.run_config = dict(run_config or {})

    def batches(self, epoch: int, rank: int, world_size: int):
        return self.data_iter  # a loader built for this rank (LMDataLoader(rank=, world_size=))

    def loss(self, engine: Engine, batch, carry) -> StepLoss:
        X, Y = batch  # (B, T), (B, T)
        device = engine.device
        if carry is None or self.use_random_iter:
            state = _module(engine.net).begin_state(batch_size=X.shape[0], device=device)
        else:
            state = detach_state(carry)
        y = Y.T.reshape(-1).to(device).long()  # (T*B,), time-major like the logits
        y_hat, state = engine.net(X.to(device), state)  # (T*B, V)
        n = y.numel()
        if self.loss_fn is None:
            return StepLoss(F.cross_entropy(y_hat, y, reduction="sum"), n, carry=state)
        mean = self.loss_fn(y_hat, y).mean()
        return StepLoss(mean * n, n, carry=state)  # the objective: mean * n / n

    def epoch_line(self, engine: Engine, row: dict[str, float]) -> str:
        return (
            f"epoch {row['epoch']}/{engine.config.epochs}: perplexity "
            f"{perplexity(row['train_loss']):.2f}, {row['tokens_per_s']:,.0f} tokens/s"
        )

    def checkpoint_config(self, engine: Engine) -> dict[str, Any]:
        config = {**self.run_config, "epochs_done": engine.epoch}
        if self.vocab is not None:
            config["vocab"] = self.vocab.to_dict()
        return config

    def check_resume(self, config: dict[str, Any], directory: Path) -> None:
        changed = [
            f"{key} {value!r} (checkpoint: {config.get(key)!r})"
            for key, value in self.run_config.items()
            if key in MODEL_KEYS and config.get(key) != value
        ]
        if changed:
            raise ValueError(f"checkpoint {directory} has another model: {', '.join(changed)}")
        if self.vocab is not None and config.get("vocab") != json.loads(
            json.dumps(self.vocab.to_dict())
        ):
            raise ValueError(
                f"the vocabulary of the data is not the one {directory} was trained with "
                "(did the data file change?); resume with the same data"
            )

    # the loader's RNG: the batches of an epoch are a function of its state at the start
    def loader_state(self) -> Any:
        rng = getattr(self.data_iter, "rng", None)
        return rng.getstate() if isinstance(rng, random.Random) else None

    def set_loader_state(self, state: Any) -> None:
        rng = getattr(self.data_iter, "rng", None)
        if not isinstance(rng, random.Random):
            raise ValueError("the state to resume has a loader RNG state; data_iter has no rng")
        version, internal, gauss = state
        rng.setstate((int(version), tuple(int(x) for x in internal), gauss))

    # the carried hidden state, as global batch rows (rank r holds rows r, r + world, ...)
    def save_carry(self, carry, engine: Engine) -> Any:
        if carry is None or self.use_random_iter:
            return None
        dim, rank, world = self._batch_dim(engine), engine.rank, engine.world_size
        if world == 1:
            return _map_state(carry, lambda s: s.detach().cpu().clone())

        def gather(s: Tensor) -> Tensor:
            s = s.detach()
            rows = torch.tensor([float(s.shape[dim])], dtype=torch.float64, device=s.device)
            torch.distributed.all_reduce(rows)  # the global batch size
            shape = list(s.shape)
            shape[dim] = int(rows)
            full = torch.zeros(shape, dtype=s.dtype, device=s.device)
            full.index_copy_(dim, torch.arange(rank, int(rows), world, device=s.device), s)
            torch.distributed.all_reduce(full)  # rows are disjoint: the sum is the gather
            return full.cpu()

        return _map_state(carry, gather)

    def load_carry(self, saved, engine: Engine) -> Any:
        if self.use_random_iter:
            return None
        dim, rank, world = self._batch_dim(engine), engine.rank, engine.world_size

        def take(s: Tensor) -> Tensor:
            idx = torch.arange(rank, s.shape[dim], world)
            return s.index_select(dim, idx).to(engine.device)

        return _map_state(saved, take)

    @staticmethod
    def _batch_dim(engine: Engine) -> int:
        """The batch dimension of the model's state (where begin_state(1) and (2) differ)."""
        model = _module(engine.net)
        one = model.begin_state(batch_size=1, device="cpu")
        two = model.begin_state(batch_size=2, device="cpu")
        one = one[0] if isinstance(one, tuple | list) else one
        two = two[0] if isinstance(two, tuple | list) else two
        dims = [d for d, (a, b) in enumerate(zip(one.shape, two.shape, strict=True)) if a != b]
        if len(dims) != 1:
            raise ValueError(f"cannot tell the batch dimension of states {one.shape}/{two.shape}")
        return dims[0]


def _device_of(model, device) -> torch.device:
    if device is not None:
        return torch.device(device)
    params = list(model.parameters()) if isinstance(model, nn.Module) else list(model.params)
    return params[0].device if params else torch.device("cpu")


def train_lm(
    model,
    data_iter: Iterable[tuple[Tensor, Tensor]],
    *,
    num_epochs: int,
    updater=None,
    lr: float = 1.0,
    optimizer: str = "sgd",
    clip: float | None = 1.0,
    use_random_iter: bool = False,
    device: torch.device | str | None = None,
    progress: bool = True,
    loss: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> LMHistory:
    """Train for ``num_epochs`` on the engine; returns perplexity and tokens/s per epoch.

    ``updater`` overrides ``optimizer``/``lr`` (an optimizer, or the book's scratch
    ``sgd`` updater). With an initialized process group the model trains inside DDP
    (``data_iter`` must give each rank its rows, as ``LMDataLoader(rank=, world_size=)``).
    For checkpoints and resume, build an ``Engine`` with an ``LMTask`` (as the CLI does).
    """
    if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs <= 0:
        raise ValueError(f"num_epochs must be a positive int, got {num_epochs!r}")
    config = EngineConfig(
        epochs=num_epochs, lr=lr, clip=clip, optimizer=optimizer, seed=None,
        device=str(_device_of(model, device)), progress=progress,
        log_every=max(1, num_epochs // 20) if progress else 0,
    )  # fmt: skip
    task = LMTask(data_iter, use_random_iter=use_random_iter, loss=loss)
    engine = Engine(model, task, config, optimizer=updater)
    return LMHistory.from_engine(engine.fit())


def train_epoch(
    model,
    data_iter: Iterable[tuple[Tensor, Tensor]],
    updater,
    *,
    loss: Callable[[Tensor, Tensor], Tensor] | None = None,
    device: torch.device | str | None = None,
    use_random_iter: bool = False,
    clip: float | None = 1.0,
) -> EpochStats:
    """One epoch of truncated BPTT on the engine; returns perplexity and tokens/s.

    ``updater`` is an optimizer or, as the book's scratch code, a callable taking the
    batch size (called with 1 because the loss is already a mean).
    """
    config = EngineConfig(
        epochs=1, clip=clip, seed=None, device=str(_device_of(model, device)), progress=False
    )
    task = LMTask(data_iter, use_random_iter=use_random_iter, loss=loss)
    stats = Engine(model, task, config, optimizer=updater).train_epoch()
    return EpochStats(
        perplexity(stats["loss"]), stats["tokens_per_s"], int(stats["tokens"]), stats["seconds"]
    )


# ----------------------------------------------------------------------------- checkpoints


def save_lm_checkpoint(
    directory: str | os.PathLike, model: RNNLM, vocab: Vocab, config: dict[str, Any]
) -> Path:
    """A language-model checkpoint without training state (weights, model keys, vocabulary).

    ``config`` must hold ``MODEL_KEYS``; other JSON fields are kept. ``attnkit lm train``
    writes the same format through the engine, with the trainer state added.
    """
    missing = [k for k in MODEL_KEYS if k not in config]
    if missing:
        raise ValueError(f"config lacks the model keys {missing}; expected all of {MODEL_KEYS}")
    record = {"task": LMTask.name, **config, "vocab": vocab.to_dict()}
    return save_checkpoint(directory, record, model.state_dict())


def load_lm_checkpoint(
    directory: str | os.PathLike, device: torch.device | str = "cpu"
) -> tuple[RNNLM, Vocab, dict[str, Any]]:
    """Rebuild the model of an ``attnkit lm train`` checkpoint and load its weights.

    Returns ``(model, vocab, config)``, the model in eval mode on ``device``. Reads the
    one checkpoint format (sha256-checked, ``weights_only``) and the layout before it
    (``model.pt``, ``config.json`` with a ``cell``, ``vocab.json``).
    """
    directory = Path(directory)
    cfg_path = directory / CONFIG_NAME
    legacy = None
    if cfg_path.is_file():
        try:
            legacy = json.loads(cfg_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            legacy = None  # load_checkpoint names the problem
    if is_legacy_lm_checkpoint(directory, legacy):
        return _load_legacy_lm(directory, legacy, device)
    if not cfg_path.is_file():
        raise FileNotFoundError(
            f"{str(cfg_path)!r} not found: --checkpoint must be a folder written by "
            "`attnkit lm train --out DIR`"
        )
    ck = load_checkpoint(directory, map_location=device, trainer=False, task="lm")
    config = ck.config
    missing = [k for k in (*MODEL_KEYS, "vocab") if k not in config]
    if missing:
        raise ValueError(f"checkpoint {directory} lacks {missing} in {CONFIG_NAME}")
    vocab = Vocab.from_dict(config["vocab"])
    model = _build(config, len(vocab))
    load_model_state(model, ck.model_state, directory)
    return model.to(device).eval(), vocab, config


def _build(config: dict[str, Any], vocab_size: int) -> RNNLM:
    return build_lm(
        config["cell"], vocab_size, config["num_hiddens"], config["num_layers"],
        config["bidirectional"], config["scratch"], reset_after=config["reset_after"],
    )  # fmt: skip


def _load_legacy_lm(directory: Path, config: dict, device) -> tuple[RNNLM, Vocab, dict]:
    """The layout before the one format: model.pt (state_dict), config.json, vocab.json."""
    for name in ("model.pt", "vocab.json"):
        if not (directory / name).is_file():
            raise FileNotFoundError(
                f"{str(directory / name)!r} not found: {directory} is an incomplete language-"
                "model checkpoint of the old layout; train it again with `attnkit lm train`"
            )
    vocab = Vocab.from_dict(json.loads((directory / "vocab.json").read_text(encoding="utf-8")))
    model = _build(config, len(vocab))
    try:
        state = torch.load(directory / "model.pt", map_location=device, weights_only=True)
    except Exception as e:  # unpickling errors of every kind
        raise ValueError(f"could not load {directory / 'model.pt'}: {e}") from None
    load_model_state(model, state, directory)
    return model.to(device).eval(), vocab, config


# ----------------------------------------------------------------------------- sampling


def _prefix_tokens(prefix: str, vocab: Vocab, token: str, unknown: str) -> list[str]:
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    toks = list(prefix) if token == "char" else prefix.split()
    if not toks:
        raise ValueError(f"prefix must contain at least one {token} token, got {prefix!r}")
    missing = sorted({t for t in toks if t not in vocab})
    if missing and unknown == "error":
        raise ValueError(
            f"prefix {prefix!r} has tokens outside the vocabulary: {missing}; expected tokens "
            f"from the {len(vocab)}-token vocabulary (e.g. {vocab.idx_to_token[1:8]}). "
            "Normalize the prefix like the corpus, or pass unknown='unk' to map them to <unk>"
        )
    if unknown not in ("error", "unk"):
        raise ValueError(f"unknown must be 'error' or 'unk', got {unknown!r}")
    return toks


@torch.no_grad()
def generate(
    model,
    vocab: Vocab,
    prefix: str,
    num_preds: int = 50,
    *,
    temperature: float = 0.0,
    device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
    token: str = "char",
    unknown: str = "error",
) -> str:
    """Warm up on ``prefix`` one token at a time, then predict ``num_preds`` tokens.

    ``temperature == 0`` is greedy (argmax, the book's ``predict_ch8``); ``> 0`` samples
    from ``softmax(logits / temperature)`` with ``generator``. Tokens of the prefix
    outside the vocabulary raise ``ValueError`` (``unknown='unk'`` maps them to <unk>).
    Returns the prefix followed by the prediction (words joined by spaces).
    """
    if isinstance(num_preds, bool) or not isinstance(num_preds, int) or num_preds < 0:
        raise ValueError(f"num_preds must be a non-negative int, got {num_preds!r}")
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    toks = _prefix_tokens(prefix, vocab, token, unknown)
    device = _device_of(model, device)
    was_training = isinstance(model, nn.Module) and model.training
    if isinstance(model, nn.Module):
        model.eval()
    try:
        state = model.begin_state(batch_size=1, device=device)
        outputs = [vocab[toks[0]]]
        for tok in toks[1:]:  # warm-up: feed the prefix, keep the state
            _, state = model(torch.tensor([[outputs[-1]]], device=device), state)
            outputs.append(vocab[tok])
        for _ in range(num_preds):
            logits, state = model(torch.tensor([[outputs[-1]]], device=device), state)  # (1, V)
            if temperature == 0:
                nxt = int(logits.argmax(dim=1).reshape(()))
            else:
                probs = torch.softmax(logits.reshape(-1).float() / temperature, dim=0).cpu()
                nxt = int(torch.multinomial(probs, 1, generator=generator))
            outputs.append(nxt)
    finally:
        if was_training:
            model.train()
    words = vocab.to_tokens(outputs)
    if token == "char":
        return prefix + "".join(words[len(toks) :])
    return " ".join([*toks, *words[len(toks) :]])
