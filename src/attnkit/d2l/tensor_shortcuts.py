"""The book's tensor shortcuts: ``d2l.zeros``, ``d2l.reshape``, ``d2l.reduce_sum``...

The book writes its framework-neutral cells with these names; its library defines them at
the end of ``d2l/torch.py`` (0.17.6: 30 names, 1.0.3: 40). Each is the torch function
itself or the tensor method it calls, so results and errors are torch's. One improvement:
calling a method shortcut on something that lacks the method (``d2l.reshape([1, 2], ...)``)
is a ``TypeError`` naming the shortcut and the type received, where the book raises a bare
``AttributeError`` from its lambda.

:data:`NAMES_0_17` and :data:`NAMES_1_0` list each edition's names exactly as its
``d2l/torch.py`` defines them; ``attnkit.d2l`` exports the first, ``attnkit.d2l.v1`` the second.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attnkit.i18n import _

__all__ = ["NAMES_0_17", "NAMES_1_0"]

# The 0.17.6 block, in its order.
NAMES_0_17 = (
    "ones", "zeros", "tensor", "arange", "meshgrid", "sin", "sinh", "cos", "cosh", "tanh",
    "linspace", "exp", "log", "normal", "rand", "matmul", "int32", "float32", "concat",
    "stack", "abs", "eye", "numpy", "size", "reshape", "to", "reduce_sum", "argmax", "astype",
    "transpose",
)  # fmt: skip
# The 1.0.3 block: the 0.17 names and ten more.
NAMES_1_0 = (*NAMES_0_17, "ones_like", "zeros_like", "randn", "int64", "sigmoid",
             "batch_matmul", "reduce_mean", "expand_dims", "swapaxes", "repeat")  # fmt: skip

ones, zeros, ones_like, zeros_like = torch.ones, torch.zeros, torch.ones_like, torch.zeros_like
tensor, arange, meshgrid, linspace = torch.tensor, torch.arange, torch.meshgrid, torch.linspace
sin, sinh, cos, cosh, tanh = torch.sin, torch.sinh, torch.cos, torch.cosh, torch.tanh
exp, log, normal, rand, randn = torch.exp, torch.log, torch.normal, torch.rand, torch.randn
matmul, concat, stack, abs, eye = torch.matmul, torch.cat, torch.stack, torch.abs, torch.eye
sigmoid, batch_matmul = torch.sigmoid, torch.bmm
int32, int64, float32 = torch.int32, torch.int64, torch.float32


def _method_shortcut(name: str, method: str, what: str) -> Callable:
    """``name(x, *args, **kwargs)`` -> ``x.<method>(*args, **kwargs)``, as the book's lambda."""

    def shortcut(x, *args, **kwargs):
        bound = getattr(x, method, None)
        if bound is None:
            message = _("d2l.{name}: x must be a torch.Tensor (it calls x.{method}()), got {type}")
            raise TypeError(message.format(name=name, method=method, type=type(x).__name__))
        return bound(*args, **kwargs)

    shortcut.__name__ = shortcut.__qualname__ = name
    shortcut.__doc__ = f"``x.{method}(*args, **kwargs)``: {what}."
    return shortcut


size = _method_shortcut("size", "numel", "the number of elements")
reshape = _method_shortcut("reshape", "reshape", "x with a new shape")
to = _method_shortcut("to", "to", "x on another device or dtype")
reduce_sum = _method_shortcut("reduce_sum", "sum", "the sum (over all elements, or an axis)")
reduce_mean = _method_shortcut("reduce_mean", "mean", "the mean (over all elements, or an axis)")
argmax = _method_shortcut("argmax", "argmax", "the index of the largest element")
astype = _method_shortcut("astype", "type", "x converted to a dtype")
transpose = _method_shortcut("transpose", "t", "the transpose of a matrix")
expand_dims = _method_shortcut("expand_dims", "unsqueeze", "x with a new axis of size 1")
swapaxes = _method_shortcut("swapaxes", "swapaxes", "x with two axes swapped")
repeat = _method_shortcut("repeat", "repeat", "x tiled along each axis")


def numpy(x, *args, **kwargs):
    """``x.detach().numpy()``: a tensor's values as a NumPy array (CPU tensors)."""
    if not isinstance(x, torch.Tensor):
        message = _("d2l.numpy: x must be a torch.Tensor, got {type}")
        raise TypeError(message.format(type=type(x).__name__))
    return x.detach().numpy(*args, **kwargs)
