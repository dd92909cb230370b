"""Training and sampling loop for recurrent language models (the book's ``train_ch8``).

Shape legend: B batch, T steps, V vocabulary.

* Truncated backprop through time: with sequential partitioning the state is carried
  across minibatches but detached; with random sampling it is re-initialized.
* Global gradient-norm clipping (``torch.nn.utils.clip_grad_norm_``).
* SGD as the book, or Adam; perplexity ``exp(mean NLL per token)`` each epoch.
* Multi-process (torchrun): when a process group is initialized, ``train_lm`` wraps the
  model in ``DistributedDataParallel`` (gradients averaged over ranks), each rank trains
  on its rows of every global batch (``LMDataLoader(rank=, world_size=)``), the loss is
  scaled so the update is that of the mean over the *global* batch's tokens, token and
  loss totals are all-reduced, and only rank 0 shows progress.
* Resume: ``train_lm(on_save=...)`` hands an ``LMTrainState`` to the caller after every
  epoch and, on Ctrl-C/SIGTERM, after the current step (mid-epoch: the batch index, the
  partial loss totals and the carried hidden state of sequential partitioning, gathered
  over ranks into global batch rows); ``train_lm(resume=state)`` continues from it. The
  loader's RNG state at the start of the epoch is part of the state, so the resumed
  batches are those of an uninterrupted run, with any number of processes.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from attnkit.data.text import Vocab
from attnkit.training.checkpoint import get_rng_state, set_rng_state
from attnkit.training.stop import StopSignals

__all__ = [
    "EpochStats",
    "LMHistory",
    "LMTrainState",
    "clip_gradients",
    "detach_state",
    "generate",
    "make_optimizer",
    "model_parameters",
    "perplexity",
    "sgd_update",
    "train_epoch",
    "train_lm",
    "train_step",
]

Updater = torch.optim.Optimizer | Callable[[int], None]


def perplexity(total_nll: float, num_tokens: int) -> float:
    """``exp(total_nll / num_tokens)``: 1 is perfect, V is a uniform guess over V tokens."""
    if num_tokens <= 0:
        raise ValueError(f"num_tokens must be positive, got {num_tokens}")
    return math.exp(total_nll / num_tokens)


def model_parameters(model) -> list[Tensor]:
    """``model.parameters()`` for modules, ``model.params`` for the book's scratch glue."""
    if isinstance(model, nn.Module):
        return list(model.parameters())
    params = getattr(model, "params", None)
    if params is None:
        raise TypeError(f"expected an nn.Module or an object with .params, got {type(model)}")
    return list(params)


def clip_gradients(model_or_params, max_norm: float) -> float:
    """Scale all gradients so their global L2 norm is at most ``max_norm``; return the norm
    before clipping (``torch.nn.utils.clip_grad_norm_``)."""
    if not max_norm > 0:
        raise ValueError(f"max_norm must be positive, got {max_norm}")
    params = (
        model_parameters(model_or_params)
        if isinstance(model_or_params, nn.Module) or hasattr(model_or_params, "params")
        else list(model_or_params)
    )
    params = [p for p in params if p.grad is not None]
    if not params:
        return 0.0
    return float(torch.nn.utils.clip_grad_norm_(params, max_norm))


def detach_state(state):
    """Cut the autograd graph at a minibatch boundary (tensor or tuple of tensors)."""
    if isinstance(state, tuple | list):
        return type(state)(s.detach() for s in state)
    return state.detach()


def make_optimizer(model, name: str = "sgd", lr: float = 1.0) -> torch.optim.Optimizer:
    """``'sgd'`` (the book: plain SGD) or ``'adam'`` over the model's parameters."""
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr}")
    params = model_parameters(model)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    raise ValueError(f"optimizer must be 'sgd' or 'adam', got {name!r}")


def sgd_update(params: Iterable[Tensor], lr: float) -> Callable[[int], None]:
    """The book's ``sgd`` as an updater: ``p -= lr * p.grad / batch_size``, then zero grads."""
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr}")
    params = list(params)

    @torch.no_grad()
    def update(batch_size: int) -> None:
        for p in params:
            if p.grad is not None:
                p -= lr * p.grad / batch_size
                p.grad.zero_()

    return update


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


@dataclass
class LMTrainState:
    """Where a ``train_lm`` run stands; ``train_lm(resume=state)`` continues from it.

    ``epoch``: epochs finished. ``batch_in_epoch``: batches of the next epoch already
    trained (> 0 only after an interrupt), with ``partial`` their global (all ranks)
    loss sum, token count and seconds, and ``hidden`` the state carried after them
    (sequential partitioning only; global batch rows, on the CPU; None otherwise).
    ``loader_rng``: the loader's ``random.Random`` state at the start of the next epoch's
    batches (None when the loader has no ``rng``). ``rng``: torch/Python/NumPy RNG
    states (``get_rng_state``) when the state was taken.
    """

    epoch: int = 0
    batch_in_epoch: int = 0
    history: LMHistory = field(default_factory=LMHistory)
    partial: tuple[float, float, float] = (0.0, 0.0, 0.0)
    hidden: Any = None
    loader_rng: Any = None
    rng: dict[str, Any] | None = None


def _begin_state(model, batch_size: int, device):
    module = model.module if isinstance(model, DistributedDataParallel) else model
    return module.begin_state(batch_size=batch_size, device=device)


def _world_size() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1


def _all_reduce_totals(nll: float, n: int, device) -> tuple[float, int]:
    if _world_size() > 1:
        t = torch.tensor([nll, float(n)], dtype=torch.float64, device=device)
        torch.distributed.all_reduce(t)
        return float(t[0]), int(t[1])
    return nll, n


def _global_mean_scale(
    num_tokens: int, world: int, device, stop: bool = False
) -> tuple[float, bool]:
    """Factor turning this rank's token mean into its share of the global-batch mean, and
    whether any rank was asked to stop (the same all-reduce carries both).

    DDP averages gradients over ranks, so each rank's loss must be
    ``local_sum / global_tokens * world`` = ``local_mean * local_tokens * world / global``.
    """
    t = torch.tensor([float(num_tokens), float(stop)], dtype=torch.float64, device=device)
    torch.distributed.all_reduce(t)
    return num_tokens * world / max(float(t[0]), 1.0), bool(t[1] > 0)


def train_step(
    model,
    X: Tensor,
    Y: Tensor,
    state,
    updater: Updater,
    *,
    loss: Callable[[Tensor, Tensor], Tensor],
    params: list[Tensor],
    device,
    clip: float | None,
    world: int = 1,
    stop: bool = False,
):
    """One truncated-BPTT update on ``(X, Y)`` (B, T) from ``state``.

    Returns ``(new state, mean NLL per token, tokens, stop)``; with several processes
    ``stop`` says whether any rank passed ``stop=True`` (agreed through the step's
    all-reduce), with one it echoes the argument.
    """
    y = Y.T.reshape(-1).to(device)  # (T*B,), time-major like the logits
    y_hat, state = model(X.to(device), state)  # (T*B, V)
    lval = loss(y_hat, y.long()).mean()
    for p in params:
        p.grad = None
    if world > 1:  # rows per rank may differ: weigh by tokens (one tiny all-reduce)
        scale, stop = _global_mean_scale(y.numel(), world, device, stop)
        (lval * scale).backward()
    else:
        lval.backward()
    if clip is not None:
        clip_gradients(params, clip)
    if isinstance(updater, torch.optim.Optimizer):
        updater.step()
    else:
        updater(1)
    return state, float(lval.detach()), y.numel(), stop


@dataclass
class _EpochRun:
    finished: bool  # False: stopped mid-epoch after ``done`` batches
    done: int  # batches of the epoch trained (skipped ones included)
    nll: float  # this rank's loss sum (plus ``initial``)
    n: int  # this rank's tokens (plus ``initial``)
    seconds: float
    state: Any  # the carried hidden state after the last trained batch
    stop: bool  # a stop was asked (agreed by every rank) during the last step


def _run_epoch(
    model,
    data_iter: Iterable[tuple[Tensor, Tensor]],
    updater: Updater,
    *,
    loss,
    device,
    use_random_iter: bool,
    clip: float | None,
    skip: int = 0,
    state=None,
    initial: tuple[float, int] = (0.0, 0),
    stop: Callable[[], bool] | None = None,
) -> _EpochRun:
    loss = loss if loss is not None else nn.CrossEntropyLoss()
    device = torch.device(device) if device is not None else _model_device(model)
    params = model_parameters(model)
    if isinstance(model, nn.Module):
        model.train()
    world = _world_size()
    total_nll, total_n = initial
    done, stopping, finished = skip, False, True
    start = time.perf_counter()
    for i, (X, Y) in enumerate(data_iter):  # (B, T), (B, T)
        if i < skip:  # resuming: the batches are those of the interrupted epoch
            continue
        if stopping:  # asked during the previous step, and this epoch is not over
            finished = False
            break
        if state is None or use_random_iter:
            state = _begin_state(model, X.shape[0], device)
        else:
            state = detach_state(state)
        asked = world > 1 and stop is not None and stop()
        state, lval, n, agreed = train_step(
            model, X, Y, state, updater, loss=loss, params=params, device=device, clip=clip,
            world=world, stop=asked,
        )  # fmt: skip
        total_nll += lval * n
        total_n += n
        done = i + 1
        # one process: as soon as asked; several: when the step's all-reduce said so
        stopping = agreed if world > 1 else (stop is not None and stop())
    seconds = time.perf_counter() - start
    return _EpochRun(finished, done, total_nll, total_n, seconds, state, stopping)


def train_epoch(
    model,
    data_iter: Iterable[tuple[Tensor, Tensor]],
    updater: Updater,
    *,
    loss: Callable[[Tensor, Tensor], Tensor] | None = None,
    device: torch.device | str | None = None,
    use_random_iter: bool = False,
    clip: float | None = 1.0,
) -> EpochStats:
    """One epoch of truncated BPTT; returns perplexity and tokens/s.

    ``updater`` is an optimizer or, as the book's scratch code, a callable taking the
    batch size (called with 1 because the loss is already a mean).
    """
    device = torch.device(device) if device is not None else _model_device(model)
    run = _run_epoch(
        model, data_iter, updater, loss=loss, device=device, use_random_iter=use_random_iter,
        clip=clip,
    )  # fmt: skip
    if run.n == 0:
        raise ValueError("data_iter yielded no minibatches; the corpus is too short")
    total_nll, total_n = _all_reduce_totals(run.nll, run.n, device)
    return EpochStats(
        perplexity(total_nll, total_n), run.n / max(run.seconds, 1e-9), total_n, run.seconds
    )


def _model_device(model) -> torch.device:  # (works for DDP wrappers too)
    params = model_parameters(model)
    return params[0].device if params else torch.device("cpu")


# ----------------------------------------------------------------------------- resume helpers


def _loader_rng(data_iter) -> random.Random | None:
    rng = getattr(data_iter, "rng", None)
    return rng if isinstance(rng, random.Random) else None


def _state_batch_dim(model) -> int:
    """The batch dimension of the model's hidden state (where begin_state(1) and (2) differ)."""
    one, two = _begin_state(model, 1, "cpu"), _begin_state(model, 2, "cpu")
    one = one[0] if isinstance(one, tuple | list) else one
    two = two[0] if isinstance(two, tuple | list) else two
    dims = [d for d, (a, b) in enumerate(zip(one.shape, two.shape, strict=True)) if a != b]
    if len(dims) != 1:
        raise ValueError(f"cannot tell the batch dimension of states {one.shape} / {two.shape}")
    return dims[0]


def _map_state(state, fn):
    if isinstance(state, tuple | list):
        return type(state)(fn(s) for s in state)
    return fn(state)


def _gather_rows(state, dim: int, rank: int, world: int):
    """The carried state of every rank as one state of the global batch rows (CPU)."""
    if world == 1:
        return _map_state(state, lambda s: s.detach().cpu().clone())

    def gather(s: Tensor) -> Tensor:
        s = s.detach()
        rows = torch.tensor([float(s.shape[dim])], dtype=torch.float64, device=s.device)
        torch.distributed.all_reduce(rows)  # the global batch size
        shape = list(s.shape)
        shape[dim] = int(rows)
        full = torch.zeros(shape, dtype=s.dtype, device=s.device)
        idx = torch.arange(rank, int(rows), world, device=s.device)
        full.index_copy_(dim, idx, s)
        torch.distributed.all_reduce(full)  # rows are disjoint: the sum is the gather
        return full.cpu()

    return _map_state(state, gather)


def _rank_rows(state, dim: int, rank: int, world: int, device):
    """This rank's rows ``rank::world`` of a global-batch state, on ``device``."""

    def take(s: Tensor) -> Tensor:
        idx = torch.arange(rank, s.shape[dim], world)
        return s.index_select(dim, idx).to(device)

    return _map_state(state, take)


def train_lm(
    model,
    data_iter: Iterable[tuple[Tensor, Tensor]],
    *,
    num_epochs: int,
    updater: Updater | None = None,
    lr: float = 1.0,
    optimizer: str = "sgd",
    clip: float | None = 1.0,
    use_random_iter: bool = False,
    device: torch.device | str | None = None,
    rank: int = 0,
    world_size: int = 1,
    progress: bool = True,
    on_epoch: Callable[[int, EpochStats], None] | None = None,
    on_save: Callable[[LMTrainState], None] | None = None,
    resume: LMTrainState | None = None,
) -> LMHistory:
    """Train for ``num_epochs``; a tqdm bar (rank 0 only) shows perplexity and tokens/s.

    ``updater`` overrides ``optimizer``/``lr`` (e.g. the book's scratch ``sgd``).
    ``on_epoch(epoch, stats)`` is called on every rank after each epoch (1-based).
    With an initialized process group, ``rank``/``world_size`` come from it and the model
    trains inside ``DistributedDataParallel`` (``data_iter`` must give each rank its
    rows of the global batches, as ``LMDataLoader(rank=, world_size=)`` does).

    ``on_save(state)`` (called on every rank; write on one) gets an ``LMTrainState``
    after every epoch. When it is given, Ctrl-C/SIGTERM finishes the current step
    (every rank the same step), calls ``on_save`` with the mid-epoch state and raises
    ``TrainingInterrupted`` (a ``KeyboardInterrupt``); a second Ctrl-C stops at once.
    ``resume=state`` continues such a state until ``num_epochs``: it restores the RNG
    states and the loader's RNG, skips the batches already trained, and gives each rank
    its rows of the saved hidden state (any number of processes). Model and optimizer
    states are the caller's to restore.
    """
    if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs <= 0:
        raise ValueError(f"num_epochs must be a positive int, got {num_epochs!r}")
    if _world_size() > 1:
        rank, world_size = torch.distributed.get_rank(), _world_size()
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
    start_at = resume if resume is not None else LMTrainState()
    if start_at.epoch > num_epochs or (start_at.epoch == num_epochs and start_at.batch_in_epoch):
        raise ValueError(
            f"the state to resume is at epoch {start_at.epoch}, past num_epochs={num_epochs}"
        )
    if updater is None:
        updater = make_optimizer(model, optimizer, lr)
    net = model
    if world_size > 1:
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"multi-process training needs an nn.Module model, got {type(model).__name__}"
            )
        net = DistributedDataParallel(model)  # broadcasts rank 0's parameters
    device = torch.device(device) if device is not None else _model_device(model)
    loader_rng = _loader_rng(data_iter)
    hidden = None
    if resume is not None:
        if resume.rng is not None:
            set_rng_state(resume.rng)
        if resume.loader_rng is not None:
            if loader_rng is None:
                raise ValueError("the state to resume has a loader RNG state; data_iter has no rng")
            version, internal, gauss = resume.loader_rng
            loader_rng.setstate((int(version), tuple(int(x) for x in internal), gauss))
        if resume.hidden is not None and resume.batch_in_epoch and not use_random_iter:
            hidden = _rank_rows(resume.hidden, _state_batch_dim(net), rank, world_size, device)
    prev = start_at.history
    history = LMHistory(list(prev.perplexity), list(prev.tokens_per_sec), prev.seconds)
    base_seconds = history.seconds
    start = time.perf_counter()
    epochs: Iterator[int] | Iterable[int] = range(start_at.epoch + 1, num_epochs + 1)
    bar = None
    if progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(
            epochs, desc="train", unit="epoch", dynamic_ncols=True, initial=start_at.epoch,
            total=num_epochs,
        )  # fmt: skip
        epochs = bar
    stopper = StopSignals(verbose=rank == 0) if on_save is not None else None

    def snapshot(epoch: int, done: int, partial, hidden_state) -> LMTrainState:
        history.seconds = base_seconds + time.perf_counter() - start
        return LMTrainState(
            epoch=epoch,
            batch_in_epoch=done,
            history=LMHistory(
                list(history.perplexity), list(history.tokens_per_sec), history.seconds
            ),
            partial=partial,
            hidden=hidden_state,
            loader_rng=loader_rng.getstate() if loader_rng is not None else None,
            rng=get_rng_state(),
        )

    try:
        if stopper is not None:
            stopper.__enter__()
        for epoch in epochs:
            first = epoch == start_at.epoch + 1 and start_at.batch_in_epoch > 0
            skip = start_at.batch_in_epoch if first else 0
            p_nll, p_n, p_sec = start_at.partial if first else (0.0, 0.0, 0.0)
            epoch_rng = loader_rng.getstate() if loader_rng is not None else None
            run = _run_epoch(
                net, data_iter, updater, loss=None, device=device,
                use_random_iter=use_random_iter, clip=clip, skip=skip,
                state=hidden if first else None,
                # the partial totals are global: counted once, on rank 0
                initial=(p_nll, int(p_n)) if rank == 0 else (0.0, 0),
                stop=stopper,
            )  # fmt: skip
            total_nll, total_n = _all_reduce_totals(run.nll, run.n, device)
            seconds = p_sec + run.seconds
            if not run.finished:  # interrupted mid-epoch, after batch run.done
                carried = None
                if not use_random_iter and run.state is not None:
                    carried = _gather_rows(run.state, _state_batch_dim(net), rank, world_size)
                state = snapshot(epoch - 1, run.done, (total_nll, float(total_n), seconds), carried)
                state.loader_rng = epoch_rng  # the batches of this epoch, from its start
                on_save(state)
                from attnkit.training.trainer import TrainingInterrupted

                raise TrainingInterrupted(f"epoch {epoch}, batch {run.done}")
            if total_n == 0:
                raise ValueError("data_iter yielded no minibatches; the corpus is too short")
            local_n = run.n if not first else total_n / world_size
            stats = EpochStats(
                perplexity(total_nll, total_n), local_n / max(seconds, 1e-9), total_n, seconds
            )
            history.perplexity.append(stats.perplexity)
            history.tokens_per_sec.append(stats.tokens_per_sec * world_size)
            if bar is not None:
                bar.set_postfix(ppl=f"{stats.perplexity:.2f}", tok_s=f"{stats.tokens_per_sec:.0f}")
            if on_epoch is not None:
                on_epoch(epoch, stats)
            if on_save is not None:
                on_save(snapshot(epoch, 0, (0.0, 0.0, 0.0), None))
            if run.stop and epoch < num_epochs:  # asked during the last batch of the epoch
                from attnkit.training.trainer import TrainingInterrupted

                raise TrainingInterrupted(f"the end of epoch {epoch}")
    finally:
        if stopper is not None:
            stopper.__exit__()
        if bar is not None:
            bar.close()
    history.seconds = base_seconds + time.perf_counter() - start
    return history


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
    device = torch.device(device) if device is not None else _model_device(model)
    was_training = isinstance(model, nn.Module) and model.training
    if isinstance(model, nn.Module):
        model.eval()
    try:
        state = _begin_state(model, 1, device)
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
