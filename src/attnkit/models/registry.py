"""Model registry: build any encoder-decoder from an architecture name and a config dict.

Each architecture registers a builder and a default config (a frozen dataclass that
validates itself in ``__post_init__``)::

    register_arch("transformer", build_transformer, TransformerConfig())
    model = build_model("transformer", {"num_layers": 2}, src_vocab_size, tgt_vocab_size)

The CLI and checkpoints only ever go through here, so a newly registered
architecture works with ``attnkit translate train --arch NAME`` at once.

Language models (``attnkit lm``) have archs of their own, each a config dataclass that
builds its model (``config.build(vocab_size)``) and is recorded in its checkpoints:
``LM_ARCHS = {"rnn": LMConfig, "transformer": DecoderLMConfig}`` (``lm_config``,
``lm_arch``). A checkpoint without an "arch" is an RNN's. The named recipes that use these
configs live in ``attnkit.training.recipes``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from attnkit._validate import boolean, one_of, positive_int, probability
from attnkit.i18n import N_, _
from attnkit.models.decoder_lm import DecoderLMConfig
from attnkit.models.rnn import RNNLM, build_lm
from attnkit.models.seq2seq import (
    EncoderDecoder,
    Seq2SeqAttentionDecoder,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
)

__all__ = [
    "LM_ARCHS",
    "LM_CELLS",
    "LMConfig",
    "Seq2SeqConfig",
    "arch_config",
    "available_archs",
    "build_model",
    "lm_arch",
    "lm_config",
    "lm_model_keys",
    "parse_config_overrides",
    "register_arch",
]

Builder = Callable[[Any, int, int], EncoderDecoder]


@dataclass(frozen=True)
class _Arch:
    builder: Builder
    default_config: Any


_ARCHS: dict[str, _Arch] = {}


def register_arch(name: str, builder: Builder, default_config: Any) -> None:
    """Register ``builder(config, src_vocab_size, tgt_vocab_size) -> EncoderDecoder``.

    ``default_config`` is a dataclass instance; ``build_model`` overrides its fields
    with ``dataclasses.replace`` (so its ``__post_init__`` validates the result).
    Registering a name again replaces the previous entry.
    """
    if not isinstance(name, str):
        message = _("name must be a non-empty str, got {name!r} ({type})")
        raise TypeError(message.format(name=name, type=type(name).__name__))
    if not name:
        raise ValueError(_("name must be a non-empty str, got {name!r}").format(name=name))
    if not callable(builder):
        message = _("builder must be callable, got {type}")
        raise TypeError(message.format(type=type(builder).__name__))
    if not dataclasses.is_dataclass(default_config) or isinstance(default_config, type):
        message = _("default_config must be a dataclass instance, got {type}")
        raise TypeError(message.format(type=type(default_config).__name__))
    _ARCHS[name] = _Arch(builder, default_config)


def available_archs() -> list[str]:
    """Registered architecture names, sorted."""
    return sorted(_ARCHS)


def _get(arch: str) -> _Arch:
    if arch not in _ARCHS:
        message = _("unknown arch {arch!r}; expected one of {archs}")
        raise ValueError(message.format(arch=arch, archs=available_archs()))
    return _ARCHS[arch]


def arch_config(arch: str, config: Mapping[str, Any] | None = None) -> Any:
    """The validated config dataclass of ``arch``: its defaults overridden by ``config``."""
    default = _get(arch).default_config
    config = dict(config or {})
    fields = {f.name for f in dataclasses.fields(default)}
    unknown = sorted(set(config) - fields)
    if unknown:
        message = _("unknown config key(s) {unknown} for arch {arch!r}; expected some of {fields}")
        raise ValueError(message.format(unknown=unknown, arch=arch, fields=sorted(fields)))
    return dataclasses.replace(default, **config)


def build_model(
    arch: str, config: Mapping[str, Any] | None, src_vocab_size: int, tgt_vocab_size: int
) -> EncoderDecoder:
    """Build ``arch`` with ``config`` (a dict of overrides, or the config dataclass)."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    src_vocab_size = positive_int("src_vocab_size", src_vocab_size)
    tgt_vocab_size = positive_int("tgt_vocab_size", tgt_vocab_size)
    cfg = arch_config(arch, config)
    model = _get(arch).builder(cfg, src_vocab_size, tgt_vocab_size)
    if not isinstance(model, EncoderDecoder):
        message = _("builder of {arch!r} returned {type}, not EncoderDecoder")
        raise TypeError(message.format(arch=arch, type=type(model).__name__))
    return model


def parse_config_overrides(arch: str, items: list[str] | None) -> dict[str, Any]:
    """``["num_layers=2", "dropout=0.1"]`` -> typed dict, types taken from the arch's config."""
    default = _get(arch).default_config
    hints = typing.get_type_hints(type(default))
    fields = {f.name for f in dataclasses.fields(default)}
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            message = _("model config override must look like KEY=VALUE, got {item!r}")
            raise ValueError(message.format(item=item))
        if key not in fields:
            message = _("unknown config key {key!r} for arch {arch!r}; expected one of {fields}")
            raise ValueError(message.format(key=key, arch=arch, fields=sorted(fields)))
        typ = hints.get(key, str)
        try:
            if typ is bool:
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(raw)
                out[key] = raw.lower() in ("true", "1")
            elif typ in (int, float, str):
                out[key] = typ(raw)
            else:
                out[key] = raw
        except ValueError:
            message = _("model config {key}={raw!r}: expected a {expected}")
            raise ValueError(
                message.format(key=key, raw=raw, expected=getattr(typ, "__name__", typ))
            ) from None
    return out


# ----------------------------------------------------------------------------- built-in archs


@dataclass(frozen=True)
class Seq2SeqConfig:
    """GRU encoder-decoder sizes (the book's defaults for chapter 9-10 runs)."""

    embed_size: int = 32
    num_hiddens: int = 32
    num_layers: int = 2
    dropout: float = 0.1

    def __post_init__(self) -> None:
        name = type(self).__name__
        for field_name in ("embed_size", "num_hiddens", "num_layers"):
            value = positive_int(f"{name}.{field_name}", getattr(self, field_name))
            object.__setattr__(self, field_name, value)  # numpy ints become ints (JSON)
        probability(f"{name}.dropout", self.dropout)


def _build_seq2seq(cfg: Seq2SeqConfig, src_vocab_size: int, tgt_vocab_size: int):
    args = (cfg.embed_size, cfg.num_hiddens, cfg.num_layers, cfg.dropout)
    return EncoderDecoder(
        Seq2SeqEncoder(src_vocab_size, *args), Seq2SeqDecoder(tgt_vocab_size, *args)
    )


def _build_bahdanau(cfg: Seq2SeqConfig, src_vocab_size: int, tgt_vocab_size: int):
    args = (cfg.embed_size, cfg.num_hiddens, cfg.num_layers, cfg.dropout)
    return EncoderDecoder(
        Seq2SeqEncoder(src_vocab_size, *args), Seq2SeqAttentionDecoder(tgt_vocab_size, *args)
    )


register_arch("seq2seq", _build_seq2seq, Seq2SeqConfig())
register_arch("bahdanau", _build_bahdanau, Seq2SeqConfig())


# ----------------------------------------------------------------------------- language models

LM_CELLS = ("rnn", "gru", "lstm")


def _doc(default: Any, help: str, **cli: Any) -> Any:
    """A field documented for its generated ``attnkit lm train`` flag (see
    ``attnkit.training.config.setting``)."""
    return field(default=default, metadata={"help": help, **cli})


@dataclass(frozen=True)
class LMConfig:
    """What a recurrent language model (``RNNLM``) is built from; validated on creation.

    ``attnkit lm train`` builds its model from one and records its fields in the
    checkpoint's config; loading rebuilds the model with ``LMConfig.from_dict(config)``.
    """

    cell: str = _doc("gru", N_("the recurrent cell"), choices=LM_CELLS)
    num_hiddens: int = _doc(256, N_("hidden width"), flag="--hiddens")
    num_layers: int = _doc(1, N_("stacked layers (RNN) or blocks (Transformer)"), flag="--layers")
    bidirectional: bool = _doc(False, N_("bidirectional layers"))
    scratch: bool = _doc(False, N_("cells written from the equations (default: torch.nn's)"))
    reset_after: bool = _doc(False, N_("the scratch GRU in nn.GRU's form (see docs)"))

    def __post_init__(self) -> None:
        one_of("LMConfig.cell", self.cell, LM_CELLS)
        for name in ("num_hiddens", "num_layers"):
            positive_int(f"LMConfig.{name}", getattr(self, name))
        for name in ("bidirectional", "scratch", "reset_after"):
            boolean(f"LMConfig.{name}", getattr(self, name))
        if self.reset_after and not (self.scratch and self.cell == "gru"):
            raise ValueError(
                _(
                    "LMConfig.reset_after is for the scratch GRU only (scratch=True, "
                    "cell='gru'; --reset-after needs --scratch --cell gru): nn.GRU always "
                    "resets after"
                )
            )

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> LMConfig:
        """The model fields of ``config`` (a checkpoint's: other keys are ignored, missing
        ones take their defaults)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in config.items() if k in names})

    def build(self, vocab_size: int) -> RNNLM:
        """The ``RNNLM`` of this config over ``vocab_size`` tokens (initialized by torch's
        RNG)."""
        return build_lm(
            self.cell, vocab_size, self.num_hiddens, self.num_layers, self.bidirectional,
            self.scratch, reset_after=self.reset_after,
        )  # fmt: skip


LM_ARCHS: Mapping[str, type] = MappingProxyType({"rnn": LMConfig, "transformer": DecoderLMConfig})


def lm_arch(config: Mapping[str, Any]) -> str:
    """The language-model arch a checkpoint's config records ("arch"; absent: "rnn")."""
    return one_of("arch", config.get("arch", "rnn"), LM_ARCHS)


def lm_config(arch: str, values: Mapping[str, Any] | None = None) -> Any:
    """The validated config of language-model ``arch`` ("rnn" or "transformer") from
    ``values`` (its fields; unknown keys are an error, missing ones take the defaults)."""
    cls = LM_ARCHS[one_of("arch", arch, LM_ARCHS)]
    values = dict(values or {})
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        message = _("unknown {cls} key(s) {unknown} for --arch {arch}; expected some of {names}")
        raise ValueError(
            message.format(cls=cls.__name__, unknown=unknown, arch=arch, names=sorted(names))
        )
    return cls(**values)


def lm_model_keys(arch: str) -> tuple[str, ...]:
    """The config keys that define a language model of ``arch`` (a checkpoint records
    them; the rest of its config is informational)."""
    return tuple(f.name for f in dataclasses.fields(LM_ARCHS[one_of("arch", arch, LM_ARCHS)]))
