"""The book's tensor shortcuts (the last block of each edition's ``d2l/torch.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from attnkit import d2l
from attnkit.d2l import v1
from attnkit.d2l.tensor_shortcuts import NAMES_0_17, NAMES_1_0

# The names each published package defines, copied from its d2l/torch.py (0.17.6, 1.0.3).
BOOK_0_17 = {"ones", "zeros", "tensor", "arange", "meshgrid", "sin", "sinh", "cos", "cosh",
             "tanh", "linspace", "exp", "log", "normal", "rand", "matmul", "int32", "float32",
             "concat", "stack", "abs", "eye", "numpy", "size", "reshape", "to", "reduce_sum",
             "argmax", "astype", "transpose"}  # fmt: skip
BOOK_1_0 = BOOK_0_17 | {"ones_like", "zeros_like", "randn", "int64", "sigmoid", "batch_matmul",
                        "reduce_mean", "expand_dims", "swapaxes", "repeat"}  # fmt: skip
TORCH_ALIASES = {"concat": torch.cat, "batch_matmul": torch.bmm}
METHODS = {"numpy", "size", "reshape", "to", "reduce_sum", "reduce_mean", "argmax", "astype",
           "transpose", "expand_dims", "swapaxes", "repeat"}  # fmt: skip


def test_each_edition_exports_exactly_its_books_names():
    assert set(NAMES_0_17) == BOOK_0_17 and len(NAMES_0_17) == 30
    assert set(NAMES_1_0) == BOOK_1_0 and len(NAMES_1_0) == 40
    assert all(hasattr(d2l, name) and name in d2l.__all__ for name in BOOK_0_17)
    assert all(hasattr(v1, name) and name in v1.__all__ for name in BOOK_1_0)
    assert not hasattr(d2l, "reduce_mean")  # a 1.0 name, not in 0.17's block


@pytest.mark.parametrize("name", sorted(BOOK_1_0 - METHODS))
def test_function_shortcuts_are_torchs_own(name):
    target = TORCH_ALIASES[name] if name in TORCH_ALIASES else getattr(torch, name)
    assert getattr(v1, name) is target


X = torch.arange(6.0).reshape(2, 3)
METHOD_CASES = [
    ("numpy", (), np.arange(6.0).reshape(2, 3)),
    ("size", (), 6),
    ("reshape", ((3, 2),), X.reshape(3, 2)),
    ("to", (torch.float64,), X.double()),
    ("reduce_sum", (), torch.tensor(15.0)),
    ("reduce_sum", (1,), torch.tensor([3.0, 12.0])),
    ("reduce_mean", (0,), torch.tensor([1.5, 2.5, 3.5])),
    ("argmax", (), torch.tensor(5)),
    ("astype", (torch.int32,), X.int()),
    ("transpose", (), X.t()),
    ("expand_dims", (0,), X[None]),
    ("swapaxes", (0, 1), X.t()),
    ("repeat", (1, 2), torch.cat([X, X], 1)),
]


@pytest.mark.parametrize(("name", "args", "expected"), METHOD_CASES)
def test_method_shortcuts_give_the_methods_values(name, args, expected):
    got = getattr(v1, name)(X, *args)
    if isinstance(expected, np.ndarray):
        np.testing.assert_array_equal(got, expected)
    elif isinstance(expected, torch.Tensor):
        assert got.dtype == expected.dtype and torch.equal(got, expected)
    else:
        assert got == expected


def test_numpy_detaches_as_the_book():
    w = nn.Parameter(torch.ones(2))
    np.testing.assert_array_equal(d2l.numpy(w * 2), np.array([2.0, 2.0], dtype=np.float32))


@pytest.mark.parametrize("name", ["reshape", "reduce_sum", "size", "numpy", "astype"])
def test_a_non_tensor_is_a_type_error_naming_the_shortcut(name):
    with pytest.raises(TypeError, match=rf"d2l\.{name}: x must be a torch\.Tensor.*got list"):
        getattr(d2l, name)([1.0, 2.0], 2) if name == "reshape" else getattr(d2l, name)([1.0])


def test_torch_errors_pass_through_unchanged():
    with pytest.raises(RuntimeError, match="shape '\\[4\\]' is invalid"):
        d2l.reshape(X, (4,))
