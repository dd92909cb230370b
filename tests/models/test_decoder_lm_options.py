"""DecoderLMConfig's activation and LayerNorm epsilon: each reaches the model, the
``lm train`` flags and the cached decoding; checkpoints written before the fields load
as before (exact GELU, 1e-5)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from attnkit.cli import build_parser
from attnkit.cli.config_flags import given_flags
from attnkit.data.text import Vocab
from attnkit.inference.generation import generate_ids
from attnkit.inference.loading import load_lm_checkpoint
from attnkit.models.decoder_lm import DecoderLMConfig
from attnkit.training.lm import save_lm_checkpoint
from attnkit.training.recipes import resolve

SMALL = {"vocab_size": 20, "d_model": 16, "num_heads": 2, "num_layers": 2, "ffn_hidden": 24}
EXPECTED = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu-tanh": lambda x: (
        0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))
    ),
    "silu": lambda x: x * torch.sigmoid(x),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_the_activation_is_the_feed_forward_layers(name):
    torch.manual_seed(0)
    model = DecoderLMConfig(**SMALL, activation=name).build().eval()
    block = model.blocks[0]
    x = torch.randn(2, 5, 16)  # (B, T, D)
    h = block.ffn[0](block.norm2(x))  # (B, T, F)
    expected = block.ffn[2](EXPECTED[name](h))
    assert (block.ffn(block.norm2(x)) - expected).abs().max().item() < 1e-6
    ids = torch.randint(0, 20, (2, 9))
    with torch.no_grad():  # the cached decoding holds the same function
        full = model(ids)
        cache = model.new_cache()
        steps = [model(ids[:, :4], cache=cache)]
        steps += [model(ids[:, t : t + 1], cache=cache) for t in range(4, 9)]
    assert (torch.cat(steps, 1) - full).abs().max().item() < 1e-5


def test_gpt2s_tanh_gelu_is_not_the_exact_one():
    torch.manual_seed(0)
    exact = DecoderLMConfig(**SMALL).build().eval()
    torch.manual_seed(0)
    tanh = DecoderLMConfig(**SMALL, activation="gelu-tanh").build().eval()
    ids = torch.randint(0, 20, (1, 8))
    with torch.no_grad():
        assert 0 < (exact(ids) - tanh(ids)).abs().max().item() < 1e-2
    assert generate_ids(tanh, [[1, 2]], max_new_tokens=3) == generate_ids(
        tanh, [[1, 2]], max_new_tokens=3, use_cache=False
    )


def test_norm_eps_reaches_every_layernorm():
    model = DecoderLMConfig(**SMALL, norm_eps=1e-6, bias=True).build()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 2 * 2 + 1 and {m.eps for m in norms} == {1e-6}
    assert all(m.bias is not None for m in norms)


def test_a_config_of_before_the_fields_gives_todays_model(tmp_path):
    old = {"vocab_size": 20, "d_model": 16, "num_heads": 2, "num_kv_heads": None,
           "num_layers": 2, "ffn_hidden": 24, "dropout": 0.0, "context_length": 32,
           "positions": "rope", "bias": False}  # fmt: skip
    config = DecoderLMConfig.from_dict(old)
    assert (config.activation, config.norm_eps) == ("gelu", 1e-5)
    torch.manual_seed(0)
    model = config.build()
    vocab = Vocab(list("abcdefghijklmnopqrs"))
    assert len(vocab) == 20
    save_lm_checkpoint(tmp_path, model, vocab, {"arch": "transformer", **config.to_dict()})
    path = tmp_path / "config.json"  # as a checkpoint written before the fields
    record = json.loads(path.read_text())
    for key in ("activation", "norm_eps"):
        del record[key]
    path.write_text(json.dumps(record))
    loaded, _, _ = load_lm_checkpoint(tmp_path, prepack=False)
    assert loaded.config == config
    ids = torch.randint(0, 20, (2, 7))
    with torch.no_grad():
        assert torch.equal(loaded(ids), model.eval()(ids))


def test_the_fields_are_checked_and_the_activation_is_a_train_flag():
    with pytest.raises(ValueError, match=r"DecoderLMConfig.activation must be one of .*got 'tanh'"):
        DecoderLMConfig(activation="tanh")
    with pytest.raises(ValueError, match=r"DecoderLMConfig.norm_eps must be a finite number > 0"):
        DecoderLMConfig(norm_eps=0.0)
    with pytest.raises(
        TypeError, match=r"DecoderLMConfig\.norm_eps must be a finite number > 0, got '1e-5'"
    ):
        DecoderLMConfig(norm_eps="1e-5")
    args = build_parser().parse_args(
        ["lm", "train", "--arch", "transformer", "--activation", "silu"]
    )
    flags = given_flags(args, "model__")
    assert flags == {"activation": "silu"}
    resolved = resolve("lm", arch="transformer", flags={"model": flags, "train": {}, "data": {}})
    assert resolved.model.activation == "silu" and resolved.model.norm_eps == 1e-5
    assert not hasattr(args, "model__norm_eps")  # no flag: GPT-2 imports set it
