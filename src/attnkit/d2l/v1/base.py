"""The book's object-oriented base classes (d2l 1.0, chapters 3-6 and "Utility Functions").

``HyperParameters``, ``ProgressBoard``, ``Module``, ``DataModule``, ``Trainer``,
``Classifier``, ``add_to_class`` and the device helpers, with d2l 1.0.3's names and
signatures. ``Trainer.fit`` runs attnkit's one training engine
(:mod:`attnkit.training.engine`) through :class:`BookTask`: the loss is
``model.training_step(batch)``, the optimizer is ``model.configure_optimizers()``,
``gradient_clip_val`` is the engine's global-norm clip, and validation is
``model.validation_step`` on every validation batch after each epoch, as the book.

``ProgressBoard`` draws in Jupyter as the book's; elsewhere it only keeps the points
(tensors stay unsynchronised until read), and ``save(path)`` writes them as a PNG.
"""

from __future__ import annotations

import collections
import inspect

import torch
from torch import nn

from attnkit._validate import non_negative_int, non_negative_number, positive_int, positive_number
from attnkit.i18n import _
from attnkit.training.engine import Engine, EngineConfig, StepLoss, Task

__all__ = [
    "Classifier", "DataModule", "HyperParameters", "Module", "ProgressBoard", "Trainer",
    "add_to_class", "cpu", "gpu", "num_gpus", "try_all_gpus", "try_gpu",
]  # fmt: skip


def add_to_class(Class):
    """Decorator: ``@add_to_class(Cls)`` sets the decorated function as ``Cls.<name>``."""
    if not isinstance(Class, type):
        message = _("add_to_class needs a class, got {value!r} ({type})")
        raise TypeError(message.format(value=Class, type=type(Class).__name__))

    def wrapper(obj):
        if not callable(obj) and not isinstance(obj, property):
            message = _("add_to_class: expected a function, got {type}")
            raise TypeError(message.format(type=type(obj).__name__))
        setattr(Class, obj.__name__, obj)
        return obj  # the book returns None; returning obj changes nothing else

    return wrapper


class HyperParameters:
    """``save_hyperparameters(ignore=[])``: the caller's arguments become attributes."""

    def save_hyperparameters(self, ignore=()):
        frame = inspect.currentframe().f_back
        _, _, _, local_vars = inspect.getargvalues(frame)
        skip = {*ignore, "self"}
        self.hparams = {
            k: v for k, v in local_vars.items() if k not in skip and not k.startswith("_")
        }
        for k, v in self.hparams.items():
            setattr(self, k, v)


def _in_notebook() -> bool:
    from attnkit.d2l.utils import _in_notebook as in_notebook

    return in_notebook()


Point = collections.namedtuple("Point", ["x", "y"])


class ProgressBoard(HyperParameters):
    """Points averaged every ``every_n`` draws, one line per label (the book's board).

    In Jupyter (``display=True``) it redraws the figure on each averaged point, as the book.
    Headless it only keeps the points in ``data`` (a dict label -> list of ``Point``);
    tensor values are kept as they are and read only when ``data``/``save`` needs them.
    """

    def __init__(self, xlabel=None, ylabel=None, xlim=None, ylim=None, xscale="linear",
                 yscale="linear", ls=("-", "--", "-.", ":"), colors=("C0", "C1", "C2", "C3"),
                 fig=None, axes=None, figsize=(3.5, 2.5), display=True):  # fmt: skip
        self.save_hyperparameters()
        self.raw_points = collections.OrderedDict()
        self._lines = collections.OrderedDict()

    def draw(self, x, y, label, every_n=1):
        every_n = positive_int("every_n", every_n)
        if isinstance(y, torch.Tensor):
            y = y.detach()
        points = self.raw_points.setdefault(label, [])
        line = self._lines.setdefault(label, [])
        points.append((x, y))
        if len(points) < every_n:
            return
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        line.append((sum(xs) / len(xs), sum(ys) / len(ys)))  # tensors: no sync here
        points.clear()
        if self.display and _in_notebook():
            self._render(show=True)

    @property
    def data(self) -> dict[str, list[Point]]:
        """label -> averaged points (floats)."""
        return {k: [Point(float(x), float(y)) for x, y in v] for k, v in self._lines.items()}

    def _render(self, show=False):
        import matplotlib.pyplot as plt

        if self.fig is None:
            self.fig = plt.figure(figsize=self.figsize)
        axes = self.axes if self.axes else self.fig.gca()
        axes.cla()
        lines, labels = [], []
        for (k, v), ls, color in zip(self.data.items(), self.ls, self.colors):
            lines.append(axes.plot([p.x for p in v], [p.y for p in v], linestyle=ls,
                                   color=color)[0])  # fmt: skip
            labels.append(k)
        if self.xlim:
            axes.set_xlim(self.xlim)
        if self.ylim:
            axes.set_ylim(self.ylim)
        axes.set_xlabel(self.xlabel if self.xlabel else "x")
        axes.set_ylabel(self.ylabel)
        axes.set_xscale(self.xscale)
        axes.set_yscale(self.yscale)
        axes.legend(lines, labels)
        if show:
            from IPython import display

            display.display(self.fig)
            display.clear_output(wait=True)
        return self.fig

    def save(self, path):
        """Draw the points kept so far and write the figure (PNG) to ``path``."""
        fig = self._render()
        fig.savefig(path)
        return path


class Module(nn.Module, HyperParameters):
    """The base class of models: ``loss``, ``forward``, ``training_step``,
    ``validation_step``, ``configure_optimizers``, ``plot``, ``apply_init``."""

    def __init__(self, plot_train_per_epoch=2, plot_valid_per_epoch=1):
        super().__init__()
        positive_number("plot_train_per_epoch", plot_train_per_epoch)
        positive_number("plot_valid_per_epoch", plot_valid_per_epoch)
        self.save_hyperparameters()
        self.board = ProgressBoard()

    def loss(self, y_hat, y):
        raise NotImplementedError

    def forward(self, X):
        if not hasattr(self, "net"):
            message = _("{cls} has no self.net: define forward or set self.net")
            raise NotImplementedError(message.format(cls=type(self).__name__))
        return self.net(X)

    def plot(self, key, value, train):
        """One point on the board: x in epochs, averaged as the book's ``every_n``."""
        if not hasattr(self, "trainer"):
            raise RuntimeError(_("Module.plot needs a Trainer: call trainer.fit(model, data)"))
        self.board.xlabel = "epoch"
        t = self.trainer
        if train:
            x = t.train_batch_idx / t.num_train_batches
            n = t.num_train_batches / self.plot_train_per_epoch
        else:
            x = t.epoch + 1
            n = t.num_val_batches / self.plot_valid_per_epoch
        label = ("train_" if train else "val_") + key
        self.board.draw(x, value, label, every_n=max(int(n), 1))

    def training_step(self, batch):
        loss = self.loss(self(*batch[:-1]), batch[-1])
        self.plot("loss", loss, train=True)
        return loss

    def validation_step(self, batch):
        loss = self.loss(self(*batch[:-1]), batch[-1])
        self.plot("loss", loss, train=False)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)

    def apply_init(self, inputs, init=None):
        """Run one forward (materialises lazy layers), then ``self.net.apply(init)``."""
        self.forward(*inputs)
        if init is not None:
            self.net.apply(init)


class DataModule(HyperParameters):
    """The base class of data: ``train_dataloader``/``val_dataloader`` from ``get_dataloader``."""

    def __init__(self, root="../data", num_workers=4):
        self.save_hyperparameters()

    def get_dataloader(self, train):
        raise NotImplementedError

    def train_dataloader(self):
        return self.get_dataloader(train=True)

    def val_dataloader(self):
        return self.get_dataloader(train=False)

    def get_tensorloader(self, tensors, train, indices=slice(0, None)):
        """A DataLoader over ``tensors[i][indices]`` (shuffled when ``train``)."""
        tensors = tuple(a[indices] for a in tensors)
        dataset = torch.utils.data.TensorDataset(*tensors)
        return torch.utils.data.DataLoader(dataset, self.batch_size, shuffle=train)


class BookTask(Task):
    """The engine's adapter for the book's ``Trainer``: loss = ``model.training_step``."""

    name = "d2l-v1"

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    def batches(self, epoch, rank, world_size):
        self.trainer.epoch = epoch
        return self.trainer.train_dataloader

    def loss(self, ctx, batch, carry):
        t = self.trainer
        loss = t.model.training_step(t.prepare_batch(batch))
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            message = _("training_step must return a scalar tensor, got {got!r}")
            raise TypeError(message.format(got=getattr(loss, "shape", loss)))
        t.train_batch_idx += 1
        return StepLoss(loss_sum=loss, tokens=1, denominator=1)

    def evaluate(self, ctx):
        t = self.trainer
        if t.val_dataloader is None:
            return {}
        t.model.eval()
        for batch in t.val_dataloader:
            with torch.no_grad():
                t.model.validation_step(t.prepare_batch(batch))
            t.val_batch_idx += 1
        return {}


class Trainer(HyperParameters):
    """``Trainer(max_epochs, num_gpus=0, gradient_clip_val=0).fit(model, data)``.

    Runs attnkit's engine (see the module docstring); ``self.engine`` and its ``history``
    (mean training loss and speed per epoch) stay available after ``fit``.
    """

    def __init__(self, max_epochs, num_gpus=0, gradient_clip_val=0):
        non_negative_int("max_epochs", max_epochs)
        non_negative_int("num_gpus", num_gpus)
        non_negative_number("gradient_clip_val", gradient_clip_val)
        self.save_hyperparameters()
        self.gpus = [gpu(i) for i in range(min(num_gpus, num_gpus_available()))]

    def prepare_data(self, data):
        self.train_dataloader = data.train_dataloader()
        self.val_dataloader = data.val_dataloader()
        self.num_train_batches = len(self.train_dataloader)
        self.num_val_batches = len(self.val_dataloader) if self.val_dataloader is not None else 0
        if self.num_train_batches == 0:
            message = _("{cls}.train_dataloader() has no batches")
            raise ValueError(message.format(cls=type(data).__name__))

    def prepare_model(self, model):
        model.trainer = self
        model.board.xlim = [0, self.max_epochs]
        if self.gpus:
            model.to(self.gpus[0])
        self.model = model

    def fit(self, model, data):
        if not isinstance(model, Module):
            message = _("model must be a d2l.Module, got {type}")
            raise TypeError(message.format(type=type(model).__name__))
        if not isinstance(data, DataModule):
            message = _("data must be a d2l.DataModule, got {type}")
            raise TypeError(message.format(type=type(data).__name__))
        self.prepare_data(data)
        self.prepare_model(model)
        self.optim = model.configure_optimizers()
        self.epoch = 0
        self.train_batch_idx = 0
        self.val_batch_idx = 0
        if self.max_epochs == 0:
            return None
        if (type(self).fit_epoch, type(self).clip_gradients) != _BOOK_STEP:
            # a notebook replaced them (``@add_to_class(Trainer)``, a subclass): its loop runs
            for epoch in range(self.max_epochs):
                self.epoch = epoch
                self.fit_epoch()
            return None
        clip = float(self.gradient_clip_val) if self.gradient_clip_val > 0 else None
        device = str(self.gpus[0]) if self.gpus else "cpu"
        config = EngineConfig(  # no loss guard: a diverging run shows its NaN, as the book's
            epochs=int(self.max_epochs), clip=clip, seed=None, progress=False, log_every=0,
            device=device, max_nonfinite_steps=0, divergence_factor=0,
        )  # fmt: skip
        self.engine = Engine(model, BookTask(self), config, optimizer=self.optim)
        self.engine.fit()
        self.epoch = self.max_epochs - 1  # as the book's `for self.epoch in range(...)`
        return None

    def fit_epoch(self):
        """One epoch of the book's loop, step by step (``fit`` runs the engine instead,
        unless ``fit_epoch`` or ``clip_gradients`` were replaced)."""
        self.model.train()
        for batch in self.train_dataloader:
            loss = self.model.training_step(self.prepare_batch(batch))
            self.optim.zero_grad()
            with torch.no_grad():
                loss.backward()
                if self.gradient_clip_val > 0:
                    self.clip_gradients(self.gradient_clip_val, self.model)
                self.optim.step()
            self.train_batch_idx += 1
        if self.val_dataloader is None:
            return
        self.model.eval()
        for batch in self.val_dataloader:
            with torch.no_grad():
                self.model.validation_step(self.prepare_batch(batch))
            self.val_batch_idx += 1

    def prepare_batch(self, batch):
        if self.gpus:
            batch = [a.to(self.gpus[0]) for a in batch]
        return batch

    def clip_gradients(self, grad_clip_val, model):
        """The book's clipping: scale all gradients by ``grad_clip_val / norm`` when above."""
        params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
        norm = torch.sqrt(sum(torch.sum(p.grad**2) for p in params))
        if norm > grad_clip_val:
            for param in params:
                param.grad[:] *= grad_clip_val / norm


_BOOK_STEP = (Trainer.fit_epoch, Trainer.clip_gradients)  # what the engine's step stands for


class Classifier(Module):
    """Cross-entropy ``loss`` and ``accuracy``; validation plots both."""

    def validation_step(self, batch):
        Y_hat = self(*batch[:-1])
        self.plot("loss", self.loss(Y_hat, batch[-1]), train=False)
        self.plot("acc", self.accuracy(Y_hat, batch[-1]), train=False)

    def accuracy(self, Y_hat, Y, averaged=True):
        """Y_hat (..., C) logits, Y (...) labels: the fraction (or 0/1 per item) correct."""
        Y_hat = Y_hat.reshape(-1, Y_hat.shape[-1])
        preds = Y_hat.argmax(dim=1).type(Y.dtype)
        compare = (preds == Y.reshape(-1)).type(torch.float32)
        return compare.mean() if averaged else compare

    def loss(self, Y_hat, Y, averaged=True):
        """Cross-entropy of Y_hat (..., C) against Y (...), over every position."""
        Y_hat = Y_hat.reshape(-1, Y_hat.shape[-1])
        Y = Y.reshape(-1)
        return nn.functional.cross_entropy(Y_hat, Y, reduction="mean" if averaged else "none")

    def layer_summary(self, X_shape):
        """Print each layer of ``self.net`` with its output shape for a random ``X_shape`` input."""
        if not isinstance(X_shape, tuple | list | torch.Size):
            message = _("layer_summary: X_shape must be a tuple of ints, got {value!r}")
            raise TypeError(message.format(value=X_shape))
        if not hasattr(self, "net"):
            message = _("layer_summary needs self.net (a sequence of layers) on {model}")
            raise AttributeError(message.format(model=self))
        X = torch.randn(*X_shape)
        for layer in self.net:
            X = layer(X)
            # the book's own line, which d2l-zh prints in these words too (its LeNet section)
            print(layer.__class__.__name__, "output shape:\t", X.shape)


def cpu():
    return torch.device("cpu")


def gpu(i=0):
    return torch.device(f"cuda:{non_negative_int('gpu(i): i', i)}")


def num_gpus():
    return torch.cuda.device_count()


num_gpus_available = num_gpus


def try_gpu(i=0):
    """``gpu(i)`` if it exists, else ``cpu()``."""
    return gpu(i) if num_gpus() >= i + 1 else cpu()


def try_all_gpus():
    """Every GPU; the book's docstring promises ``[cpu()]`` without one but returns ``[]``."""
    return [gpu(i) for i in range(num_gpus())]
