"""A GPT-2 folder imported as attnkit's DecoderLM gives HF's outputs on identical weights:
logits (a left-padded batch too), attention weights, cached decoding, greedy generation;
GPT-2 small's real mapping on the meta device; what does not map is refused with why."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from tests.convert.gpt2_fixtures import SIZES, hf_gpt2, tiny_gpt2

from attnkit.convert.gpt2 import GPT2_REFUSED, gpt2_config, gpt2_model, gpt2_state_dict
from attnkit.inference.generation import generate_ids
from attnkit.models.decoder_lm import DecoderLM

TOL = 1e-4


@pytest.fixture(scope="module")
def pair():
    """(attnkit's model, HF's), the same weights."""
    return gpt2_model(tiny_gpt2()), hf_gpt2()


def _batch(V: int, seed: int = 1):
    """Left-padded ids (3, 12) and their mask: rows of 12, 7 and 3 real tokens."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (3, 12), generator=g)
    mask = torch.ones(3, 12, dtype=torch.bool)
    mask[1, :5] = False
    mask[2, :9] = False
    return ids.masked_fill(~mask, 0), mask


def test_the_config_maps_field_by_field():
    config = json.loads((tiny_gpt2() / "config.json").read_text())
    c = gpt2_config(config)
    assert (c.d_model, c.num_heads, c.num_layers, c.context_length) == (32, 4, 2, 48)
    assert (c.ffn_hidden, c.positions, c.bias, c.activation, c.norm_eps) == (
        128, "learned", True, "gelu-tanh", 1e-5,
    )  # fmt: skip
    assert c.vocab_size == config["vocab_size"] and c.kv_heads == 4


def test_logits_equal_hf(pair):
    ours, hf = pair
    ids = torch.randint(0, ours.vocab_size, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = (ours(ids) - hf(ids).logits).abs().max().item()
    assert diff < TOL, diff


def test_a_left_padded_batch_equals_hf_with_position_ids(pair):
    ours, hf = pair
    ids, mask = _batch(ours.vocab_size)
    position_ids = (mask.long().cumsum(-1) - 1).clamp(min=0)  # each row counts its own tokens
    with torch.no_grad():
        a, maps = ours(ids, key_mask=mask, return_attention=True)
        out = hf(ids, attention_mask=mask.long(), position_ids=position_ids, output_attentions=True)
    assert (a - out.logits)[mask].abs().max().item() < TOL
    for i, (w, h) in enumerate(zip(maps, out.attentions, strict=True)):  # L x (B, H, T, T)
        for b in range(3):
            valid = mask[b]
            ours_w = w[b][:, valid][:, :, valid]  # (H, t, t): valid queries and keys
            theirs = h[b][:, valid][:, :, valid]
            assert (ours_w - theirs).abs().max().item() < 1e-5, (i, b)
            assert w[b][:, valid][:, :, ~valid].abs().sum().item() == 0.0  # padding unseen


def test_cached_decoding_equals_a_full_pass(pair):
    ours, _ = pair
    ids, mask = _batch(ours.vocab_size, seed=2)
    with torch.no_grad():
        full = ours(ids, key_mask=mask)  # (B, T, V)
        cache = ours.new_cache()
        steps = [ours(ids[:, :6], cache=cache, key_mask=mask[:, :6])]
        for t in range(6, 12):
            steps.append(ours(ids[:, t : t + 1], cache=cache, key_mask=mask[:, : t + 1]))
    cached = torch.cat(steps, 1)
    assert (cached - full)[mask].abs().max().item() < 1e-5


def test_greedy_generation_equals_hf_generate(pair):
    ours, hf = pair
    prompts = [[5, 17, 40, 2, 99, 120], [33, 8], [200, 7, 61]]
    new = generate_ids(ours, prompts, max_new_tokens=12)
    eos = hf.config.eos_token_id
    for prompt, mine in zip(prompts, new, strict=True):  # one at a time: no padding in HF
        with torch.no_grad():
            out = hf.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt),
                              dtype=torch.long), do_sample=False, max_new_tokens=12,
                              min_new_tokens=12, pad_token_id=eos)  # fmt: skip
        assert out[0, len(prompt) :].tolist() == mine
    # the batch, left-padded in HF as in attnkit: the same tokens
    P = max(map(len, prompts))
    ids = torch.tensor([[eos] * (P - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        out = hf.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=12,
                          min_new_tokens=12, pad_token_id=eos)  # fmt: skip
    assert out[:, P:].tolist() == new


def test_pytorch_model_bin_without_the_prefix_and_old_mask_buffers_loads_the_same(tmp_path, pair):
    ours, _ = pair
    folder = tmp_path / "old"
    folder.mkdir()
    shutil.copy(tiny_gpt2() / "config.json", folder)
    hf_state = hf_gpt2().state_dict()
    state = {k.removeprefix("transformer."): v.clone() for k, v in hf_state.items()}
    for i in range(SIZES["n_layer"]):  # what GPT-2 files of 2019 hold besides the weights
        state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, 48, 48))
        state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    torch.save(state, folder / "pytorch_model.bin")
    again = gpt2_model(folder)
    for (k, v), w in zip(again.state_dict().items(), ours.state_dict().values(), strict=True):
        assert torch.equal(v, w), k


def test_gpt2_small_maps_on_the_meta_device():
    """GPT-2 small's own config.json values (openai-community/gpt2) and HF's tensors."""
    from transformers import GPT2Config, GPT2LMHeadModel

    small = {"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_ctx": 1024,
             "n_embd": 768, "n_layer": 12, "n_head": 12, "activation_function": "gelu_new",
             "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
             "layer_norm_epsilon": 1e-5, "initializer_range": 0.02, "bos_token_id": 50256,
             "eos_token_id": 50256, "architectures": ["GPT2LMHeadModel"]}  # fmt: skip
    config = gpt2_config(small)
    assert (config.ffn_hidden, config.context_length, config.vocab_size) == (3072, 1024, 50257)
    with torch.device("meta"):
        hf = GPT2LMHeadModel(GPT2Config(**small))
        ours = DecoderLM(config)
    state = gpt2_state_dict(hf.state_dict(), config)
    assert {k: tuple(v.shape) for k, v in state.items()} == {
        k: tuple(v.shape) for k, v in ours.state_dict().items()
    }
    ours.load_state_dict(state, assign=True)
    assert sum(p.numel() for p in ours.parameters()) == 124_439_808  # GPT-2 small's count
    assert tuple(state["blocks.0.attention.W_qkv.weight"].shape) == (2304, 768)  # c_attn.T
    assert tuple(state["blocks.0.ffn.0.weight"].shape) == (3072, 768)  # c_fc.T


@pytest.mark.parametrize("key", list(GPT2_REFUSED))
def test_what_does_not_map_is_refused_with_the_reason(key):
    config = {"model_type": "gpt2", key: not GPT2_REFUSED[key][0]}
    with pytest.raises(ValueError, match=f"{key}=.*does not map onto attnkit's DecoderLM: "):
        gpt2_config(config)


def test_other_refusals_name_the_value():
    with pytest.raises(ValueError, match=r"activation_function 'gelu_10' does not map.*gelu_new"):
        gpt2_config({"model_type": "gpt2", "activation_function": "gelu_10"})
    with pytest.raises(ValueError, match="model_type 'llama' is not 'gpt2'"):
        gpt2_config({"model_type": "llama"})
    with pytest.raises(ValueError, match="divisible by num_heads"):
        gpt2_config({"model_type": "gpt2", "n_embd": 30, "n_head": 4})
    config = gpt2_config(json.loads((tiny_gpt2() / "config.json").read_text()))
    state = dict(hf_gpt2().state_dict())
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0  # untied
    with pytest.raises(ValueError, match=r"lm_head\.weight is not wte\.weight"):
        gpt2_state_dict(state, config)
    del state["transformer.h.1.mlp.c_fc.bias"]
    with pytest.raises(ValueError, match=r"missing \['h.1.mlp.c_fc.bias'\]"):
        gpt2_state_dict(state, config)
    state = dict(hf_gpt2().state_dict())
    state["transformer.wpe.weight"] = state["transformer.wpe.weight"][:10]
    with pytest.raises(ValueError, match=r"wpe.weight has shape \(10, 32\), expected \(48, 32\)"):
        gpt2_state_dict(state, config)
