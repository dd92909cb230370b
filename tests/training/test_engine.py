"""The one training engine: its step's arithmetic, reductions, trimming, updaters, the
non-terminal progress output, argument checks and the checkpoint formats it reads."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from attnkit.checkpoint import load_checkpoint, read_checkpoint_config
from attnkit.data.translation import load_translation_data
from attnkit.models.registry import build_model
from attnkit.training.engine import Engine, EngineConfig, StepLoss, Task
from attnkit.training.losses import MaskedSoftmaxCELoss
from attnkit.training.optim import make_optimizer, sgd_update
from attnkit.training.translation import PaddedPairsTask, TrainConfig, Trainer, trim_padding

MODEL = {"embed_size": 8, "num_hiddens": 8, "num_layers": 1, "dropout": 0.0}


class LinearTask(Task):
    """y = w x with a squared loss; batches are fixed tensors."""

    name = "linear"

    def __init__(self, batches, denominator=None):
        self._batches, self.denominator = batches, denominator

    def batches(self, epoch, rank, world_size):
        return self._batches

    def loss(self, ctx, batch, carry):
        x, y = batch
        loss_sum = ((ctx.net(x) - y) ** 2).sum()
        return StepLoss(loss_sum, torch.tensor(x.shape[0]), denominator=self.denominator)


def _linear(seed=0):
    torch.manual_seed(seed)
    return nn.Linear(3, 1, bias=False).double()


def _data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, generator=g, dtype=torch.float64)
    return [(x, x.sum(1, keepdim=True))]


@pytest.mark.parametrize(("denominator", "scale"), [(None, 1 / 4), (1, 1.0), (8.0, 1 / 8)])
def test_a_step_is_sgd_on_loss_sum_over_the_denominator(denominator, scale):
    model, (batch,) = _linear(), _data()
    reference = _linear()
    config = EngineConfig(epochs=1, lr=0.1, clip=None, optimizer="sgd", seed=None, log_every=0)
    engine = Engine(model, LinearTask([batch], denominator), config)
    loss_sum, tokens, carry = engine.train_step(batch)
    x, y = batch
    ref_loss = ((reference(x) - y) ** 2).sum()
    (ref_loss * scale).backward()
    with torch.no_grad():
        expected = reference.weight - 0.1 * reference.weight.grad
    torch.testing.assert_close(model.weight, expected, rtol=0, atol=1e-15)
    assert float(loss_sum) == pytest.approx(float(ref_loss.detach())) and int(tokens) == 4
    assert carry is None and engine.step == 1


def test_clipping_and_a_callable_updater():
    model, (batch,) = _linear(), _data()
    reference = _linear()
    config = EngineConfig(epochs=1, clip=0.01, seed=None, log_every=0)
    engine = Engine(model, LinearTask([batch]), config, optimizer=sgd_update(model.parameters(), 1))
    engine.train_step(batch)
    x, y = batch
    (((reference(x) - y) ** 2).sum() / 4).backward()
    grad = reference.weight.grad
    clipped = grad * min(1.0, 0.01 / (float(grad.norm()) + 1e-6))  # clip_grad_norm_'s eps
    torch.testing.assert_close(model.weight, reference.weight - clipped, rtol=0, atol=1e-12)
    assert float((model.weight - reference.weight).detach().norm()) == pytest.approx(0.01, rel=1e-4)


def test_fit_reports_the_token_mean_and_keeps_one_history_row_per_evaluation(capsys):
    model = _linear()
    data = _data() * 3
    config = EngineConfig(epochs=4, lr=0.05, optimizer="sgd", eval_every=2, seed=None)
    history = Engine(model, LinearTask(data), config).fit()
    assert history["epoch"] == [2, 4]
    assert len(history["train_loss"]) == len(history["tokens_per_s"]) == 2
    assert history["train_loss"][1] < history["train_loss"][0]
    # captured stdout is no terminal: one line per history row, no progress bar refreshes
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["epoch 2/4", "epoch 4/4"]
    assert "\r" not in out.out + out.err and "batch/s" not in out.err


def test_per_sequence_sum_is_the_books_loss_and_trimming_changes_nothing():
    """The book: MaskedSoftmaxCELoss per sequence over the padded length, .sum().backward().
    The engine trims the batch to its longest sequence and must give the same update."""
    data = load_translation_data(None, num_pairs=60, seed=0)
    torch.manual_seed(0)
    model = build_model("seq2seq", MODEL, len(data.src_vocab), len(data.tgt_vocab)).double()
    book = build_model("seq2seq", MODEL, len(data.src_vocab), len(data.tgt_vocab)).double()
    book.load_state_dict(model.state_dict())
    batch = data.batches("train", 200, shuffle=False)[0]
    pad = data.tgt_vocab["<pad>"]
    src, src_len, tgt, tgt_len = batch.astuple()
    src = torch.cat([src, torch.full((src.shape[0], 3), pad)], 1)  # padded like the book's
    tgt = torch.cat([tgt, torch.full((tgt.shape[0], 4), pad)], 1)  # num_steps arrays
    assert trim_padding(tgt, tgt_len).shape[1] == tgt.shape[1] - 4
    bos = data.tgt_vocab["<bos>"]
    task = PaddedPairsTask([(src, src_len, tgt, tgt_len)], bos, reduction="per_sequence_sum")
    config = EngineConfig(epochs=1, lr=0.01, clip=None, beta2=0.999, seed=None, log_every=0)
    engine = Engine(model, task, config, optimizer=torch.optim.SGD(model.parameters(), lr=0.01))
    loss_sum, tokens, _ = engine.train_step((src, src_len, tgt, tgt_len))
    dec_in = torch.cat([torch.full((tgt.shape[0], 1), bos), tgt[:, :-1]], 1)
    per_seq = MaskedSoftmaxCELoss(reduction="none")(book(src, dec_in, src_len)[0], tgt, tgt_len)
    per_seq.sum().backward()
    with torch.no_grad():
        for p in book.parameters():
            p -= 0.01 * p.grad
    for (name, a), b in zip(model.state_dict().items(), book.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)
    assert float(loss_sum) == pytest.approx(float(per_seq.sum().detach()), rel=1e-10)
    assert int(tokens) == int(tgt_len.sum())


def test_argument_checks():
    model, data = _linear(), _data()
    ok = EngineConfig(epochs=1)
    with pytest.raises(TypeError, match="task must be an attnkit Task, got list"):
        Engine(model, [], ok)
    with pytest.raises(TypeError, match="config must be an EngineConfig, got dict"):
        Engine(model, LinearTask(data), {"epochs": 1})
    with pytest.raises(TypeError, match="optimizer must be an Optimizer or a callable"):
        Engine(model, LinearTask(data), ok, optimizer=3)
    with pytest.raises(ValueError, match=r"EngineConfig\.epochs must be a positive int, got 0"):
        EngineConfig(epochs=0)
    with pytest.raises(ValueError, match=r"EngineConfig\.log_every must be a non-negative int"):
        EngineConfig(log_every=-1)
    with pytest.raises(TypeError, match=r"EngineConfig\.seed must be an int, got 1\.5 \(float\)"):
        EngineConfig(seed=1.5)
    with pytest.raises(TypeError, match=r"EngineConfig\.epochs must be a positive int, got True"):
        EngineConfig(epochs=True)
    with pytest.raises(TypeError, match=r"EngineConfig\.progress must be a bool, got 1 \(int\)"):
        EngineConfig(progress=1)
    with pytest.raises(TypeError, match=r"EngineConfig\.flat_params must be a bool, got 'no'"):
        EngineConfig(flat_params="no")
    with pytest.raises(
        ValueError, match=r"EngineConfig\.optimizer must be one of 'adam', 'sgd', got 'rmsprop'"
    ):
        EngineConfig(optimizer="rmsprop")
    with pytest.raises(ValueError, match=r"TrainConfig\.batch_tokens must be a positive int"):
        TrainConfig(batch_tokens=0)
    with pytest.raises(ValueError, match="reduction must be one of"):
        PaddedPairsTask([], 2, reduction="mean")
    with pytest.raises(ValueError, match="lr must be a positive number, got -1"):
        make_optimizer(model, "adam", -1)
    with pytest.raises(TypeError, match=r"EngineConfig\.lr must be a positive number, got '1e-3'"):
        EngineConfig(lr="1e-3")
    with pytest.raises(ValueError, match=r"EngineConfig\.lr must be a positive number, got inf"):
        EngineConfig(lr=float("inf"))
    assert EngineConfig(lr=1).lr == 1  # ints are learning rates too
    empty = Engine(model, LinearTask([]), EngineConfig(epochs=1, log_every=0))
    with pytest.raises(ValueError, match="epoch 1 had no batches with tokens"):
        empty.fit()


def _translator(tmp_path, epochs=1):
    data = load_translation_data(None, num_pairs=80, seed=0)
    torch.manual_seed(0)
    model = build_model("seq2seq", MODEL, len(data.src_vocab), len(data.tgt_vocab))
    config = TrainConfig(
        epochs=epochs, batch_tokens=300, out_dir=str(tmp_path), progress=False,
        bleu_sentences=4, log_every=0,
    )  # fmt: skip
    return Trainer(model, data, config, arch="seq2seq", model_config=MODEL)


def test_checkpoints_carry_the_task_and_old_formats_load_or_say_what_to_do(tmp_path):
    trainer = _translator(tmp_path / "new")
    trainer.fit()
    config = read_checkpoint_config(tmp_path / "new")
    assert (config["task"], config["version"], config["epoch"]) == ("translation", 2, 1)
    # version 1 (before the task field) still loads as a translator
    path = tmp_path / "new" / "config.json"
    old = {k: v for k, v in json.loads(path.read_text()).items() if k != "task"}
    path.write_text(json.dumps({**old, "version": 1}))
    ck = load_checkpoint(tmp_path / "new")
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(ck.model_state[name], value), name
    resumed = _translator(tmp_path / "new", epochs=2)
    assert resumed.resume() and resumed.epoch == 1
    # another task's checkpoint, and a newer format, are named
    with pytest.raises(ValueError, match=r"is a translator checkpoint .*; this needs a language"):
        load_checkpoint(tmp_path / "new", task="lm")
    path.write_text(json.dumps({**old, "version": 3}))
    with pytest.raises(ValueError, match="format version 3; this attnkit reads versions 1 and 2"):
        read_checkpoint_config(tmp_path / "new")


def test_tensor_batches_are_the_loaders_batches_with_the_same_rng_draws():
    from torch.utils.data import DataLoader, TensorDataset

    from attnkit.training.translation import TensorBatches

    X, lens = torch.arange(130 * 4).reshape(130, 4), torch.randint(1, 5, (130,))
    loader = DataLoader(TensorDataset(X, lens), 16, shuffle=True)
    torch.manual_seed(3)
    expected, state = list(loader), torch.get_rng_state()
    torch.manual_seed(3)
    fast = TensorBatches.wrap(loader)
    assert isinstance(fast, TensorBatches) and len(fast) == len(loader) == 9
    got = list(fast)
    assert torch.equal(torch.get_rng_state(), state)  # the same draws: base seed, sampler
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    # anything else is iterated as it is
    custom = DataLoader(TensorDataset(X, lens), 16, collate_fn=lambda rows: rows)
    assert TensorBatches.wrap(custom) is custom and TensorBatches.wrap(expected) is expected


def test_more_argument_checks():
    model, data = _linear(), _data()
    with pytest.raises(ValueError, match="a callable updater has none"):
        config = EngineConfig(epochs=1, schedule="inverse_sqrt", warmup_steps=2)
        Engine(model, LinearTask(data), config, optimizer=sgd_update(model.parameters(), 0.1))
    with pytest.raises(
        TypeError, match=r"EngineConfig\.clip must be a positive finite number, got '1' \(str\)"
    ):
        EngineConfig(clip="1")
    with pytest.raises(ValueError, match=r"EngineConfig\.clip must be a positive finite number"):
        EngineConfig(clip=0)
    assert EngineConfig(clip=None).clip is None
    with pytest.raises(ValueError, match=r"EngineConfig\.weight_decay must be a finite number"):
        EngineConfig(weight_decay=float("nan"))
    with pytest.raises(TypeError, match=r"EngineConfig\.weight_decay must be a finite number"):
        EngineConfig(weight_decay=None)
    with pytest.raises(ValueError, match=r"EngineConfig\.beta2 must be in \[0, 1\), got 1\.0"):
        EngineConfig(beta2=1.0)
    with pytest.raises(TypeError, match=r"EngineConfig\.beta1 must be a float in \[0, 1\), got '0"):
        EngineConfig(beta1="0.9")
    with pytest.raises(
        TypeError,
        match=r"TrainConfig\.bleu_sentences must be a non-negative int, got 2\.5 \(float\)",
    ):
        TrainConfig(bleu_sentences=2.5)
    with pytest.raises(ValueError, match="no checkpoint directory"):
        Engine(model, LinearTask(data), EngineConfig(epochs=1)).resume()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"reduction": "mean"}, ValueError,
         "reduction must be one of 'token_mean', 'per_sequence_sum', got 'mean'"),
        ({"label_smoothing": 1.0}, ValueError, r"label_smoothing must be in \[0, 1\), got 1\.0"),
        ({"label_smoothing": "0.1"}, TypeError,
         r"label_smoothing must be a float in \[0, 1\), got '0\.1' \(str\)"),
    ],
)  # fmt: skip
def test_padded_pairs_task_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        PaddedPairsTask([], 2, **kwargs)


@pytest.mark.parametrize("clip", [None, 1.0])
def test_flat_parameters_train_as_separate_ones(clip):
    data = load_translation_data(None, num_pairs=60, seed=0)
    batches = data.batches("train", 200, shuffle=False)
    bos = data.tgt_vocab["<bos>"]
    runs = []
    for flat in (False, True):
        torch.manual_seed(0)
        model = build_model("seq2seq", MODEL, len(data.src_vocab), len(data.tgt_vocab))
        config = EngineConfig(
            epochs=2, lr=0.01, clip=clip, seed=None, log_every=0, flat_params=flat
        )
        engine = Engine(model, PaddedPairsTask(batches, bos), config)
        engine.fit()
        assert len(engine.params) == (1 if flat else len(list(model.parameters())))
        runs.append(model.state_dict())
    for name, value in runs[0].items():
        if clip is None:  # elementwise the same arithmetic
            assert torch.equal(value, runs[1][name]), name
        else:  # one norm over a flat tensor rounds differently from a norm of norms
            torch.testing.assert_close(value, runs[1][name], rtol=1e-5, atol=1e-6)


def test_padded_pairs_stopped_mid_epoch_resume_exactly_with_a_seeded_loader():
    from torch.utils.data import DataLoader, TensorDataset

    from attnkit.training.engine import TrainingInterrupted

    data = load_translation_data(None, num_pairs=120, seed=0)
    rows = [b.astuple() for b in data.batches("train", 100000, shuffle=False)]
    tensors = [torch.cat([torch.nn.functional.pad(r[i], (0, 12 - r[i].shape[1])) if r[i].dim() == 2 else r[i] for r in rows]) for i in range(4)]  # fmt: skip
    bos = data.tgt_vocab["<bos>"]

    def engine(epochs):
        loader = DataLoader(
            TensorDataset(*tensors), 16, shuffle=True, generator=torch.Generator().manual_seed(5)
        )
        torch.manual_seed(0)
        model = build_model("seq2seq", {**MODEL, "dropout": 0.2}, len(data.src_vocab), len(data.tgt_vocab))  # fmt: skip
        config = EngineConfig(epochs=epochs, lr=0.01, seed=1, log_every=0)
        return Engine(model, PaddedPairsTask(loader, bos), config)

    straight = engine(2)
    straight.fit()
    first = engine(2)
    per_epoch = len(first.task._batches)
    original = first.train_step

    def train_step(*args):
        out = original(*args)
        if first.step == per_epoch + 3:  # 3 batches into epoch 2
            first._stop.requested = True
        return out

    first.train_step = train_step
    with pytest.raises(TrainingInterrupted, match=f"epoch 2, batch 3/{per_epoch}"):
        first.fit()
    state, history = first.state_dict(), first.history
    resumed = engine(2)
    resumed.model.load_state_dict(first.model.state_dict())  # what resume() reads from disk
    resumed.load_state_dict(state, history)
    resumed.fit()
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):  # fmt: skip
        assert torch.equal(a, b), name
    # a shuffled loader drawing from the global RNG could not be replayed: no checkpoint
    unseeded = DataLoader(TensorDataset(*tensors), 16, shuffle=True)
    bad = Engine(straight.model, PaddedPairsTask(unseeded, bos), EngineConfig(epochs=1))
    with pytest.raises(ValueError, match="draws its order from the global RNG"):
        bad.checkpoint_config()


def test_a_resumed_run_takes_its_own_lr_and_a_passed_optimizer_keeps_its_state(tmp_path):
    """--resume --lr X: the optimizer state comes back (Adam's moments), its lr is the new
    run's (it used to stay the checkpoint's: the flag was silently ignored); an optimizer
    the caller built keeps the lr its state holds."""
    config = {"optimizer": "adam", "out_dir": str(tmp_path), "progress": False, "log_every": 0}
    first = Engine(_linear(), LinearTask(_data()), EngineConfig(epochs=1, lr=0.1, **config))
    first.fit()
    moments = first.optimizer.state_dict()["state"][0]["exp_avg"].clone()
    again = Engine(_linear(), LinearTask(_data()), EngineConfig(epochs=2, lr=0.02, **config))
    assert again.resume() and again.epoch == 1
    assert [g["lr"] for g in again.optimizer.param_groups] == [0.02]
    assert torch.equal(again.optimizer.state_dict()["state"][0]["exp_avg"], moments)
    model = _linear()
    mine = torch.optim.Adam(model.parameters(), lr=0.5)
    passed = Engine(
        model, LinearTask(_data()), EngineConfig(epochs=2, lr=0.02, **config), optimizer=mine
    )
    assert passed.resume() and [g["lr"] for g in mine.param_groups] == [0.1]
