"""The book's data and models from outside chapters 9-11 that those chapters use (d2l 1.0).

``LinearRegression`` (section 3.5; 9.1 fits an autoregression with it) and ``FashionMNIST``
(section 4.2; 11.8 trains the vision Transformer on it).

``FashionMNIST`` reads the standard IDX files from ``root/FashionMNIST/raw`` (the folder
torchvision, and so the book, downloads them to), gzipped or not, without torchvision.
Without the files it downloads them there (no checksum is published in sha1; each file's
IDX header and size are checked); offline it raises one ``DatasetUnavailableError`` naming
the four files and the folder. Images become float tensors in [0, 1] of shape (1, H, W);
``resize`` is bilinear (antialiased) on the uint8 image, rounded back to uint8 as the
book's PIL-based ``transforms.Resize`` does, batch by batch in the loader (PIL's fixed-point
arithmetic differs: about one pixel in five is one grey level, 1/255, apart at 96x96) (so the data stays uint8 in memory and
no worker processes are needed).
"""

from __future__ import annotations

import numbers
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from attnkit._validate import positive_int
from attnkit.d2l.v1.base import DataModule, Module
from attnkit.data.hub import DatasetUnavailableError, fetch
from attnkit.data.idx import read_idx
from attnkit.i18n import _
from attnkit.training.optim import learning_rate

__all__ = ["FashionMNIST", "LinearRegression"]


class LinearRegression(Module):
    """``LazyLinear(1)``, MSE loss, SGD at ``lr``, as the book.

    The book fills the weight from N(0, 0.01) and the bias with 0 before the lazy layer
    exists, which does nothing: the first forward initialises it as ``nn.Linear`` does.
    Kept, so the same seed gives the book's weights.
    """

    def __init__(self, lr):
        super().__init__()
        learning_rate("lr", lr)
        self.save_hyperparameters()
        self.net = nn.LazyLinear(1)
        self.net.weight.data.normal_(0, 0.01)
        self.net.bias.data.fill_(0)

    def forward(self, X):
        """X (batch, features) -> (batch, 1)."""
        return self.net(X)

    def loss(self, y_hat, y):
        return F.mse_loss(y_hat, y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), self.lr)

    def get_w_b(self):
        return (self.net.weight.data, self.net.bias.data)


_FASHION_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
_FASHION_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "val": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_LABELS = ("t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
           "bag", "ankle boot")  # fmt: skip


def _size(name: str, size) -> tuple[int, int]:
    """``(height, width)`` of positive ints (a tuple or list of two; one int ``n`` is
    ``(n, n)``, what the book's ``transforms.Resize(n)`` makes of a square image);
    TypeError for another type, ValueError for another length or a size < 1."""
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        size = (size, size)
    if not isinstance(size, tuple | list):
        message = _("{name} must be (height, width) of positive ints, got {value!r} ({type})")
        raise TypeError(message.format(name=name, value=size, type=type(size).__name__))
    if len(size) != 2:
        message = _("{name} must be (height, width) of positive ints, got {value!r}")
        raise ValueError(message.format(name=name, value=size))
    return (positive_int(f"{name}[0]", size[0]), positive_int(f"{name}[1]", size[1]))


def _find_or_fetch(raw_dir: Path, stem: str) -> Path:
    """``raw_dir/stem`` or ``raw_dir/stem.gz``, downloading the ``.gz`` if neither is there."""
    for candidate in (raw_dir / stem, raw_dir / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    names = ", ".join(f"{s}.gz" for pair in _FASHION_FILES.values() for s in pair)
    hint = _("Put the four Fashion-MNIST files ({names}) in {folder} to use them offline.")
    hint = hint.format(names=names, folder=raw_dir)
    try:
        return fetch(_FASHION_URL + stem + ".gz", raw_dir / f"{stem}.gz", what=stem, hint=hint)
    except DatasetUnavailableError as error:
        message = _("Fashion-MNIST is not in {folder}: {hint}").format(folder=raw_dir, hint=hint)
        raise DatasetUnavailableError(message) from error


class FashionMNIST(DataModule):
    """``FashionMNIST(batch_size=64, resize=(28, 28))``: ``train``/``val`` are
    ``TensorDataset``s of uint8 images (N, 28, 28) and int64 labels (N,); batches are
    ``(X, y)`` with X float32 (batch, 1, *resize) in [0, 1]."""

    def __init__(self, batch_size=64, resize=(28, 28)):
        super().__init__()
        positive_int("batch_size", batch_size)
        resize = _size("resize", resize)
        self.save_hyperparameters()
        raw_dir = Path(self.root) / "FashionMNIST" / "raw"
        paths = {
            split: [_find_or_fetch(raw_dir, stem) for stem in stems]
            for split, stems in _FASHION_FILES.items()
        }  # every file is found (or fetched) before any is read
        self.train, self.val = (self._read(*paths[s]) for s in ("train", "val"))

    @staticmethod
    def _read(images_path: Path, labels_path: Path) -> torch.utils.data.TensorDataset:
        images, labels = read_idx(images_path), read_idx(labels_path)
        if images.dim() != 3 or labels.dim() != 1 or len(images) != len(labels):
            message = _(
                "{images} {images_shape} and {labels} {labels_shape} are not N images and N labels"
            )
            raise ValueError(
                message.format(
                    images=images_path.name,
                    images_shape=tuple(images.shape),
                    labels=labels_path.name,
                    labels_shape=tuple(labels.shape),
                )
            )
        return torch.utils.data.TensorDataset(images, labels.long())

    def _collate(self, items):
        images = torch.stack([image for image, _ in items])  # (B, 28, 28) uint8
        labels = torch.stack([label for _, label in items])  # (B,)
        X = images.unsqueeze(1).float()  # (B, 1, 28, 28)
        if tuple(X.shape[-2:]) != self.resize:
            X = F.interpolate(X, size=self.resize, mode="bilinear", antialias=True)
            X = X.round_().clamp_(0, 255)  # PIL resizes uint8 images to uint8
        return X / 255, labels

    def text_labels(self, indices):
        """The class names of label indices."""
        return [_LABELS[int(i)] for i in indices]

    def get_dataloader(self, train):
        data = self.train if train else self.val
        return torch.utils.data.DataLoader(
            data, self.batch_size, shuffle=train, collate_fn=self._collate
        )

    def visualize(self, batch, nrows=1, ncols=8, labels=()):
        """Show the first ``nrows * ncols`` images of a batch with their labels."""
        from matplotlib import pyplot as plt

        X, y = batch
        labels = list(labels) or self.text_labels(y)
        _, axes = plt.subplots(nrows, ncols, figsize=(1.5 * ncols, 1.5 * nrows), squeeze=False)
        for ax, image, label in zip(axes.flat, X.squeeze(1), labels):
            ax.imshow(image.numpy(), cmap="gray")
            ax.set_title(label)
            ax.axis("off")
        return axes
