"""The Transformer decoder's one-position step in inference, as plain tensor calls.

Shape legend: B batch, S source length, t positions decoded so far, D model width,
H heads, Dh = D / H, V vocabulary size.

Decoding calls the decoder once per generated position. At that size (B rows, one
position) a step's matrix products take a few hundred microseconds, and the modules'
own Python (about 45 module calls, their argument checks and branches: ~0.5 ms a step
measured on the 2-core test machine) took as long again: the last sentences of a batch,
decoded alone, cost mostly that. :func:`decoder_step` computes what
``TransformerDecoder.forward`` computes for one new position with a filled cache, from
the same parameters, in the same order of operations, without the module calls:

    x = Embed(y) * s + P[t]           s: sqrt(D), or 1 (scale_embedding)  (B, 1, D)
    per block:  x = AddNorm(x, SelfAttn(x; cache))     q, k, v: (B, H, 1, Dh)
                x = AddNorm(x, CrossAttn(x; encoder keys/values, source mask))
                x = AddNorm(x, W2 act(W1 x))    act: the FFN's activation (relu, gelu,
                                                gelu-tanh, silu), the function it names
    logits = Dense(FinalNorm(x))                                         (B, 1, V)

``TransformerDecoder.forward`` runs it only when :func:`applies` (eval mode, autograd
off, no attention being recorded, no forward hooks, the standard blocks and sublayers,
the caches filled by an earlier step); otherwise its modules run. The tests hold the
two equal for pre- and post-norm, with and without biases.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.attention.multihead import MultiHeadAttention
from attnkit.attention.positional import PositionalEncoding
from attnkit.attention.recording import recording
from attnkit.attention.row_map import attend_by_rows
from attnkit.attention.single_head import scaled_dot_product
from attnkit.models.activations import activation_function

__all__ = ["applies", "decoder_step"]

_hooks = nn.modules.module  # the global hook registries live in this module


def applies(decoder, X: Tensor, caches: list, standard: tuple) -> bool:
    """Whether :func:`decoder_step` computes this call: one position, inference (every
    module in eval mode), no hooks or recording, the standard sublayers (``standard``:
    the classes of the decoder block, its AddNorm and its FFN, and the embedding method
    of the token stack), every block's caches filled."""
    if X.shape[1] != 1 or decoder.training or torch.is_grad_enabled() or recording():
        return False
    if torch.is_autocast_enabled(X.device.type):  # the modules follow autocast's casts
        return False
    if _hooks._global_forward_hooks or _hooks._global_forward_pre_hooks:
        return False
    block_type, addnorm_type, ffn_type, embed = standard
    if (
        type(decoder.pos_encoding) is not PositionalEncoding
        or type(decoder.final_norm) not in (nn.LayerNorm, nn.Identity)
        or type(decoder)._embed is not embed  # a subclass's own embedding: the modules
    ):
        return False
    if len(caches[0]) + 1 > decoder.pos_encoding.max_len:
        return False  # the module path raises the error
    for blk, cache in zip(decoder.blks, caches, strict=True):
        if not _standard_block(blk, block_type, addnorm_type, ffn_type) or cache is None:
            return False
        if not (cache.self_attention.filled and cache.cross_attention.filled):
            return False
    return not _hooked_or_training(decoder)


def hooked(module: nn.Module) -> bool:
    """Whether a forward (pre-)hook would see a module's calls (a global one, or one on it or
    below it), or it trains: then a shortcut must not replace its modules' calls."""
    if _hooks._global_forward_hooks or _hooks._global_forward_pre_hooks:
        return True
    return _hooked_or_training(module)


def _hooked_or_training(module: nn.Module) -> bool:
    """Whether the module or one below it has a forward (pre-)hook or is in training mode
    (a plain recursion: ``modules()``' bookkeeping cost more than the rest of this check)."""
    if module.training or module._forward_hooks or module._forward_pre_hooks:
        return True
    return any(
        _hooked_or_training(child) for child in module._modules.values() if child is not None
    )


def _standard_block(blk, block_type: type, addnorm_type: type, ffn_type: type) -> bool:
    if type(blk) is not block_type or type(blk.ffn) is not ffn_type:
        return False
    if _activation_name(blk.ffn) is None:
        return False
    for attention in (blk.attention1, blk.attention2):
        if (
            type(attention) is not MultiHeadAttention
            or not attention.fused_qkv
            or attention.num_kv_heads != attention.num_heads
            or attention.rope is not None
            or attention.alibi is not None
            or attention.record_weights
        ):
            return False
    return all(
        type(a) is addnorm_type and type(a.ln) is nn.LayerNorm
        for a in (blk.addnorm1, blk.addnorm2, blk.addnorm3)
    )


def _activation_name(ffn) -> str | None:
    """The activation an FFN's module computes, as one of ``ACTIVATIONS``; None for a
    module of another kind (then the modules run)."""
    act = ffn.relu
    kind = type(act)
    if kind is nn.ReLU:
        return "relu"
    if kind is nn.SiLU:
        return "silu"
    if kind is nn.GELU:
        return {"none": "gelu", "tanh": "gelu-tanh"}.get(act.approximate)
    return None


def decoder_step(decoder, X: Tensor, enc_valid_mask: Tensor | None, caches: list) -> Tensor:
    """One position through the decoder (``applies`` must hold): X (B, 1) token ids,
    the source mask bool (B, 1, 1, S) or None, the blocks' caches (copies, updated in
    place: their self-attention gains this position) -> logits (B, 1, V)."""
    t = len(caches[0])
    table = decoder.pos_encoding.P[0]  # (N, D)
    x = decoder.embedding.forward(X) * decoder.embed_scale  # (B, 1, D)
    x = x + table[t : t + 1].unsqueeze(0).to(x.dtype)
    for blk, cache in zip(decoder.blks, caches, strict=True):
        x = _sublayer(blk.addnorm1, x, lambda h, b=blk, c=cache: _self_attention(b, h, c))
        x = _sublayer(
            blk.addnorm2, x, lambda h, b=blk, c=cache: _cross_attention(b, h, c, enc_valid_mask)
        )
        x = _sublayer(blk.addnorm3, x, lambda h, b=blk: _ffn(b.ffn, h))
    if isinstance(decoder.final_norm, nn.LayerNorm):
        x = _layer_norm(decoder.final_norm, x)
    return decoder.dense.forward(x)  # (B, 1, V)


def _sublayer(addnorm, x: Tensor, sublayer) -> Tensor:
    """AddNorm around a sublayer: pre-norm x + f(LN(x)); post-norm LN(f(x) + x)."""
    if addnorm.pre_norm:
        return x + sublayer(_layer_norm(addnorm.ln, x))
    return _layer_norm(addnorm.ln, sublayer(x) + x)


def _layer_norm(ln: nn.LayerNorm, x: Tensor) -> Tensor:
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


def _self_attention(blk, h: Tensor, cache) -> Tensor:
    """h (B, 1, D) -> (B, 1, D): the new position attends every position so far."""
    attention = blk.attention1
    B, H = h.shape[0], attention.num_heads
    qkv = attention.W_qkv.forward(h)  # (B, 1, 3D)
    q, k, v = qkv.view(B, 1, 3, H, -1).unbind(2)  # (B, 1, H, Dh) each
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, 1, Dh)
    keys, values = cache.self_attention.update(k, v)  # (B, H, t + 1, Dh)
    out = _attend(q, keys, values, None)  # (B, H, 1, Dh)
    return attention.W_o.forward(out.reshape(B, 1, attention.num_hiddens))


def _attend(q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
    """q (B, H, 1, Dh) over keys, values (B, H, K, Dh) in the cache's precision (q cast to
    it, the output back: ``KVCache`` dtype) -> (B, H, 1, Dh) in q's."""
    return scaled_dot_product(q.to(keys.dtype), keys, values, mask)[0].to(q.dtype)


def _cross_attention(blk, h: Tensor, cache, mask: Tensor | None) -> Tensor:
    """h (B, 1, D) -> (B, 1, D): attention over the encoder's cached keys and values."""
    attention = blk.attention2
    B, D = h.shape[0], attention.num_hiddens
    W = attention.W_qkv
    if hasattr(W, "first_rows"):  # an Int8Linear: the int8 product of the first D rows
        q = W.first_rows(D).forward(h)  # (B, 1, D)
    else:
        q = F.linear(h, W.weight[:D], None if W.bias is None else W.bias[:D])  # (B, 1, D)
    q = q.view(B, 1, attention.num_heads, -1).transpose(1, 2)  # (B, H, 1, Dh)
    cross = cache.cross_attention
    keys, values = cross.keys, cross.values  # (B, H, S, Dh), or (B_src, ...) with a row map
    if cross.row_map is not None:  # beams sharing their sentence's memory rows
        out = attend_by_rows(q.to(keys.dtype), keys, values, cross.row_map, mask).to(q.dtype)
    else:
        out = _attend(q, keys, values, mask)  # (B, H, 1, Dh)
    return attention.W_o.forward(out.reshape(B, 1, D))


def _ffn(ffn, h: Tensor) -> Tensor:
    """h (B, 1, D) -> (B, 1, D): W2 act(W1 h), act the function the FFN's module computes."""
    act = activation_function(_activation_name(ffn))
    return ffn.dense2.forward(act(ffn.dense1.forward(h)))
