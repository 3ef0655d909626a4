"""Attention's cost (chapter 13): the scores of one layer and head are a (T, T) grid, so their time and
memory grow as T squared; ``tiled_attention`` computes the same output a block of keys at a time,
keeping a running maximum and a running sum of the softmax (the idea of FlashAttention), so the grid
never exists whole. The tiling changes where the work is done, not its result.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .attention import scaled_dot_product_attention


def full_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """softmax(q k^T / sqrt(Dh)) v with the whole (Lq, Lk) score grid, the package's own attention:
    (..., Lq, Dh)."""
    return scaled_dot_product_attention(q, k, v)[0]


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, block: int) -> Tensor:
    """The same output, ``block`` keys at a time: each block's scores are (..., Lq, block), and the
    softmax over all keys is assembled from a running maximum ``m``, a running sum ``s`` of exp(score
    - m) and a running weighted sum ``o`` of the values, each rescaled when the maximum grows."""
    *lead, Lq, Dh = q.shape
    m = torch.full((*lead, Lq, 1), -math.inf, dtype=q.dtype)  # (..., Lq, 1): the largest score so far
    s = torch.zeros((*lead, Lq, 1), dtype=q.dtype)  # (..., Lq, 1): sum of exp(score - m)
    o = torch.zeros((*lead, Lq, v.shape[-1]), dtype=q.dtype)  # (..., Lq, Dh): sum of exp(score - m) * value
    for start in range(0, k.shape[-2], block):
        kb, vb = k[..., start : start + block, :], v[..., start : start + block, :]  # (..., B, Dh)
        scores = q @ kb.transpose(-2, -1) / math.sqrt(Dh)  # (..., Lq, B): one tile, never the whole grid
        m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (..., Lq, 1)
        rescale = torch.exp(m - m_new)  # what the old sums were measured against, moved to the new maximum
        p = torch.exp(scores - m_new)  # (..., Lq, B)
        s = s * rescale + p.sum(dim=-1, keepdim=True)
        o = o * rescale + p @ vb  # (..., Lq, B) x (..., B, Dh) -> (..., Lq, Dh)
        m = m_new
    return o / s  # (..., Lq, Dh)


def score_bytes(T: int, heads: int, itemsize: int = 4) -> int:
    """Bytes of one layer's attention scores for a sequence of T positions: heads x T x T numbers."""
    return heads * T * T * itemsize


def _check_shapes() -> None:
    q, k, v = torch.randn(3, 2, 4, 10, 8, dtype=torch.float64).unbind(0)  # each (N, H, L, Dh)
    assert tiled_attention(q, k, v, block=3).shape == (2, 4, 10, 8)
    assert torch.allclose(tiled_attention(q, k, v, block=3), full_attention(q, k, v))


if __name__ == "__main__":
    _check_shapes()
