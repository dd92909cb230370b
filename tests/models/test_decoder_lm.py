"""The decoder-only Transformer LM: cached steps equal the full pass for every position
scheme and kv-heads setting, left padding, causality, tied embeddings, attention maps,
the context, learning a sequence, the config's checks."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from attnkit.attention import POSITIONS, record_attention
from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig, build_decoder_lm

V = 13


def _model(positions="rope", kv=None, dropout=0.0, **kw) -> DecoderLM:
    cfg = DecoderLMConfig(
        vocab_size=V, d_model=16, num_heads=4, num_kv_heads=kv, num_layers=2, ffn_hidden=24,
        dropout=dropout, context_length=12, positions=positions, **kw,
    )  # fmt: skip
    return cfg.build().double().eval()


@pytest.mark.parametrize("kv", [1, 2, 4])
@pytest.mark.parametrize("positions", POSITIONS)
def test_cached_steps_equal_the_full_pass(positions, kv):
    torch.manual_seed(0)
    model = _model(positions, kv)
    ids = torch.randint(0, V, (3, 10))
    full = model(ids)
    for capacity in (None, 4):
        cache = model.new_cache(capacity)
        chunks = [model(ids[:, :4], cache=cache), model(ids[:, 4:6], cache=cache)]
        chunks += [model(ids[:, t : t + 1], cache=cache) for t in range(6, 10)]
        torch.testing.assert_close(torch.cat(chunks, 1), full, rtol=1e-10, atol=1e-10)
        assert len(cache) == 10
        assert cache.layers[0].keys.shape == (3, kv, 10, 4)  # Hkv heads cached
    assert cache.nbytes == 2 * 2 * 3 * kv * 10 * 4 * 8  # k, v x L x B x Hkv x K x Dh x 8 bytes


@pytest.mark.parametrize("positions", POSITIONS)
def test_a_left_padded_row_gives_what_it_gives_alone(positions):
    torch.manual_seed(0)
    model = _model(positions, kv=2)
    ids = torch.randint(1, V, (2, 7))
    key_mask = torch.ones(2, 7, dtype=torch.bool)
    key_mask[1, :3] = False  # row 1: three pads, then four tokens
    padded = ids.clone()
    padded[1, :3] = 0
    out = model(padded, key_mask=key_mask)
    torch.testing.assert_close(out[1, 3:], model(ids[1:, 3:])[0], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out[0], model(ids[:1])[0], rtol=1e-10, atol=1e-10)
    assert not out.isnan().any()  # pad queries see no key: zeros, not NaN
    # and with a cache: the mask grows with the positions
    cache = model.new_cache()
    first = model(padded[:, :5], cache=cache, key_mask=key_mask[:, :5])
    rest = [model(padded[:, t : t + 1], cache=cache, key_mask=key_mask[:, : t + 1]) for t in (5, 6)]
    torch.testing.assert_close(torch.cat([first, *rest], 1)[1, 3:], out[1, 3:])


@pytest.mark.parametrize("positions", POSITIONS)
def test_logits_never_see_the_future_and_positions_matter(positions):
    torch.manual_seed(0)
    model = _model(positions)
    ids = torch.randint(0, V, (1, 8))
    other = ids.clone()
    other[0, 5:] = (other[0, 5:] + 1) % V
    torch.testing.assert_close(model(ids)[:, :5], model(other)[:, :5], rtol=0, atol=0)
    swapped = ids[:, [1, 0, *range(2, 8)]]  # the first two tokens swapped
    same_bag = torch.allclose(model(ids)[0, -1], model(swapped)[0, -1])
    if positions == "none":
        assert not same_bag or ids[0, 0] == ids[0, 1]  # order still shows through causality
    else:
        assert not same_bag


def test_tied_embeddings_and_the_state_dict():
    torch.manual_seed(0)
    model = _model("learned")
    keys = set(model.state_dict())
    assert "embedding.weight" in keys and "input_positions.weight" in keys
    assert not any("head" in k or "dense" in k for k in keys)  # no output layer of its own
    assert {k for k in keys if k.startswith("blocks.0.")} == {
        "blocks.0.norm1.weight", "blocks.0.attention.W_qkv.weight", "blocks.0.attention.W_o.weight",
        "blocks.0.norm2.weight", "blocks.0.ffn.0.weight", "blocks.0.ffn.2.weight",
    }  # fmt: skip
    ids = torch.randint(0, V, (2, 5))
    h = model.embedding(ids) + model.input_positions.weight[:5]
    for block in model.blocks:
        h = block(h)
    torch.testing.assert_close(model(ids), model.final_norm(h) @ model.embedding.weight.T)
    for positions in ("sinusoidal", "rope", "alibi", "none"):
        assert not any("position" in k for k in _model(positions).state_dict())
    with_bias = _model("rope", bias=True)
    assert "blocks.0.attention.W_qkv.bias" in with_bias.state_dict()
    assert "final_norm.bias" in with_bias.state_dict()


def test_initialization_is_gpt2s():
    torch.manual_seed(0)
    cfg = DecoderLMConfig(vocab_size=500, d_model=256, num_heads=4, num_layers=8, ffn_hidden=1024)
    model = cfg.build()
    assert abs(model.embedding.weight.std().item() - 0.02) < 1e-3
    assert abs(model.blocks[0].attention.W_qkv.weight.std().item() - 0.02) < 1e-3
    assert abs(model.blocks[3].ffn[2].weight.std().item() - 0.02 / 4) < 3e-4  # 0.02/sqrt(2L)
    assert abs(model.blocks[3].attention.W_o.weight.std().item() - 0.02 / 4) < 3e-4
    assert torch.equal(model.final_norm.weight, torch.ones(256))


def test_attention_maps_come_back_per_block():
    torch.manual_seed(0)
    model = _model("alibi", kv=1)
    ids = torch.randint(0, V, (2, 6))
    logits, maps = model(ids, return_attention=True)
    torch.testing.assert_close(logits, model(ids))
    assert len(maps) == 2 and maps[0].shape == (2, 4, 6, 6)
    for w in maps:
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 6, dtype=w.dtype))
        assert (w.triu(1) == 0).all()
    with record_attention() as record:  # an outer record sees the same maps
        model(ids)
    torch.testing.assert_close(record.get(model.blocks[1].attention), maps[1])
    cache = model.new_cache()
    model(ids[:, :5], cache=cache)
    _, step_maps = model(ids[:, 5:], cache=cache, return_attention=True)
    torch.testing.assert_close(step_maps[1], maps[1][:, :, 5:])  # the new row over 6 keys


def test_the_context_learned_stops_the_others_run_past_it():
    torch.manual_seed(0)
    ids = torch.randint(0, V, (1, 20))  # context_length is 12
    with pytest.raises(ValueError, match="exceed the 12 learned positions"):
        _model("learned")(ids)
    for positions in ("sinusoidal", "rope", "alibi", "none"):
        assert not _model(positions)(ids).isnan().any()


@pytest.mark.parametrize("positions", POSITIONS)
def test_it_learns_a_sequence(positions):
    """Every next token of a fixed 12-token sequence is determined by what comes before
    it: from chance (ln 13 = 2.56) to near zero in 150 Adam steps, with every scheme."""
    torch.manual_seed(0)
    model = _model(positions).float().train()
    data = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8] * 2])
    x, y = data[:, :12], data[:, 1:13]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(150):
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first > 2.3 and loss.item() < 0.05


def test_dropout_acts_in_training_only():
    torch.manual_seed(0)
    model = _model("rope", dropout=0.5)
    ids = torch.randint(0, V, (2, 6))
    assert torch.equal(model(ids), model(ids))
    model.train()
    assert not torch.equal(model(ids), model(ids))


def test_the_config_checks_itself_and_round_trips():
    cfg = DecoderLMConfig(vocab_size=30, positions="alibi", num_kv_heads=2)
    assert DecoderLMConfig.from_dict({**cfg.to_dict(), "cell": "ignored"}) == cfg
    assert cfg.kv_heads == 2 and DecoderLMConfig().kv_heads == 4
    assert build_decoder_lm(DecoderLMConfig(), 7).vocab_size == 7
    assert DecoderLMConfig().build(9).config.vocab_size == 9
    helps = {f.name: f.metadata.get("flag") for f in dataclasses.fields(DecoderLMConfig)}
    assert helps["num_kv_heads"] == "--kv-heads" and helps["vocab_size"] is None
    bad = [
        ({"d_model": 10, "num_heads": 4}, ValueError, r"d_model \(10\) must be divisible"),
        ({"num_kv_heads": 3}, ValueError, r"num_kv_heads \(3\) must divide num_heads \(4\)"),
        ({"positions": "rotary"}, ValueError, "positions must be one of 'sinusoidal'"),
        ({"dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\), got 1.0"),
        ({"num_layers": 0}, ValueError, "num_layers must be a positive int, got 0"),
        ({"context_length": 2.0}, TypeError, "context_length must be a positive int"),
        ({"bias": 1}, TypeError, "bias must be a bool, got 1"),
        ({"vocab_size": 0}, ValueError, "vocab_size must be a positive int, got 0"),
        ({"d_model": 12, "num_heads": 4}, ValueError, "positions='rope' needs an even head"),
    ]
    for kwargs, error, message in bad:
        with pytest.raises(error, match=message):
            DecoderLMConfig(**kwargs)
    with pytest.raises(ValueError, match=r"vocab_size is not set: build\(vocab_size\) sets it"):
        DecoderLM(DecoderLMConfig())
    model = _model()
    with pytest.raises(ValueError, match=r"ids holds token ids in \[0, 13\], outside"):
        model(torch.tensor([[0, 13]]))
    with pytest.raises(TypeError, match="ids must be a"):
        model(torch.zeros(1, 2))
    with pytest.raises(ValueError, match=r"key_mask must be \(B, K\) = \(1, 2\)"):
        model(torch.tensor([[0, 1]]), key_mask=torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="cache must be a DecoderLMCache or None, got list"):
        model(torch.tensor([[0, 1]]), cache=[])


def test_last_only_gives_the_last_positions_logits():
    """A prompt's prefill: the last position's logits, the same as the full call's."""
    torch.manual_seed(0)
    model = DecoderLM(DecoderLMConfig(vocab_size=50, d_model=16, num_heads=2, num_layers=2,
                                      context_length=12)).eval()  # fmt: skip
    ids = torch.randint(0, 50, (3, 7))
    with torch.no_grad():
        full = model(ids)
        last = model(ids, last_only=True)
    assert last.shape == (3, 1, 50)
    torch.testing.assert_close(last, full[:, -1:], rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="last_only must be a bool"):
        model(ids, last_only="yes")
