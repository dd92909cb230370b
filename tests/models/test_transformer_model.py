"""The Transformer: incremental == full pass, causality, padding, config and input errors."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention import record_attention, row_map
from attnkit.models.registry import arch_config, build_model
from attnkit.models.transformer import BlockCache, TransformerConfig, build_transformer
from attnkit.training.recipes import PRESETS


def tiny(pre_norm: bool = False, dropout: float = 0.0):
    cfg = TransformerConfig(
        d_model=16,
        num_heads=4,
        num_layers=2,
        d_ff=32,
        dropout=dropout,
        max_len=50,
        pre_norm=pre_norm,
    )
    return build_transformer(cfg, 13, 17).eval()


def batch():
    g = torch.Generator().manual_seed(3)
    src = torch.randint(0, 13, (3, 6), generator=g)
    src_len = torch.tensor([6, 4, 1])
    tgt = torch.randint(0, 17, (3, 5), generator=g)
    return src, src_len, tgt


@pytest.mark.parametrize("pre_norm", [False, True])
def test_incremental_decoding_equals_full_pass(pre_norm):
    model = tiny(pre_norm)
    src, src_len, tgt = batch()
    enc = model.encoder(src, src_len)
    full, _ = model.decoder(tgt, model.decoder.init_state(enc, src_len))
    state = model.decoder.init_state(enc, src_len)
    steps = []
    for t in range(tgt.shape[1]):
        logits, state = model.decoder(tgt[:, t : t + 1], state)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    # the cache holds projected keys/values: (B, H, T, Dh) self, (B, H, S, Dh) cross
    cache = state[2][0]
    assert isinstance(cache, BlockCache) and len(cache) == 5
    assert cache.self_attention.keys.shape == (3, 4, 5, 4)
    assert cache.cross_attention.static and cache.cross_attention.keys.shape == (3, 4, 6, 4)


def test_a_decoder_step_leaves_the_state_it_was_given_as_it_was():
    model = tiny()
    src, src_len, tgt = batch()
    enc = model.encoder(src, src_len)
    state = model.decoder(tgt[:, :2], model.decoder.init_state(enc, src_len))[1]
    keys = state[2][0].self_attention.keys
    a, after = model.decoder(tgt[:, 2:3], state)
    b, _ = model.decoder(tgt[:, 2:3], state)  # the same step again, from the same state
    torch.testing.assert_close(a, b)
    assert state[2][0].self_attention.keys is keys and len(state[2][0]) == 2
    assert len(after[2][0]) == 3


@torch.no_grad()
def test_inference_steps_write_in_place_and_two_continuations_of_a_state_stay_apart():
    """Without autograd a step writes its position into the cache's preallocated room; a
    second continuation of the same state (as beam search or a caller may make) gets its
    own buffer, and both continue exactly as full passes over their own tokens."""
    model = tiny(pre_norm=True)
    src, src_len, tgt = batch()
    enc = model.encoder(src, src_len)
    state = model.decoder(tgt[:, :2], model.decoder.init_state(enc, src_len))[1]
    held = state[2][0].self_attention.keys
    other = (tgt[:, 2:3] + 1) % 17
    a, after_a = model.decoder(tgt[:, 2:3], state)
    assert after_a[2][0].self_attention.keys.data_ptr() == held.data_ptr()  # in place
    b, after_b = model.decoder(other, state)  # behind the first one: a buffer of its own
    assert after_b[2][0].self_attention.keys.data_ptr() != held.data_ptr()
    a2, _ = model.decoder(tgt[:, 3:4], after_a)
    b2, _ = model.decoder(tgt[:, 3:4], after_b)
    init = model.decoder.init_state(enc, src_len)
    full_a, _ = model.decoder(tgt[:, :4], init)
    seq_b = torch.cat([tgt[:, :2], other, tgt[:, 3:4]], 1)
    full_b, _ = model.decoder(seq_b, model.decoder.init_state(enc, src_len))
    torch.testing.assert_close(torch.cat([a, a2], 1), full_a[:, 2:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat([b, b2], 1), full_b[:, 2:], atol=1e-5, rtol=1e-5)
    assert len(state[2][0]) == 2 and torch.equal(state[2][0].self_attention.keys, held)


def test_the_cross_attention_projects_the_encoder_output_once(monkeypatch):
    """Decoding steps reuse the encoder output's keys/values: after the first step the
    encoder-decoder attention projects only its queries."""
    model = tiny()
    src, src_len, tgt = batch()
    enc = model.encoder(src, src_len)
    state = model.decoder.init_state(enc, src_len)
    cross = model.decoder.blks[0].attention2
    rows = []
    real = cross._project_memory
    monkeypatch.setattr(cross, "_project_memory", lambda *a: rows.append(1) or real(*a))
    for t in range(3):
        _, state = model.decoder(tgt[:, t : t + 1], state)
    assert len(rows) == 1


def test_decoder_is_causal_in_eval_full_pass():
    model = tiny()
    src, src_len, tgt = batch()
    enc = model.encoder(src, src_len)
    a, _ = model.decoder(tgt, model.decoder.init_state(enc, src_len))
    tgt2 = tgt.clone()
    tgt2[:, 3:] = (tgt2[:, 3:] + 1) % 17
    b, _ = model.decoder(tgt2, model.decoder.init_state(enc, src_len))
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_source_padding_does_not_matter():
    model = tiny()
    src, src_len, tgt = batch()
    src2 = src.clone()
    src2[1, 4:] = (src2[1, 4:] + 5) % 13
    src2[2, 1:] = 0
    out1 = model(src, tgt, src_len)[0]
    out2 = model(src2, tgt, src_len)[0]
    torch.testing.assert_close(out1, out2, atol=1e-5, rtol=1e-5)


def test_attention_weights_only_when_recorded():
    model = tiny()
    src, src_len, tgt = batch()
    model(src, tgt, src_len)
    assert model.encoder.attention_weights == [None, None]
    with record_attention(model):
        logits, _ = model(src, tgt, src_len)
    enc_w = model.encoder.attention_weights
    self_w, cross_w = model.decoder.attention_weights
    assert enc_w[0].shape == (3, 4, 6, 6) and self_w[1].shape == (3, 4, 5, 5)
    assert cross_w[0].shape == (3, 4, 5, 6)
    assert (cross_w[0][2, :, :, 1:] == 0).all()  # source of length 1
    assert (self_w[0].triu(1) == 0).all()  # causal
    torch.testing.assert_close(model.decoder.alignment(), cross_w[1].mean(1))
    # recording does not change results; flags restored afterwards
    torch.testing.assert_close(model(src, tgt, src_len)[0], logits, atol=1e-5, rtol=1e-5)
    assert not any(getattr(m, "record_weights", False) for m in model.modules())


def test_reorder_state_selects_rows(monkeypatch):
    monkeypatch.setattr(row_map, "MIN_QUERY_ROWS", 1)  # this small batch keeps a map too
    model = tiny()
    src, src_len, tgt = batch()
    enc = model.encoder(src, src_len)
    state = model.decoder(tgt[:, :2], model.decoder.init_state(enc, src_len))[1]
    idx = torch.tensor([2, 0, 0])
    re = model.decoder.reorder_state(state, idx)
    torch.testing.assert_close(re[0], enc[idx])
    old, new = state[2][1].self_attention, re[2][1].self_attention
    torch.testing.assert_close(new.keys, old.keys[idx])
    # the memory's rows held once, read through a row map (row 0 twice)
    cross = re[2][1].cross_attention
    assert cross.row_map is not None and cross.row_map.rows.tolist() == [2, 0, 0]
    torch.testing.assert_close(cross.per_row()[1], state[2][1].cross_attention.values[idx])
    nxt_a = model.decoder(tgt[idx, 2:3], re)[0]
    nxt_b = model.decoder(tgt[:, 2:3], state)[0][idx]
    torch.testing.assert_close(nxt_a, nxt_b, atol=1e-5, rtol=1e-5)


def test_dropout_is_active_only_in_training():
    model = tiny(dropout=0.5)
    src, src_len, tgt = batch()
    torch.testing.assert_close(model(src, tgt, src_len)[0], model(src, tgt, src_len)[0])
    model.train()
    assert not torch.allclose(model(src, tgt, src_len)[0], model(src, tgt, src_len)[0])


def test_presets_and_registry():
    assert PRESETS["book"] == TransformerConfig(32, 4, 2, 64, 0.1)
    assert arch_config("transformer") == TransformerConfig() == PRESETS["book"]  # the book's
    m = build_model("transformer", {"d_model": 8, "num_heads": 2}, 5, 6)
    assert m.decoder.dense.out_features == 6 and m.encoder.embedding.num_embeddings == 5
    assert PRESETS["base"] == TransformerConfig(256, 4, 2, 1024, 0.0, pre_norm=True)
    # 6.8 M parameters with the recipe's 4000 joint pieces
    n = sum(p.numel() for p in build_transformer(PRESETS["base"], 4000, 4000).parameters())
    assert 6.7e6 < n < 6.8e6


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"d_model": 30, "num_heads": 4}, ValueError,
         r"TransformerConfig\.d_model \(30\) must be divisible by num_heads \(4\)"),
        ({"d_model": 0}, ValueError, r"TransformerConfig\.d_model must be a positive int, got 0"),
        ({"d_model": 32.0}, TypeError,
         r"TransformerConfig\.d_model must be a positive int, got 32\.0 \(float\)"),
        ({"num_heads": 0}, ValueError, r"TransformerConfig\.num_heads must be a positive int, got 0"),
        ({"num_heads": "4"}, TypeError,
         r"TransformerConfig\.num_heads must be a positive int, got '4' \(str\)"),
        ({"num_layers": 0}, ValueError, r"TransformerConfig\.num_layers must be a positive int, got 0"),
        ({"num_layers": True}, TypeError,
         r"TransformerConfig\.num_layers must be a positive int, got True \(bool\)"),
        ({"d_ff": -64}, ValueError, r"TransformerConfig\.d_ff must be a positive int, got -64"),
        ({"d_ff": None}, TypeError,
         r"TransformerConfig\.d_ff must be a positive int, got None \(NoneType\)"),
        ({"max_len": -1}, ValueError, r"TransformerConfig\.max_len must be a positive int, got -1"),
        ({"max_len": 1e3}, TypeError,
         r"TransformerConfig\.max_len must be a positive int, got 1000\.0 \(float\)"),
        ({"dropout": 1.0}, ValueError, r"TransformerConfig\.dropout must be in \[0, 1\), got 1\.0"),
        ({"dropout": "0.1"}, TypeError,
         r"TransformerConfig\.dropout must be a float in \[0, 1\), got '0\.1' \(str\)"),
        ({"pre_norm": 1}, TypeError, r"TransformerConfig\.pre_norm must be a bool, got 1 \(int\)"),
        ({"bias": "no"}, TypeError, r"TransformerConfig\.bias must be a bool, got 'no' \(str\)"),
    ],
)  # fmt: skip
def test_config_validation(kwargs, error, match):
    with pytest.raises(error, match=match):
        TransformerConfig(**kwargs)


def test_config_takes_numpy_ints_as_ints():
    import numpy as np

    cfg = TransformerConfig(d_model=np.int64(16), num_heads=np.int32(4))
    assert type(cfg.d_model) is int and type(cfg.num_heads) is int
    assert cfg == TransformerConfig(d_model=16, num_heads=4)


@pytest.mark.parametrize(
    ("vocab_size", "error", "match"),
    [
        (0, ValueError, "vocab_size must be a positive int, got 0"),
        (13.0, TypeError, r"vocab_size must be a positive int, got 13\.0 \(float\)"),
        (True, TypeError, r"vocab_size must be a positive int, got True \(bool\)"),
    ],
)
def test_vocab_size_is_checked(vocab_size, error, match):
    with pytest.raises(error, match=match):
        build_transformer(TransformerConfig(), vocab_size, 17)


def test_input_errors():
    model = tiny()
    src, src_len, tgt = batch()
    with pytest.raises(
        ValueError, match=r"src holds token ids in \[0, 13\], outside the vocabulary \[0, 13\)"
    ):
        bad = src.clone()
        bad[0, 0] = 13
        model.encoder(bad, src_len)
    with pytest.raises(ValueError, match="tgt holds token ids"):
        model(src, torch.full((3, 2), -1), src_len)
    with pytest.raises(TypeError, match="int64 tensor of token ids"):
        model.encoder(src.float(), src_len)
    with pytest.raises(ValueError, match=r"must lie in \[0, 6\]"):
        model.encoder(src, torch.tensor([7, 1, 1]))
    with pytest.raises(ValueError, match="exceed max_len=50"):
        model.encoder(torch.zeros(1, 51, dtype=torch.long), torch.tensor([51]))
    with pytest.raises(ValueError, match="batch size 2 but the state holds 3"):
        enc = model.encoder(src, src_len)
        model.decoder(tgt[:2], model.decoder.init_state(enc, src_len))


def test_blocks_are_called_as_modules_so_forward_hooks_fire():
    from attnkit import d2l

    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.0)
    book = d2l.EncoderDecoder(
        d2l.TransformerEncoder(12, 16, 16, 16, 16, [16], 16, 32, 2, 2, 0.0),
        d2l.TransformerDecoder(12, 16, 16, 16, 16, [16], 16, 32, 2, 2, 0.0),
    )
    src, tgt, lens = (
        torch.randint(4, 12, (3, 6)),
        torch.randint(4, 12, (3, 5)),
        torch.tensor([6, 4, 2]),
    )
    for model in (build_transformer(cfg, 12, 12), book):
        seen = []
        blocks = [*model.encoder.blks, *model.decoder.blks]
        hooks = [
            b.register_forward_hook(lambda m, a, out, seen=seen: seen.append(m)) for b in blocks
        ]
        with torch.no_grad():
            model.eval()(src, tgt, lens)
        for h in hooks:
            h.remove()
        assert seen == blocks  # 4 of 4, in order
    # the book's own call of a decoder block, blk(X, state), still works
    blk = book.decoder.blks[0]
    state = book.decoder.init_state(book.encoder(src, lens), lens)
    with torch.no_grad():
        Y, state = blk(torch.randn(3, 5, 16), state)
    assert Y.shape == (3, 5, 16) and state[2][0] is not None


def test_reorder_state_with_same_sources_keeps_the_encoder_side():
    """Rows that keep decoding their own sentence (beam search reordering hypotheses within
    each sentence): the encoder side is kept, not copied, and the next step is the same."""
    model = tiny()
    src, src_len, tgt = batch()
    two = torch.tensor([0, 0, 1, 1, 2, 2])  # two hypotheses per sentence
    enc = model.encoder(src[two], src_len[two])
    state = model.decoder(tgt[two, :2], model.decoder.init_state(enc, src_len[two]))[1]
    idx = torch.tensor([1, 1, 3, 2, 4, 5])  # each row takes a hypothesis of its own sentence
    kept = model.decoder.reorder_state(state, idx, same_sources=True)
    copied = model.decoder.reorder_state(state, idx)
    assert kept[0] is state[0] and kept[1] is state[1]
    assert kept[2][0].cross_attention.keys is state[2][0].cross_attention.keys
    torch.testing.assert_close(kept[2][1].self_attention.keys, copied[2][1].self_attention.keys)
    y = tgt[two, 2:3][idx]
    torch.testing.assert_close(model.decoder(y, kept)[0], model.decoder(y, copied)[0])
    with pytest.raises(ValueError, match="same_sources needs one new row per old row, got 2"):
        model.decoder.reorder_state(state, idx[:2], same_sources=True)


def test_under_cpu_autocast_the_residual_stream_is_carried_in_bfloat16(monkeypatch):
    """The embedding hands the blocks bf16 under CPU autocast (no float32 stream cast for
    every linear layer), float32 otherwise; the logits agree with the float32 stream's
    to bf16 rounding, and the lean inference step steps aside."""
    model = tiny(pre_norm=True)
    src, src_len, tgt = batch()
    seen = []
    hook = model.encoder.blks[0].register_forward_pre_hook(lambda m, a: seen.append(a[0].dtype))
    with torch.no_grad():
        ref, _ = model(src, tgt, src_len)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        low, _ = model(src, tgt, src_len)
    hook.remove()
    assert seen == [torch.float32, torch.bfloat16] and low.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), ref, atol=0.1, rtol=0.05)
    from attnkit.models import transformer_step

    def lean(*args):
        raise AssertionError("the lean step does not follow autocast's casts")

    monkeypatch.setattr(transformer_step, "decoder_step", lean)
    with torch.no_grad():
        enc = model.encoder(src, src_len)
        state = model.decoder(tgt[:, :2], model.decoder.init_state(enc, src_len))[1]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            step, _ = model.decoder(tgt[:, 2:3], state)  # the modules, not the lean step
    assert step.dtype == torch.bfloat16
