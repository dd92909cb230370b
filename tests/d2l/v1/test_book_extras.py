"""d2l 1.0 names from outside chapters 9-11 that the chapters use: ``LinearRegression``
(9.1), ``FashionMNIST`` (11.8), ``Classifier.layer_summary``, and ``download``/``extract``
of an archive a reader already extracted (10.5's ``MTFraEng._download``)."""

from __future__ import annotations

import gzip
import struct

import pytest
import torch
from torch import nn

from attnkit.d2l import v1 as d2l
from attnkit.data.idx import IDXFormatError, read_idx

FASHION_STEMS = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")  # fmt: skip


def write_idx(path, values: torch.Tensor, gz: bool = True) -> None:
    header = struct.pack(">BBBB", 0, 0, 0x08, values.dim())
    header += struct.pack(f">{values.dim()}I", *values.shape)
    data = header + bytes(values.to(torch.uint8).flatten().tolist())
    path.write_bytes(gzip.compress(data) if gz else data)


@pytest.fixture
def fashion_root(tmp_path, monkeypatch):
    """root/FashionMNIST/raw with 12 training and 5 test images (test files not gzipped)."""
    raw = tmp_path / "data" / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    gen = torch.Generator().manual_seed(0)
    for prefix, n, gz in (("train", 12, True), ("t10k", 5, False)):
        images = torch.randint(0, 256, (n, 28, 28), generator=gen)
        suffix = ".gz" if gz else ""
        write_idx(raw / f"{prefix}-images-idx3-ubyte{suffix}", images, gz)
        write_idx(raw / f"{prefix}-labels-idx1-ubyte{suffix}", torch.arange(n) % 10, gz)
    monkeypatch.chdir(tmp_path / "data")
    monkeypatch.setattr(d2l.DataModule.__init__, "__defaults__", (str(tmp_path / "data"), 4))
    return raw


def test_read_idx_round_trip_and_errors(tmp_path):
    values = torch.arange(24).reshape(2, 3, 4)
    write_idx(tmp_path / "a.gz", values)
    assert torch.equal(read_idx(tmp_path / "a.gz"), values.to(torch.uint8))
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01" + b"\x00" * 8)
    with pytest.raises(IDXFormatError, match="not an IDX file"):
        read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(struct.pack(">BBBBI", 0, 0, 8, 1, 10) + b"\x00" * 3)
    with pytest.raises(IDXFormatError, match="needs 18 bytes, the file has 11"):
        read_idx(tmp_path / "short")
    (tmp_path / "int").write_bytes(struct.pack(">BBBBI", 0, 0, 0x0C, 1, 1) + b"\x00" * 4)
    with pytest.raises(IDXFormatError, match="only 0x08"):
        read_idx(tmp_path / "int")


def test_fashion_mnist_reads_the_idx_files(fashion_root):
    data = d2l.FashionMNIST(batch_size=4)
    assert len(data.train) == 12 and len(data.val) == 5
    X, y = next(iter(data.val_dataloader()))  # not shuffled: the first four images
    expected = read_idx(fashion_root / "t10k-images-idx3-ubyte")[:4].float().unsqueeze(1) / 255
    assert X.dtype == torch.float32 and X.shape == (4, 1, 28, 28)
    torch.testing.assert_close(X, expected, rtol=0, atol=0)
    assert y.tolist() == [0, 1, 2, 3]
    assert data.text_labels(y) == ["t-shirt", "trouser", "pullover", "dress"]


def test_fashion_mnist_resize_keeps_a_constant_image_constant(fashion_root):
    write_idx(fashion_root / "train-images-idx3-ubyte.gz", torch.full((12, 28, 28), 51))
    data = d2l.FashionMNIST(batch_size=12, resize=(96, 64))
    X, _ = next(iter(data.train_dataloader()))
    assert X.shape == (12, 1, 96, 64)
    torch.testing.assert_close(X, torch.full_like(X, 51 / 255))


def test_fashion_mnist_offline_without_files_names_the_four_files(tmp_path, monkeypatch):
    monkeypatch.setattr(d2l.DataModule.__init__, "__defaults__", (str(tmp_path / "data"), 4))
    with pytest.raises(d2l.DatasetUnavailableError) as info:
        d2l.FashionMNIST()
    message = str(info.value)
    assert str(tmp_path / "data" / "FashionMNIST" / "raw") in message
    assert all(f"{stem}.gz" in message for stem in FASHION_STEMS)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"batch_size": 0}, ValueError, "batch_size must be a positive int, got 0"),
        ({"batch_size": 2.5}, TypeError, r"batch_size must be a positive int, got 2\.5 \(float\)"),
        ({"resize": (96,)}, ValueError, r"resize must be \(height, width\) of positive ints, got \(96,\)"),
        ({"resize": "96"}, TypeError,
         r"resize must be \(height, width\) of positive ints, got '96' \(str\)"),
        ({"resize": (0, 28)}, ValueError, r"resize\[0\] must be a positive int, got 0"),
        ({"resize": (28, 28.0)}, TypeError, r"resize\[1\] must be a positive int, got 28\.0 \(float\)"),
    ],
)  # fmt: skip
def test_fashion_mnist_checks_its_arguments(fashion_root, kwargs, error, match):
    with pytest.raises(error, match=match):
        d2l.FashionMNIST(**kwargs)


def test_fashion_mnist_takes_one_int_as_a_square_resize(fashion_root):
    # the book's transforms.Resize(32) resizes the (square) images to 32 x 32
    data = d2l.FashionMNIST(batch_size=4, resize=32)
    assert data.resize == (32, 32)
    X, _ = next(iter(data.val_dataloader()))
    assert X.shape == (4, 1, 32, 32)


def test_linear_regression_as_the_book():
    X = torch.randn(8, 4)
    torch.manual_seed(0)
    model = d2l.LinearRegression(lr=0.03)
    assert model(X).shape == (8, 1)  # the lazy layer is now 1 x 4
    w, b = model.get_w_b()
    # As the book: its N(0, 0.01) / zero fill hits the lazy layer before it exists, so the
    # first forward initialises it as nn.Linear does (the same random draws as the book's).
    torch.manual_seed(0)
    reference = nn.Linear(4, 1)
    assert torch.equal(w, reference.weight.data) and torch.equal(b, reference.bias.data)
    y = torch.randn(8, 1)
    torch.testing.assert_close(model.loss(model(X), y), ((model(X) - y) ** 2).mean())
    optimizer = model.configure_optimizers()
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.defaults["lr"] == 0.03
    with pytest.raises(ValueError, match="lr must be a positive number, got 0"):
        d2l.LinearRegression(lr=0)
    with pytest.raises(TypeError, match=r"lr must be a positive number, got '0\.03' \(str\)"):
        d2l.LinearRegression(lr="0.03")


def test_linear_regression_fits_a_line():
    torch.manual_seed(0)
    X = torch.randn(256, 2)
    y = X @ torch.tensor([[2.0], [-3.4]]) + 4.2

    class Data(d2l.DataModule):
        def __init__(self):
            super().__init__()
            self.batch_size = 32

        def get_dataloader(self, train):
            return self.get_tensorloader((X, y), train)

    model = d2l.LinearRegression(lr=0.03)
    d2l.Trainer(max_epochs=20).fit(model, Data())
    w, b = model.get_w_b()
    torch.testing.assert_close(w, torch.tensor([[2.0, -3.4]]), atol=1e-3, rtol=0)
    torch.testing.assert_close(b, torch.tensor([4.2]), atol=1e-3, rtol=0)


def test_layer_summary_prints_each_layer(capsys):
    class Net(d2l.Classifier):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(12, 5), nn.ReLU())

    Net().layer_summary((2, 3, 4))
    assert capsys.readouterr().out.splitlines() == [
        "Flatten output shape:\t torch.Size([2, 12])",
        "Linear output shape:\t torch.Size([2, 5])",
        "ReLU output shape:\t torch.Size([2, 5])",
    ]
    with pytest.raises(TypeError, match="X_shape must be a tuple"):
        Net().layer_summary(12)


def test_download_of_an_extracted_archive_stays_offline(fra_root):
    path = d2l.download(
        d2l.DATA_URL + "fra-eng.zip", str(fra_root), "94646ad1522d915e7b0f9296181140edcf86a4f5"
    )
    assert path == str(fra_root / "fra-eng.zip")
    d2l.extract(path)  # already extracted: nothing to do, nothing removed
    assert (fra_root / "fra-eng" / "fra.txt").read_text(encoding="utf-8").startswith("Go.\tVa !")
    with pytest.raises(d2l.DatasetUnavailableError, match="Are you offline"):
        d2l.download(d2l.DATA_URL + "other.zip", str(fra_root))


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("fra-eng.zip",), ValueError, "url must be a URL string, got 'fra-eng.zip'"),
        ((None,), TypeError, r"url must be a URL string, got None \(NoneType\)"),
        ((d2l.DATA_URL + "a.zip", ".", "abc"), ValueError,
         "sha1_hash must be 40 hex digits or None, got 'abc'"),
        ((d2l.DATA_URL + "a.zip", ".", 123), TypeError,
         r"sha1_hash must be 40 hex digits or None, got 123 \(int\)"),
    ],
)  # fmt: skip
def test_download_checks_its_arguments(tmp_path, monkeypatch, args, error, match):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=match):
        d2l.download(*args)
