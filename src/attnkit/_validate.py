"""The argument checks of every public boundary, written once.

Each check returns the value (normalized: ``int``/``float``) or raises, naming the
argument, what came and what was expected:

- ``TypeError`` when the value has the wrong type (a str where a number belongs, a
  ``bool`` where an int belongs: ``True`` is an int to Python, never to us);
- ``ValueError`` when the type is right and the value is not (0 where >= 1 belongs,
  ``nan``, a name outside the choices).

``name`` is how the caller spells the argument (``"num_heads"``,
``"TrainConfig.batch_tokens"``). Numpy integers and floats are accepted as ints and
floats.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

from attnkit.i18n import N_, _

__all__ = [
    "boolean",
    "check_qkv",
    "index",
    "integer",
    "non_negative_int",
    "non_negative_number",
    "one_of",
    "optional",
    "output_rows",
    "positive_int",
    "positive_number",
    "probability",
    "real",
    "source_batch",
]


def _type_name(value: object) -> str:
    return type(value).__name__


def integer(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` as an int in ``[minimum, maximum]`` (either bound may be None)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _wrong_type(name, _int_range(minimum, maximum), value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _wrong_value(name, _int_range(minimum, maximum), value)
    return int(value)


def _wrong_type(name: str, expected: str, value: object) -> TypeError:
    message = _("{name} must be {expected}, got {value!r} ({type})")
    return TypeError(
        message.format(name=name, expected=expected, value=value, type=_type_name(value))
    )


def _wrong_value(name: str, expected: str, value: object) -> ValueError:
    message = _("{name} must be {expected}, got {value!r}")
    return ValueError(message.format(name=name, expected=expected, value=value))


def _int_range(minimum: int | None, maximum: int | None) -> str:
    """The requirement in words, in the language in force (built only for an error)."""
    if minimum == 1 and maximum is None:
        return _("a positive int")
    if minimum == 0 and maximum is None:
        return _("a non-negative int")
    if minimum is not None and maximum is not None:
        return _("an int in [{minimum}, {maximum}]").format(minimum=minimum, maximum=maximum)
    if minimum is not None:
        return _("an int >= {minimum}").format(minimum=minimum)
    if maximum is not None:
        return _("an int <= {maximum}").format(maximum=maximum)
    return _("an int")


def positive_int(name: str, value: object) -> int:
    """``value`` as an int >= 1 (numpy ints too, never bool)."""
    return integer(name, value, minimum=1)


def non_negative_int(name: str, value: object) -> int:
    """``value`` as an int >= 0."""
    return integer(name, value, minimum=0)


def index(name: str, value: object, size: int) -> int:
    """``value`` as an int in ``[0, size)``: a position among ``size`` (a rank among
    ``world_size`` processes)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _wrong_type(name, _("an int in [0, {size})").format(size=size), value)
    if not 0 <= value < size:
        raise _wrong_value(name, _("an int in [0, {size})").format(size=size), value)
    return int(value)


def real(
    name: str,
    value: object,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
    at_most: float | None = None,
    expected: str | None = None,
) -> float:
    """``value`` as a finite float, strictly ``above``/``below`` or inclusively
    ``at_least``/``at_most`` the given bounds. ``expected`` words the requirement in
    messages (default: built from the bounds; a caller's English marked with ``N_`` is
    shown in the language in force)."""
    bounds = (above, at_least, below, at_most)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _wrong_type(name, _real_range(expected, *bounds), value)
    x = float(value)
    if (
        not math.isfinite(x)
        or (above is not None and not x > above)
        or (at_least is not None and not x >= at_least)
        or (below is not None and not x < below)
        or (at_most is not None and not x <= at_most)
    ):
        raise _wrong_value(name, _real_range(expected, *bounds), value)
    return x


def _real_range(expected: str | None, above, at_least, below, at_most) -> str:
    """``real``'s requirement in words, in the language in force (built only for an error)."""
    if expected is not None:
        return _(expected)
    parts = [f"> {above:g}" if above is not None else None]
    parts += [f">= {at_least:g}" if at_least is not None else None]
    parts += [f"< {below:g}" if below is not None else None]
    parts += [f"<= {at_most:g}" if at_most is not None else None]
    bounds = ""
    for part in filter(None, parts):
        bounds = _("{first} and {second}").format(first=bounds, second=part) if bounds else part
    return _("a finite number {bounds}").format(bounds=bounds) if bounds else _("a finite number")


def positive_number(name: str, value: object) -> float:
    """``value`` as a finite float > 0."""
    return real(name, value, above=0.0, expected=N_("a positive finite number"))


def non_negative_number(name: str, value: object) -> float:
    """``value`` as a finite float >= 0."""
    return real(name, value, at_least=0.0, expected=N_("a finite number >= 0"))


def probability(name: str, value: object) -> float:
    """``value`` as a float if it is a dropout probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _wrong_type(name, _("a float in [0, 1)"), value)
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(
            _("{name} must be in [0, 1), got {value!r}").format(name=name, value=value)
        )
    return float(value)


def boolean(name: str, value: object) -> bool:
    """``value`` if it is a bool (not 0/1, not a string)."""
    if not isinstance(value, bool):
        raise _wrong_type(name, _("a bool"), value)
    return value


def one_of(name: str, value: object, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices`` (ValueError listing them otherwise)."""
    choices = tuple(choices)
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        message = _("{name} must be one of {listed}, got {value!r}")
        raise ValueError(message.format(name=name, listed=listed, value=value))
    return value


def optional(check, name: str, value: object, *args: Any, **kwargs: Any) -> Any:
    """``None``, or ``check(name, value, ...)``: ``optional(positive_int, "beam", beam)``."""
    return None if value is None else check(name, value, *args, **kwargs)


def check_qkv(queries: Any, keys: Any, values: Any, *, same_width: bool) -> None:
    """The shapes every attention layer takes, checked in one place.

    queries (B, Q, Dq), keys (B, K, Dk), values (B, K, Dv): floating 3-D tensors with one
    batch size and as many keys as values; ``same_width``: dot-product scoring also needs
    Dq == Dk.
    """
    import torch  # attnkit._validate stays importable without torch's cost

    for arg, t in (("queries", queries), ("keys", keys), ("values", values)):
        if not isinstance(t, torch.Tensor):
            message = _("{arg} must be a torch.Tensor, got {type}")
            raise TypeError(message.format(arg=arg, type=_type_name(t)))
        if t.dim() != 3:
            message = _("{arg} must be 3-D (B, T, D), got shape {shape}")
            raise ValueError(message.format(arg=arg, shape=tuple(t.shape)))
        if not t.is_floating_point():
            message = _("{arg} must be a floating-point tensor, got {dtype}")
            raise TypeError(message.format(arg=arg, dtype=t.dtype))
    if not queries.shape[0] == keys.shape[0] == values.shape[0]:
        message = _("queries, keys and values must share the batch size, got {q}, {k} and {v}")
        raise ValueError(message.format(q=queries.shape[0], k=keys.shape[0], v=values.shape[0]))
    if keys.shape[1] != values.shape[1]:
        message = _("keys and values must have the same length K, got {k} and {v}")
        raise ValueError(message.format(k=keys.shape[1], v=values.shape[1]))
    if same_width and queries.shape[-1] != keys.shape[-1]:
        message = _(
            "dot-product attention needs queries and keys of the same width D, got "
            "queries (..., {q}) and keys (..., {k})"
        )
        raise ValueError(message.format(q=queries.shape[-1], k=keys.shape[-1]))


def token_ids(name: str, value: Any) -> Any:
    """``value`` (a tensor or a list of ints) as a 1-D int64 tensor of token ids (N,);
    floats, booleans and other shapes are a TypeError (never truncated or misread)."""
    import torch

    ids = torch.as_tensor(value)
    if ids.dim() != 1 or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        message = _(
            "{name} must be token ids, a 1-D integer tensor (N,), got {dtype} of shape {shape}"
        )
        raise TypeError(message.format(name=name, dtype=ids.dtype, shape=tuple(ids.shape)))
    return ids.long()


def source_batch(src: Any, src_len: Any) -> None:
    """Raise unless ``src`` is a (B, S) long tensor of source ids and ``src_len`` a (B,)
    tensor of their lengths (decoding's and a shortlist's input)."""
    import torch

    if not isinstance(src, torch.Tensor):
        message = _("src must be a (B, S) long tensor, got {type}")
        raise TypeError(message.format(type=type(src).__name__))
    if src.dim() != 2:
        message = _("src must be a (B, S) long tensor, got shape {shape}")
        raise ValueError(message.format(shape=tuple(src.shape)))
    if src.dtype != torch.long:
        message = _("src must be a (B, S) long tensor, got dtype {dtype}")
        raise TypeError(message.format(dtype=src.dtype))
    if not isinstance(src_len, torch.Tensor):
        message = _("src_len must be a (B,) tensor, got {type}")
        raise TypeError(message.format(type=type(src_len).__name__))
    if tuple(src_len.shape) != (src.shape[0],):
        message = _("src_len must have shape (B,) = ({batch},), got {shape}")
        raise ValueError(message.format(batch=src.shape[0], shape=tuple(src_len.shape)))


def output_rows(ids: Any, size: int) -> None:
    """Raise unless ``ids`` is a (K,) long tensor of rows in [0, ``size``) (the output rows
    a vocabulary shortlist keeps)."""
    import torch

    what = (
        _type_name(ids) if not isinstance(ids, torch.Tensor)
        else tuple(ids.shape) if ids.dim() != 1
        else ids.dtype if ids.dtype != torch.long
        else None
    )  # fmt: skip
    if what is not None:
        raise TypeError(_("ids must be a (K,) long tensor, got {what}").format(what=what))
    if ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < size:
        message = _("ids must be output rows in [0, {rows}), got ids in [{lo}, {hi}]")
        raise ValueError(message.format(rows=size, lo=int(ids.min()), hi=int(ids.max())))
