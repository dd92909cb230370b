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
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from attnkit.data.text import Vocab

__all__ = [
    "EpochStats",
    "LMHistory",
    "clip_gradients",
    "detach_state",
    "generate",
    "make_optimizer",
    "model_parameters",
    "perplexity",
    "sgd_update",
    "train_epoch",
    "train_lm",
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


def _global_mean_scale(num_tokens: int, world: int, device) -> float:
    """Factor turning this rank's token mean into its share of the global-batch mean.

    DDP averages gradients over ranks, so each rank's loss must be
    ``local_sum / global_tokens * world`` = ``local_mean * local_tokens * world / global``.
    """
    t = torch.tensor([float(num_tokens)], dtype=torch.float64, device=device)
    torch.distributed.all_reduce(t)
    return num_tokens * world / max(float(t[0]), 1.0)


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
    loss = loss if loss is not None else nn.CrossEntropyLoss()
    device = torch.device(device) if device is not None else _model_device(model)
    params = model_parameters(model)
    if isinstance(model, nn.Module):
        model.train()
    world = _world_size()
    state, total_nll, total_n = None, 0.0, 0
    start = time.perf_counter()
    for X, Y in data_iter:  # (B, T), (B, T)
        if state is None or use_random_iter:
            state = _begin_state(model, X.shape[0], device)
        else:
            state = detach_state(state)
        y = Y.T.reshape(-1).to(device)  # (T*B,), time-major like the logits
        y_hat, state = model(X.to(device), state)  # (T*B, V)
        lval = loss(y_hat, y.long()).mean()
        for p in params:
            p.grad = None
        if world > 1:  # rows per rank may differ: weigh by tokens (one tiny all-reduce)
            (lval * _global_mean_scale(y.numel(), world, device)).backward()
        else:
            lval.backward()
        if clip is not None:
            clip_gradients(params, clip)
        if isinstance(updater, torch.optim.Optimizer):
            updater.step()
        else:
            updater(1)
        total_nll += float(lval.detach()) * y.numel()
        total_n += y.numel()
    seconds = time.perf_counter() - start
    if total_n == 0:
        raise ValueError("data_iter yielded no minibatches; the corpus is too short")
    local_n = total_n
    total_nll, total_n = _all_reduce_totals(total_nll, total_n, device)
    return EpochStats(
        perplexity(total_nll, total_n), local_n / max(seconds, 1e-9), total_n, seconds
    )


def _model_device(model) -> torch.device:  # (works for DDP wrappers too)
    params = model_parameters(model)
    return params[0].device if params else torch.device("cpu")


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
) -> LMHistory:
    """Train for ``num_epochs``; a tqdm bar (rank 0 only) shows perplexity and tokens/s.

    ``updater`` overrides ``optimizer``/``lr`` (e.g. the book's scratch ``sgd``).
    ``on_epoch(epoch, stats)`` is called on every rank after each epoch (1-based).
    With an initialized process group, ``rank``/``world_size`` come from it and the model
    trains inside ``DistributedDataParallel`` (``data_iter`` must give each rank its
    rows of the global batches, as ``LMDataLoader(rank=, world_size=)`` does).
    """
    if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs <= 0:
        raise ValueError(f"num_epochs must be a positive int, got {num_epochs!r}")
    if _world_size() > 1:
        rank, world_size = torch.distributed.get_rank(), _world_size()
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
    if updater is None:
        updater = make_optimizer(model, optimizer, lr)
    net = model
    if world_size > 1:
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"multi-process training needs an nn.Module model, got {type(model).__name__}"
            )
        net = DistributedDataParallel(model)  # broadcasts rank 0's parameters
    history = LMHistory()
    start = time.perf_counter()
    epochs: Iterator[int] | Iterable[int] = range(1, num_epochs + 1)
    bar = None
    if progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(epochs, desc="train", unit="epoch", dynamic_ncols=True)
        epochs = bar
    for epoch in epochs:
        stats = train_epoch(
            net,
            data_iter,
            updater,
            device=device,
            use_random_iter=use_random_iter,
            clip=clip,
        )
        history.perplexity.append(stats.perplexity)
        history.tokens_per_sec.append(stats.tokens_per_sec * world_size)
        if bar is not None:
            bar.set_postfix(ppl=f"{stats.perplexity:.2f}", tok_s=f"{stats.tokens_per_sec:.0f}")
        if on_epoch is not None:
            on_epoch(epoch, stats)
    if bar is not None:
        bar.close()
    history.seconds = time.perf_counter() - start
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
