"""Multi-head attention whose input widths are learned at the first call.

``LazyMultiHeadAttention(num_hiddens, num_heads, dropout, bias)`` is ``MultiHeadAttention``
built from ``nn.LazyLinear`` projections, as PyTorch's lazy modules: no parameter exists
before the first forward, which reads the widths of its queries, keys and values and
creates W_q, W_k, W_v and W_o in the order it uses them (so a seeded model draws its
initial weights in call order). After that call, inputs of other widths are refused as
``MultiHeadAttention`` refuses them. A state dict loads into a module not yet called (the
shapes come from it). Everything else (masks, caches, fused kernels, recorded weights) is
``MultiHeadAttention``'s.

The three input projections stay separate (``fused_qkv=False``): a fused (3D, D_in)
weight could not be sliced before it exists. State dicts of the fused layout still load.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.parameter import is_lazy

from attnkit.attention.multihead import MultiHeadAttention

__all__ = ["LazyMultiHeadAttention"]

_WIDTHS = (("query_size", "W_q"), ("key_size", "W_k"), ("value_size", "W_v"))


class LazyMultiHeadAttention(MultiHeadAttention):
    """``MultiHeadAttention`` with ``nn.LazyLinear`` projections (input widths learned at the
    first call). ``query_size``, ``key_size`` and ``value_size`` are None until then."""

    def __init__(
        self,
        num_hiddens: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = False,
        *,
        record_weights: bool = False,
        skip_key_padding: bool = False,
    ) -> None:
        super().__init__(
            num_hiddens, num_heads, dropout, bias, record_weights=record_weights,
            fused_qkv=False, skip_key_padding=skip_key_padding,
        )  # fmt: skip
        self.query_size = self.key_size = self.value_size = None  # learned at the first call

    def _projection_layer(self, in_features: int, out_features: int, bias: bool) -> nn.Module:
        return nn.LazyLinear(out_features, bias=bias)

    def forward(self, queries, keys=None, values=None, *args, **kwargs):
        """``MultiHeadAttention.forward``; the first call sets the input widths."""
        self._learn_widths(queries, keys, values)
        return super().forward(queries, keys, values, *args, **kwargs)

    def _learn_widths(self, queries, keys, values) -> None:
        """Each input width: its projection's, once it exists; else the input's own."""
        keys_in = queries if keys is None else keys
        inputs = (queries, keys_in, keys_in if values is None else values)
        for (attr, layer_name), X in zip(_WIDTHS, inputs, strict=True):
            layer = getattr(self, layer_name)
            if not is_lazy(layer.weight):  # (in_features stays 0 after a state dict loads)
                setattr(self, attr, layer.weight.shape[1])
            elif isinstance(X, Tensor) and X.dim() > 0:
                setattr(self, attr, X.shape[-1])
