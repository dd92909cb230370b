"""int8 serving: each layer within the rounding bound of its int8 weights and uint8 inputs
(float64 references), a trained translator's outputs mostly unchanged, and the command
lines' --int8; clear errors."""

from __future__ import annotations

import contextlib
import copy
import pickle
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnkit.cli import main
from attnkit.inference import int8
from attnkit.inference.int8 import Int8Linear, quantize_int8
from attnkit.inference.prepacked import PrepackedLinear
from attnkit.inference.translator import Translator
from attnkit.models.transformer import TransformerConfig, build_transformer

pytestmark = pytest.mark.skipif(
    not int8.available(), reason="this PyTorch has no oneDNN int8 linear operators"
)


def _bound(layer: Int8Linear, x: torch.Tensor, w: torch.Tensor, levels: int = 127) -> torch.Tensor:
    """(N, D_out): the most the int8 product can differ from x wᵀ in exact arithmetic:
    weights off by at most s_o / 2, each row's inputs by at most its step / 2, the step
    being the row's largest |value| / 127 (float64)."""
    x, w = x.double().reshape(-1, x.shape[-1]), w.double()
    step = x.abs().amax(dim=1, keepdim=True) / levels  # (N, 1)
    s = layer.scale.double()  # (D_out,)
    per_row = x.abs() @ (s[:, None] / 2).expand_as(w).t() + step / 2 * w.abs().sum(1)
    return per_row + step * s / 4 * w.shape[1] + 1e-4 * (x.abs() @ w.abs().t()) + 1e-5


@contextlib.contextmanager
def _setting(name: str, value: int):
    """``attnkit.inference.int8.<name>`` set to ``value`` within the block."""
    saved = getattr(int8, name)
    setattr(int8, name, value)
    try:
        yield
    finally:
        setattr(int8, name, saved)


def _int8_product_from(work: int):
    return _setting("INT8_MIN_WORK", work)


def _onednn_from(work: int):
    return _setting("ONEDNN_MIN_WORK", work)


@pytest.mark.parametrize("seven", [True, False])
@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("fbgemm", [True, False])
def test_the_row_count_and_the_cpu_pick_the_product(monkeypatch, exact, fbgemm, seven):
    """Where the CPU's int8 product is exact (VNNI/AMX): FBGEMM at every row count with
    8-bit inputs, oneDNN from ``ONEDNN_MIN_WORK`` rows x weights (here set to 33 rows);
    without FBGEMM, float32 below 2^25 (33 rows), oneDNN from there. Where it is not
    (AVX2's saturating pair sums): FBGEMM with 7-bit inputs (``reduce_range``) at every
    row count, or float32 when ``ATTNKIT_INT8_WITHOUT_VNNI=0`` says so; never oneDNN."""
    layer = Int8Linear(nn.Linear(256, 4000))  # 1,024,000 weights
    if not fbgemm:
        layer._fbgemm = None
    elif layer._fbgemm is None:
        pytest.skip("this PyTorch has no FBGEMM")
    calls = {"onednn": [], "fbgemm": []}
    real = {"onednn": torch.ops.onednn.qlinear_pointwise,
            "fbgemm": torch.ops.quantized.linear_dynamic}  # fmt: skip
    record = {"onednn": lambda a: a[0].shape[0], "fbgemm": lambda a: (a[0].shape[0], a[2])}
    for name, namespace, op in (("onednn", torch.ops.onednn, "qlinear_pointwise"),
                                ("fbgemm", torch.ops.quantized, "linear_dynamic")):  # fmt: skip
        monkeypatch.setattr(
            namespace, op, lambda *a, n=name: calls[n].append(record[n](a)) or real[n](*a),
            raising=False,
        )  # fmt: skip
    monkeypatch.setattr(int8, "exact_int8_product", lambda: exact)
    monkeypatch.setenv("ATTNKIT_INT8_WITHOUT_VNNI", "1" if seven else "0")
    with torch.no_grad(), _onednn_from(33 * 1_024_000):
        for rows in (1, 32, 33, 64):
            kernel = layer.kernel(rows)
            layer(torch.randn(rows, 256))
            if exact:
                assert kernel == ("onednn" if rows > 32 else "fbgemm" if fbgemm else "float")
            else:
                assert kernel == ("fbgemm7" if fbgemm and seven else "float")
    assert calls["onednn"] == ([33, 64] if exact else [])
    if exact:
        assert calls["fbgemm"] == ([(1, False), (32, False)] if fbgemm else [])
    else:
        assert calls["fbgemm"] == ([(r, True) for r in (1, 32, 33, 64)] if fbgemm and seven else [])


def test_exact_int8_product_follows_the_libraries_isa_caps(monkeypatch):
    """VNNI hardware, but FBGEMM or oneDNN held to older kernels: not exact."""
    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: True, raising=False)
    for env, exact in ((None, True), (("FBGEMM_ENABLE_INSTRUCTIONS", "AVX2"), False),
                       (("FBGEMM_ENABLE_INSTRUCTIONS", "AVX512_E1"), True),
                       (("ONEDNN_MAX_CPU_ISA", "AVX512_CORE"), False),
                       (("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_VNNI"), True)):  # fmt: skip
        for name in ("FBGEMM_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
            monkeypatch.delenv(name, raising=False)
        if env:
            monkeypatch.setenv(*env)
        int8.exact_int8_product.cache_clear()
        assert int8.exact_int8_product() is exact, env
    int8.exact_int8_product.cache_clear()


@settings(max_examples=40, deadline=None)
@given(
    rows=st.sampled_from([(1,), (3,), (2, 5), (64,)]),
    d_in=st.integers(1, 48),
    d_out=st.integers(1, 48),
    bias=st.booleans(),
    shift=st.floats(-2, 2),
    kernel=st.sampled_from(["fbgemm", "onednn"]),
)
def test_each_output_is_within_the_rounding_bound(rows, d_in, d_out, bias, shift, kernel):
    torch.manual_seed(d_in * 100 + d_out)
    linear = nn.Linear(d_in, d_out, bias=bias)
    layer = Int8Linear(linear)
    x = torch.randn(*rows, d_in) + shift
    onednn_from = 0 if kernel == "onednn" or layer._fbgemm is None else 1 << 62
    with torch.no_grad(), _int8_product_from(0), _onednn_from(onednn_from):
        assert layer.kernel(x.numel() // d_in) == kernel or layer._fbgemm is None
        got = layer(x).double()
        small = F.linear(
            x.double(), layer.weight.double(), None if not bias else layer.bias.double()
        )
    with torch.no_grad(), _int8_product_from(1 << 62):  # the float32 product, rounded weights
        torch.testing.assert_close(layer(x).double(), small, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        exact = F.linear(
            x.double(), linear.weight.double(), None if not bias else linear.bias.double()
        )
    assert got.shape == (*rows, d_out)
    assert not torch.allclose(got, small, rtol=0, atol=0) or x.abs().max() == 0 or d_in == 1
    error = (got - exact).reshape(-1, d_out).abs()
    assert (error <= _bound(layer, x, linear.weight.detach())).all()


def test_seven_bit_inputs_stay_within_their_rounding_bound(monkeypatch):
    """Without an exact 8-bit product, FBGEMM's 7-bit inputs: every output within the
    bound of a step twice as coarse (the row's largest |value| / 63), and not the 8-bit
    result."""
    monkeypatch.setenv("ATTNKIT_INT8_WITHOUT_VNNI", "1")
    torch.manual_seed(0)
    linear = nn.Linear(96, 40)
    layer = Int8Linear(linear)
    if layer._fbgemm is None:
        pytest.skip("this PyTorch has no FBGEMM")
    w = linear.weight.detach()
    for rows in (1, 6):
        x = torch.randn(rows, 96) * torch.logspace(-2, 2, rows)[:, None]
        with torch.no_grad():
            monkeypatch.setattr(int8, "exact_int8_product", lambda: False)
            assert layer.kernel(rows) == "fbgemm7"
            got = layer(x).double()
            monkeypatch.setattr(int8, "exact_int8_product", lambda: True)
            eight = layer(x).double()
            exact = F.linear(x.double(), w.double(), linear.bias.double())
        assert ((got - exact).abs() <= _bound(layer, x, w, levels=63)).all()
        assert not torch.equal(got, eight)


def test_each_row_is_quantized_on_its_own():
    """A row of huge (or non-finite) values does not spoil the others' results: oneDNN's
    product gives them bit for bit, FBGEMM's (one range for the call, over rows divided by
    their largest values) within each row's own rounding bound; a NaN or inf row gives NaN."""
    torch.manual_seed(0)
    linear = nn.Linear(64, 32)
    layer = Int8Linear(linear)
    x = torch.randn(8, 64)
    x_big = torch.cat([torch.full((1, 64), 1e4), x[1:]])
    x_nan = torch.cat([torch.full((1, 64), float("nan")), x[1:]])
    x_inf = x.clone()
    x_inf[0, 3] = float("inf")
    with torch.no_grad(), _int8_product_from(0), _onednn_from(0):
        alone = layer(x[1:])
        torch.testing.assert_close(layer(x_big)[1:], alone, rtol=0, atol=0)
        out = layer(x_nan)
        assert out[0].isnan().all() and torch.equal(out[1:], alone)
    if layer._fbgemm is None:
        return
    with torch.no_grad(), _int8_product_from(0):
        assert layer.kernel(8) == "fbgemm"
        exact = F.linear(x[1:].double(), linear.weight.double(), linear.bias.double())
        bound = _bound(layer, x[1:], linear.weight.detach())
        for spoiled in (x_big, x_nan, x_inf):
            out = layer(spoiled)
            assert ((out[1:].double() - exact).abs() <= bound).all()
            assert out[0].isnan().all() or spoiled is x_big


def test_loading_a_state_dict_updates_every_derived_weight():
    a, b = Int8Linear(nn.Linear(256, 4000)), Int8Linear(nn.Linear(256, 4000))
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(b.weight, a.weight, rtol=0, atol=0)
    x = torch.randn(40, 256)
    with torch.no_grad(), _onednn_from(40 * 1_024_000):
        for rows in (1, 40):  # FBGEMM's product and oneDNN's
            torch.testing.assert_close(b(x[:rows]), a(x[:rows]), rtol=0, atol=0)


def test_weights_are_rounded_per_output_row():
    linear = nn.Linear(6, 3)
    with torch.no_grad():
        linear.weight.copy_(
            torch.tensor([[1.0, -0.5, 0.25, 0, 0, 0.1]] * 3) * torch.tensor([[1.0], [4.0], [0.01]])
        )
    layer = Int8Linear(linear)
    torch.testing.assert_close(layer.scale, torch.tensor([1.0, 4.0, 0.01]) / 127)
    assert layer.weight_int8.dtype == torch.int8 and int(layer.weight_int8.abs().max()) == 127
    assert layer.weight_int8[:, 0].tolist() == [127, 127, 127]
    torch.testing.assert_close(layer.weight, layer.weight_int8.float() * layer.scale[:, None])
    assert sorted(layer.state_dict()) == ["bias", "scale", "weight_int8"]
    zero = Int8Linear(nn.Linear(4, 2, bias=False))
    with torch.no_grad():
        assert zero(torch.zeros(3, 4)).abs().max() == 0  # an all-zero input quantizes exactly
        assert zero(torch.zeros(0, 4)).shape == (0, 2)


def test_first_rows_is_the_layer_of_its_first_output_rows():
    """The decoder step's cross-attention query: the first D rows of W_qkv, in int8."""
    layer = Int8Linear(nn.Linear(16, 48))
    head = layer.first_rows(16)
    assert head is layer.first_rows(16) and head.out_features == 16
    assert torch.equal(head.weight_int8, layer.weight_int8[:16])
    torch.testing.assert_close(head.scale, layer.scale[:16], rtol=0, atol=0)
    x = torch.randn(5, 16)
    with torch.no_grad(), _int8_product_from(0):
        torch.testing.assert_close(head(x), layer(x)[:, :16], rtol=1e-6, atol=1e-6)
    block = layer.row_block(16, 48)  # a memory's k, v rows (MultiHeadAttention._linear)
    assert block is layer.row_block(16, 48) and block.out_features == 32
    with torch.no_grad(), _int8_product_from(0):
        torch.testing.assert_close(block(x), layer(x)[:, 16:], rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"start must be an int in \[0, 47\], got 48"):
        layer.row_block(48, 48)
    layer.load_state_dict(Int8Linear(nn.Linear(16, 48)).state_dict())
    assert layer.first_rows(16) is not head  # made again from the loaded weights
    for bad in (0, 49):
        with pytest.raises(ValueError, match=rf"rows must be an int in \[1, 48\], got {bad}"):
            layer.first_rows(bad)


def test_copies_and_pickles_work_and_give_the_same_outputs():
    layer = Int8Linear(nn.Linear(8, 5))
    x = torch.randn(4, 8)
    with torch.no_grad():
        want = layer(x)
        for other in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
            torch.testing.assert_close(other(x), want, rtol=0, atol=0)


def test_errors_name_what_is_wrong():
    layer = Int8Linear(nn.Linear(8, 5))
    with pytest.raises(ValueError, match=r"float32 CPU inputs, got torch\.float64"):
        layer(torch.randn(2, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"input must be \(\.\.\., 8\), got \(2, 7\)"):
        layer(torch.randn(2, 7))
    with pytest.raises(TypeError, match=r"linear must be a torch\.nn\.Linear, got Conv1d"):
        Int8Linear(nn.Conv1d(2, 2, 1))
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module, got str"):
        quantize_int8("model")
    with pytest.raises(ValueError, match=r"model must be on the CPU for int8, got .*'meta'"):
        quantize_int8(nn.Sequential(nn.Linear(2, 2)).to("meta"))
    with pytest.raises(ValueError, match="int8 runs on the CPU: device must be 'cpu', got 'meta'"):
        Translator.load("no-such-folder", "meta", int8=True)  # refused before loading


def test_quantize_int8_replaces_every_linear_layer_prepacked_ones_included():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), PrepackedLinear(nn.Linear(8, 3)))
    model.train()
    assert quantize_int8(model) == 2
    assert [type(m).__name__ for m in model] == ["Int8Linear", "ReLU", "Int8Linear"]
    assert not model.training


@pytest.fixture(scope="module")
def checkpoint(subword_checkpoint) -> Path:
    """A tiny subword Transformer trained for a few seconds (``SUBWORD_TRAIN``)."""
    return subword_checkpoint


def test_a_trained_translator_in_int8_predicts_the_same_next_tokens(checkpoint, real_format_file):
    """Teacher-forced on float32's own translations, the int8 model (int8 products at
    every call) picks the same next token at nearly every position (whole sentences change
    more: one different token and the rest follows; on this weakly trained model 44 of
    60 stayed the same)."""
    float32 = Translator.load(checkpoint)
    quantized = Translator.load(checkpoint, int8=True)
    assert any(isinstance(m, Int8Linear) for m in quantized.model.modules())
    lines = real_format_file(300, seed=1).read_text(encoding="utf-8").splitlines()
    sentences = [line.split("\t")[0] for line in lines[:60]]
    hyps = float32.translate(sentences)
    data, vocab = float32.data, float32.data.tgt_vocab
    src, src_len = data.encode_source(sentences)
    width = max(len(h.ids) for h in hyps) + 1
    tgt = torch.full((len(hyps), width), vocab["<eos>"])
    for i, h in enumerate(hyps):
        tgt[i, : len(h.ids) + 1] = torch.tensor([vocab["<bos>"], *h.ids])
    valid = torch.arange(width)[None] <= torch.tensor([len(h.ids) for h in hyps])[:, None]
    with torch.no_grad(), _int8_product_from(0):  # this small model: force int8 products
        a = float32.model(src, tgt, src_len)[0].argmax(-1)
        b = quantized.model(src, tgt, src_len)[0].argmax(-1)
    agree = float((a == b)[valid].float().mean())
    assert agree >= 0.95, f"{agree:.1%} of next tokens agree"
    with _int8_product_from(0):
        int8_hyps = quantized.translate(sentences)
    same = sum(x.ids == y.ids for x, y in zip(hyps, int8_hyps, strict=True))
    assert same >= len(sentences) // 2


def test_the_commands_take_int8(checkpoint, capsys):
    assert main(["translate", "run", "--checkpoint", str(checkpoint), "--int8", "i lost ."]) == 0
    assert capsys.readouterr().out.strip()
    argv = ["translate", "eval", "--checkpoint", str(checkpoint), "--int8", "--limit", "10"]
    assert main([*argv, "--examples", "0"]) == 0
    assert ", int8)" in capsys.readouterr().out


def test_rows_is_the_layer_of_the_chosen_output_rows_without_rounding_again():
    """A vocabulary shortlist keeps the output layer's rows of its words, in their order."""
    layer = Int8Linear(nn.Linear(16, 40))
    ids = torch.tensor([39, 0, 7, 8, 21])
    part = layer.rows(ids)
    assert part.out_features == 5 and part.in_features == 16
    assert torch.equal(part.weight_int8, layer.weight_int8[ids])
    assert torch.equal(part.scale, layer.scale[ids]) and torch.equal(part.bias, layer.bias[ids])
    x = torch.randn(6, 16)
    with torch.no_grad(), _int8_product_from(0):
        torch.testing.assert_close(part(x), layer(x)[:, ids], rtol=1e-6, atol=1e-6)
    with pytest.raises(
        ValueError, match=r"ids must be output rows in \[0, 40\), got ids in \[3, 40\]"
    ):
        layer.rows(torch.tensor([3, 40]))
    with pytest.raises(TypeError, match=r"ids must be a \(K,\) long tensor, got torch\.int32"):
        layer.rows(torch.tensor([1, 2], dtype=torch.int32))
    with pytest.raises(TypeError, match=r"ids must be a \(K,\) long tensor, got list"):
        layer.rows([1, 2])
    with pytest.raises(TypeError, match=r"ids must be a \(K,\) long tensor, got \(1, 2\)"):
        layer.rows(torch.tensor([[1, 2]]))
    with pytest.raises(TypeError, match=r"weight must be a \(D_out, D_in\) float tensor, got "):
        Int8Linear.of_weight(torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match=r"bias must be a \(3,\) tensor or None, got \(4,\)"):
        Int8Linear.of_weight(torch.ones(3, 4), torch.ones(4))


def test_a_tied_output_layer_runs_in_int8_and_training_in_float():
    """DecoderLM's logits h Eᵀ by its embedding: int8 in inference (within the rounding
    bound of E's int8 rows), F.linear on the float table in training."""
    from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig

    torch.manual_seed(0)
    model = DecoderLM(DecoderLMConfig(vocab_size=300, d_model=32, num_heads=4, num_layers=1,
                                      context_length=16)).eval()  # fmt: skip
    ids = torch.randint(0, 300, (3, 7))
    with torch.no_grad():
        want = model(ids)
    replaced = quantize_int8(model)
    assert isinstance(model.output_layout, int8.Int8WeightLayout)
    assert replaced == 1 + sum(isinstance(m, Int8Linear) for m in model.modules())
    h = torch.randn(5, 32)
    E = model.embedding.weight
    with torch.no_grad(), _int8_product_from(0):
        got = model._logits(h)
        layer = model.output_layout._layer
        assert torch.equal(layer.weight_int8, Int8Linear.of_weight(E).weight_int8)
        assert ((got.double() - h.double() @ E.double().t()).abs() <= _bound(layer, h, E)).all()
        logits = model(ids)
    # the whole model: every product rounded, the logits within 3% of float32's (norm)
    assert float((logits - want).norm() / want.norm()) < 0.03
    model.train()
    torch.testing.assert_close(model._logits(h), F.linear(h, E), rtol=0, atol=0)
    with torch.no_grad():
        E.mul_(2)  # a changed table: its int8 layer is made again
        model.eval()
        torch.testing.assert_close(
            model._logits(h), F.linear(h, E), rtol=0.05, atol=0.05 * float(h.abs().max())
        )


def test_int8_keeps_a_translators_memory_caches_in_bf16_on_request_where_the_cpu_computes_in_it(
    monkeypatch,
):
    """int8_cache_dtype: bf16 with ATTNKIT_INT8_CACHE=bfloat16 on AVX-512 BF16 or AMX,
    float32 (None) without the CPU's bf16 or by default; quantize_int8 hands it to the
    decoder's memory caches."""
    cpu = torch.cpu
    for bf16, amx, env, expected in [
        (True, False, "bfloat16", torch.bfloat16),
        (False, True, "bf16", torch.bfloat16),
        (False, False, "bfloat16", None),
        (True, True, None, None),
        (True, True, "float32", None),
    ]:
        monkeypatch.setattr(cpu, "_is_avx512_bf16_supported", lambda v=bf16: v, raising=False)
        monkeypatch.setattr(cpu, "_is_amx_tile_supported", lambda v=amx: v, raising=False)
        if env is None:
            monkeypatch.delenv("ATTNKIT_INT8_CACHE", raising=False)
        else:
            monkeypatch.setenv("ATTNKIT_INT8_CACHE", env)
        assert int8.int8_cache_dtype() is expected, (bf16, amx, env)
        torch.manual_seed(0)
        model = build_transformer(TransformerConfig(d_model=16, num_heads=2, d_ff=32), 9, 9)
        quantize_int8(model)
        assert model.decoder.memory_cache_dtype is expected
