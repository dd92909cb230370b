"""Language modelling on the engine (the book's ``train_ch8``) and its checkpoints.

Shape legend: B batch, T steps, V vocabulary.

``LMTask`` is the adapter: minibatches ``(X, Y)`` (B, T) from a loader such as
``LMDataLoader``; the mean cross-entropy per token. A recurrent model (one with
``begin_state``) trains by truncated backprop through time (with sequential partitioning
the hidden state is carried across minibatches but detached, with random sampling it is
re-initialized; logits time-major (T*B, V)); a model without one (the decoder-only
``DecoderLM``) sees each (B, T) window whole, batch-major logits (B, T, V), and carries
nothing. The engine adds clipping, the optimizer (SGD as the book, Adam, or the book's
scratch ``sgd`` updater), schedules, bf16, time budgets, DDP, Ctrl-C, checkpoints and exact
resume: the loader's ``random.Random`` state at the start of the epoch and, mid-epoch, the
carried hidden state gathered over ranks into global batch rows are part of the trainer
state, so a resumed run sees the batches of an uninterrupted one with any number of
processes. ``val_data`` (held-out token ids) adds the validation perplexity to every
evaluated epoch: windows of ``val_steps`` tokens, each from a fresh state.

``train_lm``/``train_epoch`` are the function forms; ``perplexity`` is
``attnkit.metrics.perplexity`` (exp of the mean NLL per token). ``LMTrainConfig``
(``attnkit.training.lm_config``, re-exported here) holds the training settings of
``attnkit lm train`` (the model's are ``models.registry.LMConfig`` or
``models.decoder_lm.DecoderLMConfig``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from attnkit._validate import (
    positive_int,
    token_ids,
)
from attnkit.checkpoint import save_checkpoint
from attnkit.data.text import Vocab
from attnkit.i18n import _
from attnkit.inference.generation import model_device
from attnkit.metrics import perplexity
from attnkit.models.registry import LM_ARCHS, lm_arch, lm_model_keys
from attnkit.training.engine import Engine, EngineConfig, StepLoss, Task, TaskContext
from attnkit.training.lm_config import LM_OPTIMIZERS, LMTrainConfig

__all__ = [
    "LM_OPTIMIZERS",
    "EpochStats",
    "LMHistory",
    "LMTask",
    "LMTrainConfig",
    "detach_state",
    "save_lm_checkpoint",
    "train_epoch",
    "train_lm",
]


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


def _recurrent(model) -> bool:
    """A model that carries a state (``begin_state``): the book's RNNs, not a Transformer."""
    return hasattr(_module(model), "begin_state")


def _map_state(state, fn):
    if isinstance(state, tuple | list):
        return type(state)(fn(s) for s in state)
    return fn(state)


class LMTask(Task):
    """Next-token prediction on ``data_iter``'s ``(X, Y)`` minibatches: truncated BPTT for
    a recurrent model, whole windows for a Transformer (see the module docstring).

    ``loss``: None for the token-mean cross-entropy, or the book's ``loss(y_hat, y)``
    (its mean is the objective). ``run_config`` and ``vocab``: what a checkpoint records
    (the CLI's options; ``run_config["arch"]`` names the model's, absent: "rnn").
    ``val_data``: held-out token ids (N,), evaluated in windows of ``val_steps`` tokens,
    ``val_batch_size`` windows at a time.
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
        val_data: Tensor | None = None,
        val_steps: int = 35,
        val_batch_size: int = 32,
    ) -> None:
        self.data_iter = data_iter
        self.use_random_iter = use_random_iter
        self.loss_fn = loss
        self.vocab = vocab
        self.run_config = dict(run_config or {})
        self.val_steps = positive_int("val_steps", val_steps)
        self.val_batch_size = positive_int("val_batch_size", val_batch_size)
        self.val_data = None if val_data is None else token_ids("val_data", val_data)
        if self.val_data is not None and len(self.val_data) < val_steps + 1:
            message = _(
                "val_data holds {tokens} tokens: the validation needs at least "
                "val_steps + 1 = {needed} (a larger --val-fraction or corpus)"
            )
            raise ValueError(message.format(tokens=len(self.val_data), needed=val_steps + 1))

    def batches(self, epoch: int, rank: int, world_size: int):
        return self.data_iter  # a loader built for this rank (LMDataLoader(rank=, world_size=))

    def loss(self, ctx: TaskContext, batch, carry) -> StepLoss:
        X, Y = batch  # (B, T), (B, T)
        device = ctx.device
        if not _recurrent(ctx.net):  # a Transformer: whole windows, nothing carried
            y = Y.reshape(-1).to(device).long()  # (B*T,), batch-major like the logits
            y_hat = ctx.net(X.to(device))  # (B, T, V)
            y_hat = y_hat.reshape(-1, y_hat.shape[-1])  # (B*T, V)
            return self._step_loss(y_hat, y, None)
        if carry is None or self.use_random_iter:
            state = _module(ctx.net).begin_state(batch_size=X.shape[0], device=device)
        else:
            state = detach_state(carry)
        y = Y.T.reshape(-1).to(device).long()  # (T*B,), time-major like the logits
        y_hat, state = ctx.net(X.to(device), state)  # (T*B, V)
        return self._step_loss(y_hat, y, state)

    def _step_loss(self, y_hat: Tensor, y: Tensor, carry) -> StepLoss:
        n = y.numel()
        if self.loss_fn is None:
            return StepLoss(F.cross_entropy(y_hat, y, reduction="sum"), n, carry=carry)
        mean = self.loss_fn(y_hat, y).mean()
        return StepLoss(mean * n, n, carry=carry)  # the objective: mean * n / n

    @torch.no_grad()
    def evaluate(self, ctx: TaskContext) -> dict[str, float]:
        """The validation loss and perplexity over ``val_data`` (every rank takes its
        share of the windows; none without ``val_data``)."""
        if self.val_data is None:
            return {}
        model, T, data = ctx.model, self.val_steps, self.val_data
        n = (len(data) - 1) // T  # windows of T tokens
        X, Y = data[: n * T].view(n, T), data[1 : n * T + 1].view(n, T)  # (n, T)
        mine = torch.arange(ctx.rank, n, ctx.world_size)
        totals = torch.zeros(2, dtype=torch.float64, device=ctx.device)  # loss sum, tokens
        was_training = model.training
        model.eval()
        try:
            for rows in mine.split(self.val_batch_size):
                x, y = X[rows].to(ctx.device), Y[rows].to(ctx.device)  # (b, T)
                if _recurrent(model):
                    state = model.begin_state(batch_size=len(rows), device=ctx.device)
                    logits, _ = model(x, state)  # (T*b, V), time-major
                    y = y.T.reshape(-1)
                else:
                    logits = model(x)  # (b, T, V)
                    logits, y = logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
                totals[0] += F.cross_entropy(logits.float(), y, reduction="sum")
                totals[1] += y.numel()
        finally:
            model.train(was_training)
        ctx.all_reduce(totals)
        loss = float(totals[0] / totals[1])
        return {"val_loss": loss, "val_perplexity": math.exp(loss)}

    def epoch_line(self, ctx: TaskContext, row: dict[str, float]) -> str:
        if "val_perplexity" in row:
            line = _(
                "epoch {epoch}/{epochs}: perplexity {perplexity:.2f}, validation {val:.2f}, "
                "{speed:,.0f} tokens/s"
            )
        else:
            line = _("epoch {epoch}/{epochs}: perplexity {perplexity:.2f}, {speed:,.0f} tokens/s")
        return line.format(
            epoch=row["epoch"], epochs=ctx.config.epochs, perplexity=perplexity(row["train_loss"]),
            val=row.get("val_perplexity"), speed=row["tokens_per_s"],
        )  # fmt: skip

    def checkpoint_config(self, ctx: TaskContext) -> dict[str, Any]:
        config = {**self.run_config, "epochs_done": ctx.epoch}
        if self.vocab is not None:
            config["vocab"] = self.vocab.to_dict()
        return config

    def check_resume(self, config: dict[str, Any], directory: Path) -> None:
        arch = lm_arch(self.run_config)
        if lm_arch(config) != arch:
            message = _(
                "checkpoint {directory} holds an {saved!r} language model, not an {arch!r} one"
            )
            raise ValueError(message.format(directory=directory, saved=lm_arch(config), arch=arch))
        # a field added after the checkpoint was written has its default there
        defaults = {f.name: f.default for f in dataclasses.fields(LM_ARCHS[arch])}
        saved = {key: config.get(key, defaults.get(key)) for key in lm_model_keys(arch)}
        changed = [
            f"{key} {value!r} (checkpoint: {saved[key]!r})"
            for key, value in self.run_config.items()
            if key in saved and key != "vocab_size" and saved[key] != value
        ]  # the vocabulary's size: the vocabulary's check below
        if changed:
            message = _("checkpoint {directory} has another model: {listed}")
            raise ValueError(message.format(directory=directory, listed=", ".join(changed)))
        if self.vocab is not None and config.get("vocab") != json.loads(
            json.dumps(self.vocab.to_dict())
        ):
            message = _(
                "the vocabulary of the data is not the one {directory} was trained "
                "with (did the data file change?); resume with the same data"
            )
            raise ValueError(message.format(directory=directory))

    # the loader's RNG: the batches of an epoch are a function of its state at the start
    def loader_state(self) -> Any:
        rng = getattr(self.data_iter, "rng", None)
        return rng.getstate() if isinstance(rng, random.Random) else None

    def set_loader_state(self, state: Any) -> None:
        rng = getattr(self.data_iter, "rng", None)
        if not isinstance(rng, random.Random):
            raise ValueError(_("the state to resume has a loader RNG state; data_iter has no rng"))
        version, internal, gauss = state
        rng.setstate((int(version), tuple(int(x) for x in internal), gauss))

    # the carried hidden state, as global batch rows (rank r holds rows r, r + world, ...)
    def save_carry(self, carry, ctx: TaskContext) -> Any:
        if carry is None or self.use_random_iter or not _recurrent(ctx.net):
            return None
        dim, rank, world = self._batch_dim(ctx), ctx.rank, ctx.world_size
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

    def load_carry(self, saved, ctx: TaskContext) -> Any:
        if self.use_random_iter or not _recurrent(ctx.net):
            return None
        dim, rank, world = self._batch_dim(ctx), ctx.rank, ctx.world_size

        def take(s: Tensor) -> Tensor:
            idx = torch.arange(rank, s.shape[dim], world)
            return s.index_select(dim, idx).to(ctx.device)

        return _map_state(saved, take)

    @staticmethod
    def _batch_dim(ctx: TaskContext) -> int:
        """The batch dimension of the model's state (where begin_state(1) and (2) differ)."""
        model = _module(ctx.net)
        one = model.begin_state(batch_size=1, device="cpu")
        two = model.begin_state(batch_size=2, device="cpu")
        one = one[0] if isinstance(one, tuple | list) else one
        two = two[0] if isinstance(two, tuple | list) else two
        dims = [d for d, (a, b) in enumerate(zip(one.shape, two.shape, strict=True)) if a != b]
        if len(dims) != 1:
            raise ValueError(f"cannot tell the batch dimension of states {one.shape}/{two.shape}")
        return dims[0]


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
    num_epochs = positive_int("num_epochs", num_epochs)
    config = EngineConfig(
        epochs=num_epochs, lr=lr, clip=clip, optimizer=optimizer, seed=None,
        device=str(model_device(model, device)), progress=progress,
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
        epochs=1, clip=clip, seed=None, device=str(model_device(model, device)), progress=False
    )
    task = LMTask(data_iter, use_random_iter=use_random_iter, loss=loss)
    stats = Engine(model, task, config, optimizer=updater).train_epoch()
    return EpochStats(
        perplexity(stats["loss"]), stats["tokens_per_s"], int(stats["tokens"]), stats["seconds"]
    )


# ----------------------------------------------------------------------------- checkpoints


def save_lm_checkpoint(
    directory: str | os.PathLike, model, vocab: Vocab, config: dict[str, Any]
) -> Path:
    """A language-model checkpoint without training state (weights, model keys, vocabulary).

    ``config`` must hold the model keys of its arch (``config["arch"]``, absent: "rnn":
    ``LMConfig``'s fields; "transformer": ``DecoderLMConfig``'s); other JSON fields are
    kept. ``attnkit lm train`` writes the same format through the engine, with the
    trainer state added.
    """
    keys = lm_model_keys(lm_arch(config))
    missing = [k for k in keys if k not in config]
    if missing:
        message = _("config lacks the model keys {missing}; expected all of {keys}")
        raise ValueError(message.format(missing=missing, keys=keys))
    record = {"task": LMTask.name, **config, "vocab": vocab.to_dict()}
    return save_checkpoint(directory, record, model.state_dict())
