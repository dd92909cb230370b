"""Base classes: add_to_class, HyperParameters, Module/DataModule/Trainer on the engine."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnkit.d2l import v1 as d2l


def test_add_to_class_extends_a_class_after_the_fact():
    class A:
        def __init__(self):
            self.b = 1

    a = A()

    @d2l.add_to_class(A)
    def do(self):
        return f"Class attribute 'b' is {self.b}"

    assert a.do() == "Class attribute 'b' is 1"  # the book's printed value
    with pytest.raises(TypeError, match="add_to_class needs a class"):
        d2l.add_to_class(a)


def test_save_hyperparameters_as_the_book():
    class B(d2l.HyperParameters):
        def __init__(self, a, b, c):
            self.save_hyperparameters(ignore=["c"])

    b = B(a=1, b=2, c=3)
    assert (b.a, b.b, hasattr(b, "c")) == (1, 2, False)
    assert b.hparams == {"a": 1, "b": 2}


def test_progress_board_averages_every_n_and_saves(tmp_path):
    board = d2l.ProgressBoard("x", display=False)
    for x in range(10):
        board.draw(x, torch.tensor(float(x) ** 2), "sq", every_n=2)
    assert [p.x for p in board.data["sq"]] == [0.5, 2.5, 4.5, 6.5, 8.5]
    assert [p.y for p in board.data["sq"]] == [0.5, 6.5, 20.5, 42.5, 72.5]
    assert board.save(tmp_path / "b.png").stat().st_size > 0
    with pytest.raises(ValueError, match="every_n must be a positive int, got 0"):
        board.draw(1, 1, "sq", every_n=0)
    with pytest.raises(TypeError, match=r"every_n must be a positive int, got '2' \(str\)"):
        board.draw(1, 1, "sq", every_n="2")


class SyntheticRegressionData(d2l.DataModule):  # the book's chapter 3 class, as written
    def __init__(self, w, b, noise=0.01, num_train=1000, num_val=1000, batch_size=32):
        super().__init__()
        self.save_hyperparameters()
        n = num_train + num_val
        self.X = torch.randn(n, len(w))
        noise = torch.randn(n, 1) * noise
        self.y = torch.matmul(self.X, w.reshape((-1, 1))) + b + noise

    def get_dataloader(self, train):
        i = slice(0, self.num_train) if train else slice(self.num_train, None)
        return self.get_tensorloader((self.X, self.y), train, i)


LinearRegression = d2l.LinearRegression  # the book's concise linear regression


def test_trainer_fits_the_books_linear_regression_on_the_engine():
    torch.manual_seed(0)
    data = SyntheticRegressionData(w=torch.tensor([2, -3.4]), b=4.2)
    model = LinearRegression(lr=0.03)
    trainer = d2l.Trainer(max_epochs=3)
    trainer.fit(model, data)
    w, b = model.net.weight.data, model.net.bias.data
    assert torch.allclose(w.reshape(-1), torch.tensor([2, -3.4]), atol=0.05)
    assert abs(float(b) - 4.2) < 0.05
    assert trainer.train_batch_idx == 3 * 32 and trainer.val_batch_idx == 3 * 32
    assert trainer.epoch == 2  # the book's `for self.epoch in range(max_epochs)` leaves 2
    assert len(trainer.engine.history["train_loss"]) == 3
    # plotted as the book: 2 train points per epoch, 1 validation point per epoch
    assert len(model.board.data["train_loss"]) == 6
    assert [p.x for p in model.board.data["val_loss"]] == [1, 2, 3]


def test_trainer_clips_and_matches_a_plain_loop_in_float64():
    """The engine's step = the book's fit_epoch (SGD, clip 1) on the same batches."""

    class Data(d2l.DataModule):
        def __init__(self):
            super().__init__()
            self.batch_size = 4
            g = torch.Generator().manual_seed(1)
            self.X = torch.randn(12, 3, generator=g, dtype=torch.float64) * 5
            self.y = torch.randn(12, 1, generator=g, dtype=torch.float64) * 5

        def get_dataloader(self, train):
            return self.get_tensorloader((self.X, self.y), False)  # no shuffling

    def model():
        torch.manual_seed(0)
        m = LinearRegression(lr=0.1).double()
        m(torch.zeros(1, 3, dtype=torch.float64))
        return m

    data = Data()
    ours = model()
    d2l.Trainer(max_epochs=2, gradient_clip_val=1).fit(ours, data)
    ref = model()
    opt = torch.optim.SGD(ref.parameters(), 0.1)
    for _ in range(2):
        for X, y in data.train_dataloader():
            loss = ref.loss(ref(X), y)
            opt.zero_grad()
            loss.backward()
            d2l.Trainer(1).clip_gradients(1, ref)
            opt.step()
    for p, q in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_epochs": -1}, ValueError, "max_epochs must be a non-negative int, got -1"),
        ({"max_epochs": 1.5}, TypeError, r"max_epochs must be a non-negative int, got 1\.5 \(float\)"),
        ({"max_epochs": True}, TypeError, r"max_epochs must be a non-negative int, got True \(bool\)"),
        ({"max_epochs": 1, "num_gpus": -2}, ValueError, "num_gpus must be a non-negative int, got -2"),
        ({"max_epochs": 1, "num_gpus": "0"}, TypeError,
         r"num_gpus must be a non-negative int, got '0' \(str\)"),
        ({"max_epochs": 1, "gradient_clip_val": -1}, ValueError,
         "gradient_clip_val must be a finite number >= 0, got -1"),
        ({"max_epochs": 1, "gradient_clip_val": float("nan")}, ValueError,
         "gradient_clip_val must be a finite number >= 0, got nan"),
        ({"max_epochs": 1, "gradient_clip_val": "1"}, TypeError,
         r"gradient_clip_val must be a finite number >= 0, got '1' \(str\)"),
    ],
)  # fmt: skip
def test_trainer_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        d2l.Trainer(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"plot_train_per_epoch": 0}, ValueError,
         "plot_train_per_epoch must be a positive finite number, got 0"),
        ({"plot_train_per_epoch": "2"}, TypeError,
         r"plot_train_per_epoch must be a positive finite number, got '2' \(str\)"),
        ({"plot_valid_per_epoch": -1.0}, ValueError,
         r"plot_valid_per_epoch must be a positive finite number, got -1\.0"),
        ({"plot_valid_per_epoch": None}, TypeError,
         r"plot_valid_per_epoch must be a positive finite number, got None \(NoneType\)"),
    ],
)  # fmt: skip
def test_module_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        d2l.Module(**kwargs)


def test_fit_checks_model_and_data():
    with pytest.raises(TypeError, match=r"model must be a d2l\.Module, got Linear"):
        d2l.Trainer(1).fit(nn.Linear(1, 1), SyntheticRegressionData(torch.ones(2), 0.0))
    with pytest.raises(RuntimeError, match="needs a Trainer"):
        LinearRegression(0.1).plot("loss", 1.0, True)


def test_devices():
    assert d2l.cpu() == torch.device("cpu")
    assert d2l.gpu(1) == torch.device("cuda:1")
    assert d2l.try_gpu(10_000) == torch.device("cpu")
    assert d2l.num_gpus() == torch.cuda.device_count()
    assert len(d2l.try_all_gpus()) == d2l.num_gpus()
    with pytest.raises(ValueError, match=r"gpu\(i\): i must be a non-negative int, got -1"):
        d2l.gpu(-1)
    with pytest.raises(TypeError, match=r"gpu\(i\): i must be a non-negative int, got '0' \(str\)"):
        d2l.gpu("0")


def test_a_replaced_fit_epoch_runs_as_the_notebook_wrote_it():
    class MyTrainer(d2l.Trainer):
        pass

    calls = []

    @d2l.add_to_class(MyTrainer)
    def fit_epoch(self):
        calls.append(self.epoch)
        d2l.Trainer.fit_epoch(self)

    torch.manual_seed(0)
    data = SyntheticRegressionData(w=torch.tensor([2, -3.4]), b=4.2, num_train=64, num_val=32)
    trainer = MyTrainer(max_epochs=2, gradient_clip_val=1)
    trainer.fit(LinearRegression(lr=0.03), data)
    assert calls == [0, 1] and trainer.train_batch_idx == 4 and not hasattr(trainer, "engine")
