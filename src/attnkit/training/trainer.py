"""One training loop for every seq2seq model (GRU, Bahdanau, Transformer), single or multi-process.

Shape legend: B batch, S source length, T target length, V vocabulary size.

    model = build_model("bahdanau", {}, len(data.src_vocab), len(data.tgt_vocab))
    trainer = Trainer(model, data, TrainConfig(epochs=30, out_dir="runs/bahdanau"), arch="bahdanau")
    trainer.resume()            # optional: continue a killed run from out_dir
    history = trainer.fit()

Per step: teacher forcing (decoder input ``<bos>`` + tgt[:, :-1]), masked cross-entropy
averaged over real target tokens, ``clip_grad_norm_``, fused/foreach Adam, optional
inverse-square-root schedule. Per epoch (every ``eval_every``): validation loss and
corpus BLEU of greedy decodes, a checkpoint (atomic, see ``checkpoint.py``) and curves.

Distributed: ``rank``/``world_size`` default to torch.distributed's when it is
initialized. Each rank trains on ``data.batches(..., rank=, world_size=)``, the model is
wrapped in DDP (gradients averaged over ranks, each rank's loss being the mean over its
own tokens), validation sums and BLEU statistics are
all-reduced, and only rank 0 prints, writes checkpoints and plots.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from tqdm import tqdm

from attnkit.decoding import translate
from attnkit.metrics import bleu_from_stats, bleu_stats
from attnkit.models.seq2seq import EncoderDecoder
from attnkit.training.checkpoint import (
    get_rng_state,
    load_checkpoint,
    save_checkpoint,
    set_rng_state,
)
from attnkit.training.losses import masked_cross_entropy
from attnkit.training.stop import StopSignals

__all__ = [
    "TrainConfig",
    "Trainer",
    "TrainingInterrupted",
    "load_model_state",
    "lr_at",
    "teacher_forcing_loss",
]


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by ``Trainer.fit`` after Ctrl-C/SIGTERM, once the checkpoint is saved."""


_SCHEDULES = ("constant", "inverse_sqrt")
_OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class TrainConfig:
    """Everything the training loop needs besides the model and the data. Validated."""

    epochs: int = 10
    lr: float = 0.005
    batch_tokens: int = 1024  # padded source + target tokens per batch (all ranks together)
    clip: float | None = 1.0  # max global grad norm; None = no clipping
    label_smoothing: float = 0.0
    optimizer: str = "adam"
    beta1: float = 0.9
    beta2: float = 0.98
    weight_decay: float = 0.0
    schedule: str = "constant"  # or "inverse_sqrt" (Vaswani et al., peak = lr at warmup)
    warmup_steps: int = 0
    seed: int = 0
    out_dir: str | None = None  # checkpoint directory; None = no checkpoints
    eval_every: int = 1  # validate (and checkpoint) every N epochs, and after the last
    bleu_sentences: int | None = 200  # validation sentences decoded for BLEU; None = all
    max_decode_len: int | None = None  # greedy decoding steps; None = data.max_len + 2
    device: str = "cpu"
    progress: bool = True  # tqdm bar (rank 0)

    def __post_init__(self) -> None:
        def positive_int(name: str, allow_zero: bool = False) -> None:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if allow_zero else 1):
                want = "a non-negative" if allow_zero else "a positive"
                raise ValueError(f"TrainConfig.{name} must be {want} int, got {v!r}")

        positive_int("epochs")
        positive_int("batch_tokens")
        positive_int("eval_every")
        positive_int("warmup_steps", allow_zero=True)
        if not isinstance(self.seed, int):
            raise ValueError(f"TrainConfig.seed must be an int, got {self.seed!r}")
        if not isinstance(self.lr, int | float) or not self.lr > 0 or math.isinf(self.lr):
            raise ValueError(f"TrainConfig.lr must be a positive number, got {self.lr!r}")
        if self.clip is not None and not self.clip > 0:
            raise ValueError(f"TrainConfig.clip must be positive or None, got {self.clip!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(
                f"TrainConfig.label_smoothing must be in [0, 1), got {self.label_smoothing!r}"
            )
        for name in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"TrainConfig.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.weight_decay < 0:
            raise ValueError(f"TrainConfig.weight_decay must be >= 0, got {self.weight_decay}")
        if self.optimizer not in _OPTIMIZERS:
            raise ValueError(
                f"TrainConfig.optimizer must be one of {_OPTIMIZERS}, got {self.optimizer!r}"
            )
        if self.schedule not in _SCHEDULES:
            raise ValueError(
                f"TrainConfig.schedule must be one of {_SCHEDULES}, got {self.schedule!r}"
            )
        if self.schedule == "inverse_sqrt" and self.warmup_steps < 1:
            raise ValueError("TrainConfig.warmup_steps must be >= 1 with schedule='inverse_sqrt'")
        if self.bleu_sentences is not None and self.bleu_sentences < 0:
            raise ValueError(
                f"TrainConfig.bleu_sentences must be >= 0 or None, got {self.bleu_sentences}"
            )
        if self.max_decode_len is not None and self.max_decode_len < 1:
            raise ValueError(
                f"TrainConfig.max_decode_len must be >= 1 or None, got {self.max_decode_len}"
            )
        torch.device(self.device)  # raises on a malformed device string

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - fields)
        if unknown:
            raise ValueError(
                f"unknown TrainConfig keys {unknown}; expected some of {sorted(fields)}"
            )
        return cls(**d)


def lr_at(config: TrainConfig, step: int) -> float:
    """Learning rate of optimizer step ``step`` (1-based).

    ``inverse_sqrt``: ``lr * sqrt(w) * min(step^-0.5, step * w^-1.5)``, the Transformer
    schedule scaled so that its peak, at ``step == warmup_steps``, equals ``lr``.
    """
    if config.schedule == "constant":
        return config.lr
    step = max(step, 1)
    w = config.warmup_steps
    return config.lr * math.sqrt(w) * min(step**-0.5, step * w**-1.5)


def teacher_forcing_loss(
    model: nn.Module,
    src: Tensor,  # (B, S)
    src_len: Tensor,  # (B,)
    tgt: Tensor,  # (B, T): targets + <eos>, no <bos>
    tgt_len: Tensor,  # (B,)
    bos_id: int,
    reduction: str = "sum",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Masked cross-entropy of ``model(src, <bos> + tgt[:, :-1], src_len)`` against ``tgt``."""
    bos = torch.full((tgt.shape[0], 1), bos_id, dtype=tgt.dtype, device=tgt.device)
    dec_in = torch.cat([bos, tgt[:, :-1]], dim=1)  # (B, T)
    logits, _ = model(src, dec_in, src_len)  # (B, T, V)
    return masked_cross_entropy(logits, tgt, tgt_len, reduction, label_smoothing)


def _make_optimizer(params, cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True)
    kwargs = dict(lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay)
    try:
        return torch.optim.Adam(params, fused=True, **kwargs)
    except (RuntimeError, TypeError):  # no fused kernel for this device/dtype
        return torch.optim.Adam(params, foreach=True, **kwargs)


def _dist_defaults(rank: int | None, world_size: int | None) -> tuple[int, int]:
    initialized = dist.is_available() and dist.is_initialized()
    if rank is None:
        rank = dist.get_rank() if initialized else 0
    if world_size is None:
        world_size = dist.get_world_size() if initialized else 1
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, {world_size}), got {rank!r}")
    if world_size > 1 and not initialized:
        raise RuntimeError(f"world_size={world_size} needs torch.distributed to be initialized")
    return rank, world_size


class Trainer:
    """Train an ``EncoderDecoder`` on a ``TranslationData`` (see the module docstring).

    ``arch`` and ``model_config`` are recorded in checkpoints so that
    ``attnkit translate run/eval`` can rebuild the model through the registry;
    ``data_args`` (the ``load_translation_data`` arguments) lets them reload the data.
    """

    def __init__(
        self,
        model: EncoderDecoder,
        data,
        config: TrainConfig,
        *,
        arch: str = "custom",
        model_config: dict[str, Any] | None = None,
        data_args: dict[str, Any] | None = None,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        if not isinstance(model, EncoderDecoder):
            raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        for name in ("src_vocab", "tgt_vocab", "batches", "encode_source", "to_dict"):
            if not hasattr(data, name):
                raise TypeError(f"data must be a TranslationData (missing .{name})")
        self.config = config
        self.data = data
        self.arch = arch
        self.model_config = dict(model_config or {})
        self.data_args = dict(data_args or {})
        self.rank, self.world_size = _dist_defaults(rank, world_size)
        self.device = torch.device(config.device)
        self.model = model.to(self.device)
        self.net: nn.Module = self.model
        if self.world_size > 1:
            self.net = nn.parallel.DistributedDataParallel(self.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = _make_optimizer(self.params, config)
        self.bos_id = data.tgt_vocab["<bos>"]
        self.eos_id = data.tgt_vocab["<eos>"]
        self.step = 0  # optimizer steps done
        self.epoch = 0  # epochs done
        self.batch_in_epoch = 0  # batches of the current epoch done (> 0 after an interrupt)
        self._partial = (0.0, 0.0)  # loss sum and tokens of those batches (all ranks)
        self._stop = StopSignals(verbose=self.rank == 0)  # its handlers are on during fit()
        self._stop_now = False  # the same, agreed by every rank at the end of a step
        self.history: dict[str, list[float]] = {
            "epoch": [],
            "train_loss": [],
            "val_loss": [],
            "val_bleu": [],
            "tokens_per_s": [],
        }
        self.is_main = self.rank == 0

    # ------------------------------------------------------------------ training
    def train_step(self, batch) -> tuple[Tensor, Tensor]:
        """One optimizer step; returns (summed token loss, number of target tokens), detached."""
        src, src_len, tgt, tgt_len = batch.to(self.device).astuple()
        loss_sum = teacher_forcing_loss(
            self.net, src, src_len, tgt, tgt_len, self.bos_id, "sum", self.config.label_smoothing
        )
        num_tokens = tgt_len.sum()
        self.optimizer.zero_grad(set_to_none=True)
        if self.world_size > 1:
            # mean over the *global* batch's tokens: DDP averages the ranks' gradients,
            # so scale by world_size / global tokens. The same tiny all-reduce tells every
            # rank whether any of them was asked to stop, so all stop after the same step.
            packed = torch.stack(
                [
                    num_tokens.detach().to(torch.float64),
                    torch.tensor(float(self._stop.requested), device=num_tokens.device),
                ]
            )
            dist.all_reduce(packed)
            global_tokens = packed[0]
            (loss_sum * (self.world_size / global_tokens.clamp(min=1))).backward()
            self._stop_now = bool(packed[1] > 0)
        else:
            (loss_sum / num_tokens.clamp(min=1)).backward()
        if self.config.clip is not None:
            nn.utils.clip_grad_norm_(self.params, self.config.clip, foreach=True)
        self.step += 1
        if self.config.schedule != "constant":
            lr = lr_at(self.config, self.step)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
        self.optimizer.step()
        return loss_sum.detach(), num_tokens

    def train_epoch(self) -> tuple[float, float]:
        """Train one epoch; returns (mean token loss over all ranks, target tokens/s of all ranks)."""
        cfg = self.config
        epoch = self.epoch  # 0-based index of the epoch being trained
        batches = self.data.batches(
            "train",
            cfg.batch_tokens,
            shuffle=True,
            seed=cfg.seed,
            epoch=epoch,
            rank=self.rank,
            world_size=self.world_size,
        )
        self.model.train()
        done = self.batch_in_epoch  # > 0 when resuming an interrupted epoch
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss sum, tokens
        if done and self.is_main:  # the all-reduce below counts rank 0's share once
            totals += torch.tensor(self._partial, dtype=torch.float64, device=self.device)
        bar = tqdm(
            total=len(batches),
            initial=done,
            desc=f"epoch {epoch + 1}/{cfg.epochs}",
            unit="batch",
            disable=not (cfg.progress and self.is_main),
            leave=False,
            dynamic_ncols=True,
        )
        start = time.perf_counter()
        with bar:
            for i, batch in enumerate(batches):
                if i < done:  # batches of each epoch are a function of (seed, epoch)
                    continue
                loss_sum, n = self.train_step(batch)
                totals[0] += loss_sum
                totals[1] += n
                self.batch_in_epoch = i + 1
                bar.update(1)
                if self._should_stop() and i + 1 < len(batches):
                    self._all_reduce(totals)
                    self._partial = (float(totals[0]), float(totals[1]))
                    raise TrainingInterrupted(f"epoch {epoch + 1}, batch {i + 1}/{len(batches)}")
                if not bar.disable and (i % 10 == 9 or i == len(batches) - 1):
                    tok = float(totals[1])
                    bar.set_postfix(
                        loss=f"{float(totals[0]) / max(tok, 1):.3f}",
                        tok_s=f"{tok / (time.perf_counter() - start):.0f}",
                        refresh=False,
                    )
        self._all_reduce(totals)
        seconds = time.perf_counter() - start
        self.epoch += 1
        self.batch_in_epoch, self._partial = 0, (0.0, 0.0)
        # tokens/s of the whole job (all ranks together)
        return float(totals[0] / totals[1].clamp(min=1)), float(totals[1]) / max(seconds, 1e-9)

    def fit(self) -> dict[str, list[float]]:
        """Train until ``config.epochs`` epochs are done (continuing after ``resume``).

        Without a validation split (``data.val`` empty, e.g. ``val_fraction=0``) validation
        is skipped: the epoch line says "no validation split" and the history's
        ``val_loss``/``val_bleu`` entries are NaN (one per evaluated epoch, as usual).
        """
        cfg = self.config
        if self.step == 0 and self.epoch == 0 and self.batch_in_epoch == 0:
            torch.manual_seed(cfg.seed)
        try:
            with self._stop:
                return self._fit()
        except TrainingInterrupted as e:
            where = f"stopped at {e}"
            if cfg.out_dir is not None:
                self.save()
                where += f"; checkpoint saved in {cfg.out_dir}, --resume continues from there"
            if self.is_main:
                print(f"\n{where}", flush=True)
            raise
        finally:
            self._stop_now = False

    def _should_stop(self) -> bool:
        # one process: as soon as asked; several: when the last step's all-reduce said so
        # (every rank then stops after the same step)
        return self._stop.requested if self.world_size == 1 else self._stop_now

    def _fit(self) -> dict[str, list[float]]:
        cfg = self.config
        while self.epoch < cfg.epochs:
            train_loss, tok_s = self.train_epoch()
            last = self.epoch == cfg.epochs
            if self.epoch % cfg.eval_every and not last:
                if cfg.out_dir is not None:
                    self.save()  # every epoch is saved, evaluated or not
                if self._should_stop():
                    raise TrainingInterrupted(f"the end of epoch {self.epoch}")
                continue
            # no validation split (val_fraction=0): skip validation; the history keeps
            # NaN in its val columns so that every column has one entry per epoch
            has_val = len(self.data.val) > 0
            if has_val:
                metrics = self.evaluate("val", max_sentences=cfg.bleu_sentences)
            else:
                metrics = {"loss": math.nan, "bleu": math.nan}
            h = self.history
            h["epoch"].append(self.epoch)
            h["train_loss"].append(train_loss)
            h["val_loss"].append(metrics["loss"])
            h["val_bleu"].append(metrics["bleu"])
            h["tokens_per_s"].append(tok_s)
            if self.is_main:
                # the train loss includes label smoothing, the validation loss does not
                smoothed = (
                    f" (label smoothing {cfg.label_smoothing:g})" if cfg.label_smoothing else ""
                )
                val = (
                    f"val loss {metrics['loss']:.3f}, val BLEU {metrics['bleu']:.1f}, "
                    if has_val
                    else "no validation split, "
                )
                msg = (
                    f"epoch {self.epoch}/{cfg.epochs}: train loss {train_loss:.3f}{smoothed}, "
                    f"{val}{tok_s:,.0f} tokens/s"
                )
                if cfg.progress:
                    tqdm.write(msg)
                else:
                    print(msg, flush=True)
                if cfg.out_dir is not None:
                    self.save()
                    if last or self.epoch % (10 * cfg.eval_every) == 0:
                        self.plot(Path(cfg.out_dir) / "curves.png")
            if self._should_stop() and self.epoch < cfg.epochs:  # asked during the last batch
                raise TrainingInterrupted(f"the end of epoch {self.epoch}")
        return self.history

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, split: str = "val", max_sentences: int | None = None) -> dict[str, float]:
        """Mean token loss (teacher forcing) and corpus BLEU of greedy decodes on ``split``.

        BLEU decodes the first ``max_sentences`` pairs of the split (all if None).
        Sums are all-reduced across ranks; each rank decodes its share of sentences.
        An empty split gives NaN for both.
        """
        cfg = self.config
        was_training = self.model.training
        self.model.eval()
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)
        # Every rank scores a disjoint share of *all* batches (no remainder is dropped, and
        # shares may differ in size: the only collective comes after the loop).
        batches = self.data.batches(split, cfg.batch_tokens, shuffle=False)
        for batch in batches[self.rank :: self.world_size]:
            src, src_len, tgt, tgt_len = batch.to(self.device).astuple()
            totals[0] += teacher_forcing_loss(
                self.model, src, src_len, tgt, tgt_len, self.bos_id, "sum"
            )
            totals[1] += tgt_len.sum()
        pairs = list(getattr(self.data, split))
        if max_sentences is not None:
            pairs = pairs[:max_sentences]
        pairs = pairs[self.rank :: self.world_size]
        stats = torch.zeros(10, dtype=torch.float64, device=self.device)
        if pairs:
            hyps, _ = translate(
                self.model,
                self.data,
                [" ".join(src) for src, _ in pairs],
                max_len=cfg.max_decode_len,
            )
            stats += torch.tensor(bleu_stats(hyps, [" ".join(tgt) for _, tgt in pairs]))
        self._all_reduce(totals)
        self._all_reduce(stats)
        self.model.train(was_training)
        loss = float(totals[0] / totals[1]) if totals[1] > 0 else float("nan")
        bleu = bleu_from_stats(stats.tolist()) if stats[9] > 0 else float("nan")  # no references
        return {"loss": loss, "bleu": bleu, "tokens": float(totals[1])}

    def _all_reduce(self, t: Tensor) -> None:
        if self.world_size > 1:
            dist.all_reduce(t)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_config(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "model_config": self.model_config,
            "train_config": self.config.to_dict(),
            "data": self.data.to_dict(),
            "data_args": self.data_args,
            "epoch": self.epoch,
            "step": self.step,
            "history": self.history,
        }

    def save(self, directory: str | Path | None = None) -> Path:
        """Write a checkpoint (rank 0 only; other ranks return without writing)."""
        directory = Path(directory or self.config.out_dir or "")
        if not str(directory) or directory == Path():
            raise ValueError("no checkpoint directory: pass one or set TrainConfig.out_dir")
        if not self.is_main:
            return directory
        trainer_state = {
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "partial": list(self._partial),
            "rng": get_rng_state(),
        }
        return save_checkpoint(
            directory, self.checkpoint_config(), self.model.state_dict(), trainer_state
        )

    def resume(self, directory: str | Path | None = None) -> bool:
        """Load model, optimizer, RNG states, epoch/step and history from a checkpoint.

        Returns False when ``directory`` (default ``out_dir``) holds no checkpoint yet.
        Raises ValueError when it was written for another arch, model config or data.
        """
        directory = Path(directory or self.config.out_dir or "")
        if not (directory / "config.json").exists():
            return False
        ck = load_checkpoint(directory, map_location=self.device)
        cfg = ck.config
        if cfg.get("arch") != self.arch:
            raise ValueError(
                f"checkpoint {directory} was trained with arch {cfg.get('arch')!r}, "
                f"not {self.arch!r}"
            )
        if cfg.get("model_config") != json.loads(json.dumps(self.model_config)):
            raise ValueError(
                f"checkpoint {directory} has model config {cfg.get('model_config')}, "
                f"not {self.model_config}"
            )
        if cfg.get("data") != json.loads(json.dumps(self.data.to_dict())):
            raise ValueError(
                f"checkpoint {directory} was trained on different data/vocabularies; "
                "resume with the same --data and data options"
            )
        if ck.trainer_state is None:
            raise ValueError(f"checkpoint {directory} has no trainer state to resume from")
        load_model_state(self.model, ck.model_state, directory)
        ts = ck.trainer_state
        self.optimizer.load_state_dict(ts["optimizer"])
        self.step, self.epoch = int(ts["step"]), int(ts["epoch"])
        self.batch_in_epoch = int(ts.get("batch_in_epoch", 0))
        self._partial = tuple(float(x) for x in ts.get("partial", (0.0, 0.0)))
        self.history = {k: list(v) for k, v in cfg["history"].items()}
        set_rng_state(ts["rng"])
        return True

    def plot(self, path: str | Path) -> None:
        """Loss curves (left axis) and validation BLEU (right axis) in one PNG."""
        import matplotlib.pyplot as plt

        from attnkit.viz import plot_curves, save_figure

        h = self.history
        fig = plot_curves(
            {"train loss": h["train_loss"], "val loss": h["val_loss"]},
            xlabel="epoch",
            ylabel="loss (nats/token)",
            x=h["epoch"],
            title=f"{self.arch}",
        )
        ax2 = fig.axes[0].twinx()
        ax2.plot(h["epoch"], h["val_bleu"], color="tab:green", linestyle="--", label="val BLEU")
        ax2.set_ylabel("val BLEU")
        ax2.legend(loc="center right")
        save_figure(fig, path)
        plt.close(fig)


def load_model_state(
    model: nn.Module, state: dict[str, Tensor], source: Any = "checkpoint"
) -> None:
    """``model.load_state_dict`` with an error that says which checkpoint does not fit."""
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        first = str(e).splitlines()[0:3]
        raise ValueError(
            f"weights in {source} do not fit this model ({' '.join(first)}); "
            "was it written for another arch or model config?"
        ) from None
