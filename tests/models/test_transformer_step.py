"""The decoder's lean one-position step equals the modules' forward, and runs only when
it applies (inference, no hooks or recording, standard blocks, filled caches)."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention.recording import record_attention
from attnkit.inference.decoding import greedy_decode
from attnkit.inference.prepacked import prepack_linears
from attnkit.models import transformer, transformer_step
from attnkit.models.transformer import DecoderBlock, TransformerConfig, build_transformer


def _model(pre_norm: bool, bias: bool, seed: int = 0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(
        d_model=16, num_heads=4, num_layers=2, d_ff=32, dropout=0.1, pre_norm=pre_norm, bias=bias
    )
    model = build_transformer(cfg, 13, 11).eval()
    with torch.no_grad():  # non-trivial LayerNorms and biases
        for name, p in model.named_parameters():
            if "ln" in name or "bias" in name or "final_norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    src = torch.randint(0, 13, (4, 7))
    src_len = torch.tensor([7, 5, 2, 1])
    return model, src, src_len


def _steps(model, src, src_len, n: int = 6):
    """Logits of n decoding steps fed with fixed tokens."""
    decoder = model.decoder
    y = torch.randint(0, 11, (src.shape[0], n), generator=torch.Generator().manual_seed(1))
    out = []
    with torch.no_grad():
        state = decoder.init_state(model.encoder(src, src_len), src_len)
        for t in range(n):
            logits, state = decoder(y[:, t : t + 1], state)
            out.append(logits)
    return torch.cat(out, dim=1)  # (B, n, V)


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("prepack", [False, True])
def test_the_step_equals_the_modules(pre_norm, bias, prepack, monkeypatch):
    model, src, src_len = _model(pre_norm, bias)
    if prepack:
        prepack_linears(model, min_weights=1)
    calls = []
    real = transformer_step.decoder_step
    monkeypatch.setattr(transformer_step, "decoder_step", lambda *a: calls.append(1) or real(*a))
    lean = _steps(model, src, src_len)
    assert len(calls) == 5  # every step after the first (which fills the caches)
    monkeypatch.setattr(transformer_step, "applies", lambda *a: False)
    modules = _steps(model, src, src_len)
    assert len(calls) == 5
    torch.testing.assert_close(lean, modules, rtol=0, atol=0)  # the same operations
    # and the same as the whole sequence in one teacher-forced pass
    y = torch.randint(0, 11, (4, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full, _ = model(src, y, src_len)
    torch.testing.assert_close(lean, full, rtol=1e-5, atol=1e-5)


def test_greedy_decoding_is_unchanged_by_the_step(monkeypatch):
    model, src, src_len = _model(True, False, seed=3)
    lean = greedy_decode(model, src, src_len, bos_id=1, eos_id=2, max_len=9)
    monkeypatch.setattr(transformer_step, "applies", lambda *a: False)
    modules = greedy_decode(model, src, src_len, bos_id=1, eos_id=2, max_len=9)
    assert lean.tokens == modules.tokens and lean.finished == modules.finished


def _applies_after_one_step(model, src, src_len) -> bool:
    decoder = model.decoder
    with torch.no_grad():
        state = decoder.init_state(model.encoder(src, src_len), src_len)
        _, state = decoder(torch.ones(4, 1, dtype=torch.long), state)
        caches = [c.copy() for c in state[2]]
        return transformer_step.applies(
            decoder, torch.ones(4, 1, dtype=torch.long), caches, _standard()
        )


def _standard():
    from attnkit.models.transformer import _STANDARD

    return _STANDARD


def test_it_applies_only_where_it_computes_the_same():
    model, src, src_len = _model(True, False)
    decoder = model.decoder
    assert _applies_after_one_step(model, src, src_len)
    with torch.no_grad():  # the first step: no cache filled yet
        state = decoder.init_state(model.encoder(src, src_len), src_len)
        one, two = torch.ones(4, 1, dtype=torch.long), torch.ones(4, 2, dtype=torch.long)
        assert not transformer_step.applies(decoder, one, state[2], _standard())
        caches = [c.copy() for c in decoder(one, state)[1][2]]
        assert transformer_step.applies(decoder, one, caches, _standard())
        with torch.enable_grad():  # autograd recording: the modules
            assert not transformer_step.applies(decoder, one, caches, _standard())
        assert not transformer_step.applies(decoder, two, caches, _standard())  # 2 positions
    with record_attention(model):  # attention maps need the modules
        assert not _applies_after_one_step(model, src, src_len)
    handle = decoder.blks[0].attention2.register_forward_hook(lambda *a: None)
    assert not _applies_after_one_step(model, src, src_len)
    handle.remove()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda *a: None)
    assert not _applies_after_one_step(model, src, src_len)
    handle.remove()
    decoder.blks[1].attention1.record_weights = True
    assert not _applies_after_one_step(model, src, src_len)
    decoder.blks[1].attention1.record_weights = False
    model.train()
    assert not _applies_after_one_step(model, src, src_len)
    model.eval()

    class OtherBlock(DecoderBlock):
        pass

    other = OtherBlock(decoder.config)
    other.load_state_dict(decoder.blks[0].state_dict())
    decoder.blks[0] = other
    assert not _applies_after_one_step(model, src, src_len)


@pytest.mark.parametrize(
    "change",
    ["gelu", "layer_norm_subclass", "final_norm_subclass", "dropout_training", "embed_override"],
)
def test_a_changed_sublayer_takes_the_modules(change):
    """A model whose sublayers compute something else than the standard ones: the step
    does not apply, and decoding gives the modules' results."""
    model, src, src_len = _model(True, True)

    class OtherNorm(torch.nn.LayerNorm):
        def forward(self, x):
            return super().forward(x) * 2.0

    decoder = model.decoder
    if change == "gelu":  # an activation module the step does not know
        decoder.blks[0].ffn.relu = torch.nn.Hardtanh()
    elif change == "layer_norm_subclass":
        old = decoder.blks[1].addnorm2.ln
        decoder.blks[1].addnorm2.ln = OtherNorm(16)
        decoder.blks[1].addnorm2.ln.load_state_dict(old.state_dict())
    elif change == "final_norm_subclass":
        decoder.final_norm = OtherNorm(16)
    elif change == "dropout_training":
        decoder.blks[0].addnorm1.dropout.train()
    else:

        class Shifted(type(decoder)):
            def _embed(self, X, offset=0):
                return super()._embed(X, offset) + 1.0

        decoder.__class__ = Shifted
    assert not _applies_after_one_step(model, src, src_len)


def test_a_bf16_memory_cache_attends_in_bf16_on_both_paths(monkeypatch):
    """memory_cache_dtype=bfloat16 (int8's choice where the CPU computes in bf16): the
    encoder memory's caches hold bf16 keys and values, the lean step and the modules
    compute the same logits, and they stay close to float32's."""
    model, src, src_len = _model(False, True)
    reference = _steps(model, src, src_len)
    model.decoder.memory_cache_dtype = torch.bfloat16

    def first_cross_cache():
        with torch.no_grad():
            state = model.decoder.init_state(model.encoder(src, src_len), src_len)
            _, state = model.decoder(torch.ones(4, 1, dtype=torch.long), state)
        return state

    assert first_cross_cache()[2][0].cross_attention.dtype is None  # 4 sentences: float32
    monkeypatch.setattr(transformer, "MEMORY_CACHE_DTYPE_MIN_ROWS", 4)
    state = first_cross_cache()
    cross = state[2][0].cross_attention
    assert cross.keys.dtype == cross.values.dtype == torch.bfloat16
    assert state[2][0].self_attention.keys.dtype == torch.float32
    lean = _steps(model, src, src_len)
    monkeypatch.setattr(transformer_step, "applies", lambda *a: False)
    modules = _steps(model, src, src_len)
    assert lean.dtype == modules.dtype == torch.float32
    torch.testing.assert_close(lean, modules, rtol=0, atol=0)
    # bf16 keeps 8 significant bits: logits within 2% of their spread, not bit for bit
    error = (lean - reference).abs().max()
    assert 0 < error < 0.02 * (reference.max() - reference.min())
