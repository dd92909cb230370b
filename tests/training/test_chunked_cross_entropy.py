"""chunked_cross_entropy: F.cross_entropy with label smoothing, row chunk by row chunk."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.training.chunked_cross_entropy import chunked_cross_entropy
from attnkit.training.losses import masked_cross_entropy


def _reference(logits, target, smoothing):
    return F.cross_entropy(logits, target, reduction="none", label_smoothing=smoothing)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 9),
    v=st.integers(2, 7),
    chunk=st.integers(1, 10),
    smoothing=st.sampled_from([0.0, 0.1, 0.5, 0.9]),
    seed=st.integers(0, 2**16),
)
def test_values_and_gradients_equal_f_cross_entropy_float64(n, v, chunk, smoothing, seed):
    g = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(n, v, generator=g, dtype=torch.float64)).requires_grad_()
    target = torch.randint(0, v, (n,), generator=g)
    weights = torch.rand(n, generator=g, dtype=torch.float64)
    ours = chunked_cross_entropy(logits, target, smoothing, chunk_rows=chunk)
    (grad,) = torch.autograd.grad((ours * weights).sum(), logits)
    ref = _reference(logits, target, smoothing)
    (ref_grad,) = torch.autograd.grad((ref * weights).sum(), logits)
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-12, atol=1e-12)


def test_gradcheck():
    logits = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 3, 1, 1, 2])
    assert torch.autograd.gradcheck(lambda x: chunked_cross_entropy(x, target, 0.2, 2), (logits,))


def test_bfloat16_logits_float32_loss_gradient_in_bfloat16():
    torch.manual_seed(0)
    logits32 = 4 * torch.randn(300, 4000)
    target = torch.randint(0, 4000, (300,))
    logits = logits32.to(torch.bfloat16).requires_grad_()
    loss = chunked_cross_entropy(logits, target, 0.1)
    loss.sum().backward()
    exact = logits.detach().double().requires_grad_()
    ref = _reference(exact, target, 0.1)
    ref.sum().backward()
    assert loss.dtype == torch.float32 and logits.grad.dtype == torch.bfloat16
    torch.testing.assert_close(loss.double(), ref.detach(), rtol=1e-6, atol=1e-5)
    # the gradient rounded once to bfloat16 (8 bits of mantissa)
    torch.testing.assert_close(logits.grad.double(), exact.grad, rtol=2**-8, atol=1e-6)


def test_masked_cross_entropy_takes_it_for_bfloat16_on_cpu():
    torch.manual_seed(1)
    logits = torch.randn(3, 5, 50)
    label = torch.randint(0, 50, (3, 5))
    valid = torch.tensor([5, 2, 0])
    low = masked_cross_entropy(logits.to(torch.bfloat16), label, valid, "none", 0.1)
    ref = masked_cross_entropy(logits.to(torch.bfloat16).float(), label, valid, "none", 0.1)
    assert low.dtype == torch.float32
    torch.testing.assert_close(low, ref, rtol=1e-6, atol=1e-6)
    assert low[1, 2:].eq(0).all() and low[2].eq(0).all()
    total = masked_cross_entropy(logits.to(torch.bfloat16), label, valid, "mean", 0.1)
    torch.testing.assert_close(total, ref.sum() / 7, rtol=1e-6, atol=1e-6)


def test_bad_input_names_the_argument():
    x, t = torch.zeros(2, 3), torch.zeros(2, dtype=torch.long)
    with pytest.raises(TypeError, match="logits must be a floating"):
        chunked_cross_entropy(torch.zeros(2, 3, dtype=torch.long), t)
    with pytest.raises(ValueError, match=r"logits must be \(N, V\), got shape \(6,\)"):
        chunked_cross_entropy(torch.zeros(6), t)
    with pytest.raises(TypeError, match="target must be a long"):
        chunked_cross_entropy(x, t.int())
    with pytest.raises(ValueError, match=r"target must have shape \(N,\) = \(2,\), got \(3,\)"):
        chunked_cross_entropy(x, torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\), got 1.5"):
        chunked_cross_entropy(x, t, 1.5)
    with pytest.raises(TypeError, match="label_smoothing must be a float in"):
        chunked_cross_entropy(x, t, "0.1")
    with pytest.raises(ValueError, match="chunk_rows must be a positive int, got 0"):
        chunked_cross_entropy(x, t, 0.0, 0)
    with pytest.raises(TypeError, match=r"chunk_rows must be a positive int, got 2.5 \(float\)"):
        chunked_cross_entropy(x, t, 0.0, 2.5)
