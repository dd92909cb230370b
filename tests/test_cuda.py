"""CUDA paths (skipped without a GPU): fused kernels, bf16 autocast, cached decoding."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention import MultiHeadAttention, masked_softmax
from attnkit.models.transformer import TransformerConfig, build_transformer

pytestmark = pytest.mark.cuda


def test_fully_masked_rows_are_zero_on_every_cuda_backend():
    mha = MultiHeadAttention(64, 4).cuda().eval()
    X = torch.randn(3, 16, 64, device="cuda")
    lens = torch.tensor([16, 5, 0], device="cuda")
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
            fast = mha(X, X, X, lens)
            exact, _ = mha(X, X, X, lens, need_weights=True)
        assert torch.isfinite(fast).all() and torch.isfinite(exact).all()
        assert (fast[2] == mha.W_o(torch.zeros(1, 64, device="cuda"))[0].to(fast.dtype)).all()
        tol = 1e-5 if dtype == torch.float32 else 3e-2
        torch.testing.assert_close(fast.float(), exact.float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masked_softmax_half_precision_on_cuda(dtype):
    X = torch.randn(4, 8, 32, device="cuda", dtype=dtype) * 8
    lens = torch.tensor([0, 1, 16, 32], device="cuda")
    W = masked_softmax(X, lens)
    assert torch.isfinite(W).all() and (W[0] == 0).all()
    torch.testing.assert_close(
        W[1:].float().sum(-1), torch.ones(3, 8, device="cuda"), atol=1e-2, rtol=0
    )


def test_flash_backend_without_weights_matches_exact():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mha = MultiHeadAttention(128, 8).cuda().eval().to(torch.bfloat16)
    X = torch.randn(2, 256, 128, device="cuda", dtype=torch.bfloat16)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        fast = mha(X, X, X, causal=False)
    exact, _ = mha(X, X, X, need_weights=True)
    torch.testing.assert_close(fast.float(), exact.float(), atol=3e-2, rtol=3e-2)


def test_incremental_decoding_on_cuda_equals_full_pass():
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.0)
    model = build_transformer(cfg, 20, 30).cuda().eval()
    src = torch.randint(0, 20, (4, 9), device="cuda")
    src_len = torch.tensor([9, 5, 3, 1], device="cuda")
    tgt = torch.randint(0, 30, (4, 6), device="cuda")
    enc = model.encoder(src, src_len)
    full, _ = model.decoder(tgt, model.decoder.init_state(enc, src_len))
    state, steps = model.decoder.init_state(enc, src_len), []
    for t in range(6):
        out, state = model.decoder(tgt[:, t : t + 1], state)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-4, rtol=1e-4)
