"""Attention's cost (encdec/cost.py, chapter 13): the tiled attention with a running softmax gives the
full attention's output for any block size, large scores included; the score grid's bytes."""

from __future__ import annotations

import pytest
import torch

from encdec import cost


@pytest.mark.parametrize("block", [1, 3, 16, 64])
def test_tiled_attention_equals_the_full_grid(block):
    g = torch.Generator().manual_seed(block)
    q, k, v = torch.randn(3, 2, 4, 37, 8, generator=g, dtype=torch.float64).unbind(0)  # (N, H, L, Dh)
    assert torch.allclose(cost.tiled_attention(q, k, v, block), cost.full_attention(q, k, v), atol=1e-12)


def test_the_running_maximum_keeps_large_scores_finite():
    q = torch.full((1, 5, 4), 30.0)  # scores of about 1800: exp overflows without the running maximum
    k, v = torch.randn(1, 9, 4) * 30, torch.randn(1, 9, 4)
    out = cost.tiled_attention(q, k, v, block=2)
    assert torch.isfinite(out).all() and torch.allclose(out, cost.full_attention(q, k, v), atol=1e-5)


def test_score_bytes():
    assert cost.score_bytes(1024, 4) == 4 * 1024 * 1024 * 4
    assert cost.score_bytes(2048, 4) == 4 * cost.score_bytes(1024, 4)


def test_shape_check():
    cost._check_shapes()
