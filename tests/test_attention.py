"""Masks and attention: the ideas of lesson 11, as assertions that can fail."""

import math

import pytest
import torch

from encdec.attention import (
    KVCache,
    MultiHeadAttention,
    _check_shapes,
    get_subsequent_mask,
    masked_softmax,
    scaled_dot_product_attention,
)


def test_module_shape_check_runs():
    _check_shapes()


def test_subsequent_mask_is_the_lesson_table():
    mask = get_subsequent_mask(torch.zeros(3, 5, dtype=torch.long))
    assert mask.shape == (3, 5, 5) and mask.dtype == torch.bool
    for i in range(5):
        for j in range(5):
            assert mask[0, i, j].item() == (j > i)  # True = reader i may not read source j


def test_mask_before_softmax_renormalises_and_softmax_then_zero_does_not():
    torch.manual_seed(0)
    scores = torch.randn(2, 5, 5) * 0.5  # moderate scores: every future keeps real mass
    mask = get_subsequent_mask(torch.zeros(2, 5, dtype=torch.long))
    before = masked_softmax(scores, mask)
    assert torch.allclose(before.sum(-1), torch.ones(2, 5), atol=1e-6)
    assert before.masked_select(mask).abs().max().item() == 0.0
    after = torch.softmax(scores, -1).masked_fill(mask, 0.0)
    row_sums = after.sum(-1)
    assert torch.allclose(row_sums[:, -1], torch.ones(2))  # the last row has no future
    assert (row_sums[:, :-1] < 1 - 1e-3).all()  # every other row lost its future mass
    # the allowed weights are proportionally too small, not merely renormalisable noise
    assert torch.allclose(after / row_sums[..., None], before, atol=1e-6)


def test_scaled_dot_product_attention_matches_the_formula():
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 9, 8), torch.randn(2, 9, 4)
    out, w = scaled_dot_product_attention(q, k, v)
    expected_w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(8), -1)
    assert w.shape == (2, 5, 9)
    assert torch.allclose(w, expected_w, atol=1e-6)
    assert torch.allclose(out, expected_w @ v, atol=1e-6)


def test_cross_attention_weights_have_answer_rows_and_question_columns():
    mha = MultiHeadAttention(4, 16).eval()
    dec, enc = torch.randn(3, 5, 16), torch.randn(3, 9, 16)
    out = mha(dec, enc, enc)
    assert out.shape == (3, 5, 16)
    assert mha.last_attention.shape == (3, 4, 5, 9)  # (N, H, Ka, Kq)
    reversed_out = mha(enc, dec, dec)  # Q from the encoder: still computable, other meaning
    assert reversed_out.shape == (3, 9, 16) and mha.last_attention.shape == (3, 4, 9, 5)


def test_attention_errors_name_both_shapes():
    mha = MultiHeadAttention(2, 8)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"\(2, 5\).*expected \(N, L, M\)"):
        mha(torch.randn(2, 5), x, x)
    with pytest.raises(ValueError, match=r"batch sizes differ.*\(2, 5, 8\).*\(3, 5, 8\)"):
        mha(x, torch.randn(3, 5, 8), torch.randn(3, 5, 8))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 4, 4\).*\(2, 5, 5\)"):
        mha(x, x, x, torch.zeros(2, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="boolean"):
        mha(x, x, x, torch.zeros(2, 5, 5))
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(3, 8)
    with pytest.raises(ValueError, match=r"\(N, K\)"):
        get_subsequent_mask(torch.zeros(5))


def test_kv_cache_appends_along_time():
    cache = KVCache()
    k1, v1 = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)
    cache.update(k1, v1)
    k, v = cache.update(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))
    assert len(cache) == 4 and k.shape == (1, 2, 4, 4) and torch.equal(k[:, :, :3], k1)


def test_static_cache_projects_memory_once():
    mha = MultiHeadAttention(2, 8).eval()
    memory = torch.randn(1, 9, 8)
    cache = KVCache(static=True)
    first = mha(torch.randn(1, 1, 8), memory, memory, cache=cache)
    k_first = cache.k
    q = torch.randn(1, 1, 8)
    with_cache = mha(q, torch.zeros_like(memory), torch.zeros_like(memory), cache=cache)
    assert cache.k is k_first  # not re-projected
    assert torch.allclose(with_cache, mha(q, memory, memory), atol=1e-6)
    assert first.shape == (1, 1, 8)
