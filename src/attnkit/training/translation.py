"""Translation on the engine: ``Trainer`` trains an ``EncoderDecoder`` on a ``TranslationData``.

Shape legend: B batch, S source length, T target length, V vocabulary size.

    model = build_model("bahdanau", {}, len(data.src_vocab), len(data.tgt_vocab))
    trainer = Trainer(model, data, TrainConfig(epochs=30, out_dir="runs/bahdanau"), arch="bahdanau")
    trainer.resume()            # optional: continue a stopped run from out_dir
    history = trainer.fit()

Two task adapters over ``attnkit.training.engine``: ``PaddedPairsTask`` trains on any
iterable of padded ``(X, X_valid_len, Y, Y_valid_len)`` batches (the book's
``load_data_nmt``), ``TranslationTask`` on a ``TranslationData``'s length-bucketed batches,
with validation loss and corpus BLEU of greedy decodes. Per step: teacher forcing (decoder
input ``<bos>`` + tgt[:, :-1]) on batches trimmed to their longest sequence (under the
masks the math is unchanged), masked cross-entropy averaged over real target tokens
(``reduction="token_mean"``) or the book's per-sequence losses summed
(``"per_sequence_sum"``: each row's token losses over the padded length, as its
``MaskedSoftmaxCELoss``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset, default_collate

from attnkit._validate import non_negative_int, one_of, optional, positive_int, probability
from attnkit.i18n import N_, _
from attnkit.inference.evaluation import split_texts, translate_and_score
from attnkit.metrics import bleu_from_stats
from attnkit.models.seq2seq import EncoderDecoder
from attnkit.training.config import setting
from attnkit.training.engine import (
    Engine,
    EngineConfig,
    StepLoss,
    Task,
    TaskContext,
    TrainingInterrupted,
)
from attnkit.training.losses import masked_cross_entropy

__all__ = [
    "PaddedPairsTask",
    "TensorBatches",
    "TrainConfig",
    "Trainer",
    "TrainingInterrupted",
    "TranslationTask",
    "teacher_forcing_loss",
    "trim_padding",
]

REDUCTIONS = ("token_mean", "per_sequence_sum")


@dataclass(frozen=True)
class TrainConfig(EngineConfig):
    """The engine's settings plus the translation task's. Validated."""

    batch_tokens: int = setting(
        1024,
        N_(
            "the GLOBAL batch: padded source + target tokens per batch, all processes together "
            "(with --nproc/torchrun each process takes its share)"
        ),
    )
    label_smoothing: float = setting(0.0, N_("label smoothing of the cross-entropy, in [0, 1)"))
    bleu_sentences: int | None = setting(
        200, N_("val sentences decoded for BLEU, spread over the split (None: all)")
    )
    max_decode_len: int | None = setting(
        None, N_("greedy decoding steps of the validation BLEU (None: the data's max_len + 2)")
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        name = type(self).__name__
        counts = {
            "batch_tokens": positive_int(f"{name}.batch_tokens", self.batch_tokens),
            "bleu_sentences": optional(
                non_negative_int, f"{name}.bleu_sentences", self.bleu_sentences
            ),
            "max_decode_len": optional(positive_int, f"{name}.max_decode_len", self.max_decode_len),
        }
        for field_name, value in counts.items():
            object.__setattr__(self, field_name, value)  # numpy ints become ints (JSON)
        probability(f"{name}.label_smoothing", self.label_smoothing)


class TensorBatches:
    """The batches of a ``DataLoader`` over a ``TensorDataset`` (default collate, no
    workers), gathered with one index per tensor instead of stacking rows one by one.

    The same batches in the same order, and the same draws from the RNGs as iterating the
    loader (its base seed, then its sampler), about 0.7 ms less per batch of 64.
    """

    def __init__(self, loader: DataLoader) -> None:
        self.loader = loader

    @classmethod
    def wrap(cls, batches):
        """``TensorBatches(batches)`` where that is the same, else ``batches`` unchanged."""
        plain = (
            isinstance(batches, DataLoader)
            and isinstance(batches.dataset, TensorDataset)
            and batches.collate_fn is default_collate
            and batches.batch_sampler is not None
            and batches.num_workers == 0
            and not batches.pin_memory
        )
        return cls(batches) if plain else batches

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        loader = self.loader
        indices = iter(loader.batch_sampler)
        # what DataLoader.__iter__ draws before the sampler's first batch
        torch.empty((), dtype=torch.int64).random_(generator=loader.generator)
        tensors = loader.dataset.tensors
        for batch in indices:
            index = torch.as_tensor(batch, dtype=torch.long)
            yield tuple(t.index_select(0, index) for t in tensors)


def trim_padding(tokens: Tensor, lengths: Tensor) -> Tensor:
    """``tokens`` (B, L) cut to its longest valid length ``lengths.max()`` (at least 1)."""
    longest = max(int(lengths.max()), 1) if lengths.numel() else 1
    return tokens[:, :longest] if longest < tokens.shape[1] else tokens


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


class PaddedPairsTask(Task):
    """Teacher forcing on an iterable of padded ``(X, X_valid_len, Y, Y_valid_len)`` batches.

    ``reduction``: ``"token_mean"`` (every real target token weighs the same) or
    ``"per_sequence_sum"`` (the book: each row's masked token losses divided by the
    padded length ``Y.shape[1]``, summed over rows; the reported loss is that sum over
    the real tokens, as the book prints it). Batches are trimmed to their longest
    target before they move to the device (a causal decoder's outputs at real positions
    do not see later padding), and to their longest source when ``trim_source`` (exact
    only for an encoder that ignores padded positions, as attnkit's do; an encoder that
    runs over the padding, like the book's GRU, needs ``trim_source=False``).
    """

    name = "translation"

    def __init__(
        self,
        batches: Iterable,
        bos_id: int,
        *,
        reduction: str = "token_mean",
        label_smoothing: float = 0.0,
        trim_source: bool = True,
    ) -> None:
        one_of("reduction", reduction, REDUCTIONS)
        self._batches = batches
        self.bos_id = int(bos_id)
        self.reduction = reduction
        self.label_smoothing = probability("label_smoothing", label_smoothing)
        self.trim_source = bool(trim_source)

    def batches(self, epoch: int, rank: int, world_size: int):
        if world_size > 1:
            message = _(
                "PaddedPairsTask gives every process the same batches "
                "(world_size={world_size}): run it in one process; TranslationTask "
                "shards over ranks"
            )
            raise ValueError(message.format(world_size=world_size))
        return TensorBatches.wrap(self._batches)

    # a DataLoader with its own generator replays an interrupted epoch from its state
    def loader_state(self):
        generator = getattr(self._batches, "generator", None)
        return generator.get_state() if isinstance(generator, torch.Generator) else None

    def set_loader_state(self, state) -> None:
        self._batches.generator.set_state(state)

    def checkpoint_config(self, ctx: TaskContext) -> dict[str, Any]:
        shuffled = isinstance(getattr(self._batches, "sampler", None), RandomSampler)
        if shuffled and getattr(self._batches, "generator", None) is None:
            raise ValueError(
                _(
                    "a checkpoint could not replay an interrupted epoch: this shuffled "
                    "DataLoader draws its order from the global RNG; pass DataLoader(..., "
                    "generator=torch.Generator().manual_seed(SEED))"
                )
            )
        return {}

    def loss(self, ctx: TaskContext, batch, carry) -> StepLoss:
        src, src_len, tgt, tgt_len = batch.astuple() if hasattr(batch, "astuple") else batch
        padded_len = tgt.shape[1]
        if self.trim_source:
            src = trim_padding(src, src_len)
        tgt = trim_padding(tgt, tgt_len)
        device = ctx.device
        src, src_len, tgt, tgt_len = (
            t.to(device, non_blocking=True) for t in (src, src_len, tgt, tgt_len)
        )
        loss_sum = teacher_forcing_loss(
            ctx.net, src, src_len, tgt, tgt_len, self.bos_id, "sum", self.label_smoothing
        )
        tokens = tgt_len.sum()
        if self.reduction == "per_sequence_sum":
            return StepLoss(loss_sum / padded_len, tokens, denominator=1)
        return StepLoss(loss_sum, tokens)


class TranslationTask(PaddedPairsTask):
    """A ``TranslationData``: its bucketed train batches (per seed, epoch and rank),
    validation loss and greedy-decode BLEU, the epoch line, curves and checkpoint fields."""

    def __init__(
        self,
        data,
        config: TrainConfig,
        *,
        arch: str = "custom",
        model_config: dict[str, Any] | None = None,
        data_args: dict[str, Any] | None = None,
    ) -> None:
        for name in ("src_vocab", "tgt_vocab", "batches", "encode_source", "to_dict"):
            if not hasattr(data, name):
                message = _("data must be a TranslationData (missing .{name})")
                raise TypeError(message.format(name=name))
        super().__init__((), data.special_ids["bos"], label_smoothing=config.label_smoothing)
        self.data, self.config = data, config
        self.arch = arch
        self.model_config = dict(model_config or {})
        self.data_args = dict(data_args or {})

    def batches(self, epoch: int, rank: int, world_size: int):
        cfg = self.config
        return self.data.batches(
            "train", cfg.batch_tokens, shuffle=True, seed=cfg.seed or 0, epoch=epoch,
            rank=rank, world_size=world_size,
        )  # fmt: skip

    def evaluate(self, ctx: TaskContext) -> dict[str, float]:
        # no validation split (val_fraction=0): NaN, so every column has one entry per row
        if len(self.data.val) == 0:
            return {"val_loss": math.nan, "val_bleu": math.nan}
        metrics = evaluate_split(ctx, self.data, "val", self.config.bleu_sentences)
        return {"val_loss": metrics["loss"], "val_bleu": metrics["bleu"]}

    def epoch_line(self, ctx: TaskContext, row: dict[str, float]) -> str:
        cfg = self.config
        # the train loss includes label smoothing, the validation loss does not
        smoothed = ""
        if cfg.label_smoothing:
            smoothed = _(" (label smoothing {value:g})").format(value=cfg.label_smoothing)
        if len(self.data.val):
            val = _("val loss {loss:.3f}, val BLEU {bleu:.1f}")
            val = val.format(loss=row["val_loss"], bleu=row["val_bleu"])
        else:
            val = _("no validation split")
        line = _(
            "epoch {epoch}/{epochs}: train loss {loss:.3f}{smoothed}, {val}, {speed:,.0f} tokens/s"
        )
        return line.format(
            epoch=row["epoch"], epochs=cfg.epochs, loss=row["train_loss"], smoothed=smoothed,
            val=val, speed=row["tokens_per_s"],
        )  # fmt: skip

    def end_epoch(self, ctx: TaskContext, last: bool) -> None:
        cfg = self.config
        if cfg.out_dir is not None and (last or ctx.epoch % (10 * cfg.eval_every) == 0):
            plot_history(ctx.history, Path(cfg.out_dir) / "curves.png", self.arch)

    def checkpoint_config(self, ctx: TaskContext) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "model_config": self.model_config,
            "train_config": self.config.to_dict(),
            "data": self.data.to_dict(),
            "data_args": self.data_args,
        }

    def check_resume(self, config: dict[str, Any], directory: Path) -> None:
        if config.get("arch") != self.arch:
            message = _("checkpoint {directory} was trained with arch {saved!r}, not {arch!r}")
            raise ValueError(
                message.format(directory=directory, saved=config.get("arch"), arch=self.arch)
            )
        if config.get("model_config") != json.loads(json.dumps(self.model_config)):
            message = _("checkpoint {directory} has model config {saved}, not {model_config}")
            raise ValueError(
                message.format(
                    directory=directory,
                    saved=config.get("model_config"),
                    model_config=self.model_config,
                )
            )
        if config.get("data") != json.loads(json.dumps(self.data.to_dict())):
            message = _(
                "checkpoint {directory} was trained on different data/vocabularies; "
                "resume with the same --data and data options"
            )
            raise ValueError(message.format(directory=directory))


class Trainer(Engine):
    """The engine with a ``TranslationTask``: train an ``EncoderDecoder`` on a ``TranslationData``.

    ``arch`` and ``model_config`` are recorded in checkpoints so that
    ``attnkit translate run/eval`` can rebuild the model through the registry;
    ``data_args`` (the ``load_translation_data`` arguments) lets them reload the data.
    Without a validation split (``val_fraction=0``) validation is skipped: the epoch line
    says "no validation split" and the history's ``val_loss``/``val_bleu`` are NaN.
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
            message = _("model must be an EncoderDecoder, got {type}")
            raise TypeError(message.format(type=type(model).__name__))
        if not isinstance(config, TrainConfig):
            message = _("config must be a TrainConfig, got {type}")
            raise TypeError(message.format(type=type(config).__name__))
        task = TranslationTask(
            data, config, arch=arch, model_config=model_config, data_args=data_args
        )
        super().__init__(model, task, config, rank=rank, world_size=world_size)
        self.data, self.arch = data, arch
        self.history.update(val_loss=[], val_bleu=[])

    def evaluate(self, split: str = "val", max_sentences: int | None = None) -> dict[str, float]:
        """Mean token loss (teacher forcing) and corpus BLEU of greedy decodes on ``split``."""
        return evaluate_split(self.context, self.data, split, max_sentences)

    def plot(self, path: str | Path) -> None:
        plot_history(self.history, path, self.arch)


@torch.no_grad()
def evaluate_split(
    ctx: TaskContext, data, split: str = "val", max_sentences: int | None = None
) -> dict[str, float]:
    """Mean token loss (teacher forcing) and corpus BLEU of greedy decodes on ``split``.

    BLEU decodes ``max_sentences`` pairs spread evenly over the split (all if None; a
    corpus in length order, like Tatoeba's, then gives a sample of every length): the book's
    tokens as they are for word-level data, sacreBLEU's 13a on detokenized text for
    subwords (``data.bleu_tokenize``). Sums are
    all-reduced across ranks; each rank scores and decodes its share. An empty split
    gives NaN for both.
    """
    model, device = ctx.model, ctx.device
    rank, world = ctx.rank, ctx.world_size
    cfg = ctx.config
    batch_tokens = getattr(cfg, "batch_tokens", 1024)
    bos_id = data.special_ids["bos"]
    was_training = model.training
    model.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=device)
    # every rank scores a disjoint share of *all* batches (no remainder is dropped, and
    # shares may differ in size: the only collective comes after the loop)
    for batch in data.batches(split, batch_tokens, shuffle=False)[rank::world]:
        src, src_len, tgt, tgt_len = batch.to(device).astuple()
        totals[0] += teacher_forcing_loss(model, src, src_len, tgt, tgt_len, bos_id, "sum")
        totals[1] += tgt_len.sum()
    sources, refs = split_texts(data, split)
    if max_sentences is not None:
        picked = evenly_spaced(len(sources), max_sentences)
        sources, refs = [sources[i] for i in picked], [refs[i] for i in picked]
    sources, refs = sources[rank::world], refs[rank::world]
    max_len = getattr(cfg, "max_decode_len", None)
    _, share = translate_and_score(model, data, sources, refs, max_len=max_len)  # as eval does
    stats = torch.tensor(share, dtype=torch.float64, device=device)
    ctx.all_reduce(totals)
    ctx.all_reduce(stats)
    model.train(was_training)
    loss = float(totals[0] / totals[1]) if totals[1] > 0 else float("nan")
    bleu = bleu_from_stats(stats.tolist()) if stats[9] > 0 else float("nan")  # no references
    return {"loss": loss, "bleu": bleu, "tokens": float(totals[1])}


def evenly_spaced(n: int, k: int) -> list[int]:
    """``min(k, n)`` indices into ``range(n)``, spread evenly from 0 (deterministic)."""
    k = min(k, n)
    return [i * n // k for i in range(k)]


def plot_history(history: dict[str, list[float]], path: str | Path, title: str) -> None:
    """Loss curves (left axis) and validation BLEU (right axis) in one PNG."""
    import matplotlib.pyplot as plt

    from attnkit.viz import plot_curves, save_figure

    h = history
    fig = plot_curves(
        {"train loss": h["train_loss"], "val loss": h["val_loss"]},
        xlabel="epoch",
        ylabel="loss (nats/token)",
        x=h["epoch"],
        title=title,
    )
    ax2 = fig.axes[0].twinx()
    ax2.plot(h["epoch"], h["val_bleu"], color="tab:green", linestyle="--", label="val BLEU")
    ax2.set_ylabel("val BLEU")
    ax2.legend(loc="center right")
    save_figure(fig, path)
    plt.close(fig)
