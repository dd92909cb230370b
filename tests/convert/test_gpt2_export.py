"""attnkit's decoder-only LM written as a GPT-2 folder: ``GPT2LMHeadModel.from_pretrained``
gives its logits; import -> attnkit checkpoint -> export -> HF round trips; what GPT-2
cannot express is refused with the reason."""

from __future__ import annotations

import json

import pytest
import torch
from tests.convert.gpt2_fixtures import STRINGS, hf_gpt2, tiny_gpt2

from attnkit.convert.gpt2 import import_gpt2
from attnkit.convert.gpt2_export import export_gpt2, gpt2_hf_config
from attnkit.inference.loading import load_lm_checkpoint, load_lm_tokenizer
from attnkit.models.decoder_lm import DecoderLMConfig

TOL = 1e-4


def _hf(folder):
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()


def _ids(V: int, T: int = 16):
    return torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(3))


def test_import_then_export_round_trips_to_hf(tmp_path):
    from transformers import AutoTokenizer

    import_gpt2(tiny_gpt2(), tmp_path / "ck")
    model, _, config = load_lm_checkpoint(tmp_path / "ck", prepack=False)
    export_gpt2(model, tmp_path / "hf", tokenizer=load_lm_tokenizer(tmp_path / "ck", config))
    back, original = _hf(tmp_path / "hf"), hf_gpt2()
    for (k, v), w in zip(back.state_dict().items(), original.state_dict().values(), strict=True):
        assert torch.equal(v, w), k  # the very tensors
    ids = _ids(model.vocab_size)
    with torch.no_grad():
        assert (back(ids).logits - original(ids).logits).abs().max().item() == 0.0
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["activation_function"] == "gelu_new" and written["n_inner"] == 128
    assert written["eos_token_id"] == original.config.eos_token_id
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    reference = AutoTokenizer.from_pretrained(tiny_gpt2())
    assert [tok(s)["input_ids"] for s in STRINGS] == [reference(s)["input_ids"] for s in STRINGS]


@pytest.mark.parametrize(
    "options",
    [
        {"positions": "learned", "activation": "gelu-tanh", "bias": False},  # zeros as biases
        {"positions": "learned", "activation": "relu", "bias": True, "norm_eps": 1e-6},
        {"positions": "sinusoidal", "activation": "gelu", "bias": False},  # the table as wpe
        {"positions": "none", "activation": "silu", "bias": True},
    ],
)
def test_an_attnkit_model_exports_with_its_logits(tmp_path, options):
    torch.manual_seed(0)
    config = DecoderLMConfig(vocab_size=50, d_model=16, num_heads=2, num_layers=2,
                             ffn_hidden=24, context_length=20, **options)  # fmt: skip
    model = config.build().eval()
    with torch.no_grad():  # LayerNorms off their start, so the mapping of each shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    export_gpt2(model, tmp_path)
    ids = _ids(50)
    with torch.no_grad():
        diff = (_hf(tmp_path)(ids).logits - model(ids)).abs().max().item()
    assert diff < TOL, diff


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"positions": "rope"}, "positions='rope' does not map onto GPT-2: it rotates or biases"),
        ({"positions": "alibi"}, "positions='alibi' does not map onto GPT-2"),
        ({"positions": "learned", "num_kv_heads": 1},
         r"num_kv_heads=1 \(grouped-query attention\) does not map onto GPT-2"),
    ],
)  # fmt: skip
def test_what_gpt2_cannot_express_is_refused(tmp_path, options, message):
    model = DecoderLMConfig(vocab_size=50, d_model=16, num_heads=2, **options).build()
    with pytest.raises(ValueError, match=message):
        export_gpt2(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_checks_its_arguments(tmp_path):
    model = DecoderLMConfig(vocab_size=50, d_model=16, num_heads=2, positions="learned").build()
    (tmp_path / "x").write_text("")
    with pytest.raises(FileExistsError, match="is not empty: pass overwrite=True"):
        export_gpt2(model, tmp_path)
    with pytest.raises(TypeError, match="model must be a DecoderLM, got Linear"):
        export_gpt2(torch.nn.Linear(2, 2), tmp_path / "a")
    with pytest.raises(TypeError, match="config must be a DecoderLMConfig, got dict"):
        gpt2_hf_config({})
