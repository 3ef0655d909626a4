"""Attention: the causal mask, scaled dot-product attention, multi-head attention, KV cache.

Taught in chapter 11 (masked self-attention and cross-attention: who provides Q, K and V)
and chapter 13 (the KV cache that decoding appends to; rotary positions, ``rope_rotate``, read
from the stale-position lab).

Letters: ``N`` batch, ``H`` heads, ``Lq`` query positions, ``Lk`` key positions, ``M`` model
width, ``Dh = M / H`` head width. A mask is boolean and True means *forbidden*.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def get_subsequent_mask(seq: Tensor) -> Tensor:
    """Causal mask for a batch of token ids ``seq`` (N, K): (N, K, K), True above the diagonal.

    Row i is the reader, column j the source: j > i is reader i's future.
    """
    if seq.dim() != 2:
        raise ValueError(f"get_subsequent_mask expects token ids of shape (N, K), got {tuple(seq.shape)}")
    N, K = seq.shape
    mask = torch.triu(torch.ones((K, K), dtype=torch.bool, device=seq.device), diagonal=1)  # (K, K)
    return mask.expand(N, K, K)  # (N, K, K)


def check_mask(mask: Tensor, scores_shape: tuple[int, ...]) -> None:
    """Raise ValueError unless ``mask`` is boolean and fits scores (N, Lq, Lk) or (N, H, Lq, Lk)."""
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = forbidden), got dtype {mask.dtype}")
    N, Lq, Lk = scores_shape[0], scores_shape[-2], scores_shape[-1]
    allowed = {(N, Lq, Lk), (1, Lq, Lk), (Lq, Lk)}
    if tuple(mask.shape) not in allowed:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not fit attention scores of shape "
            f"(N, Lq, Lk) = {(N, Lq, Lk)}: expected {(N, Lq, Lk)}, {(1, Lq, Lk)} or {(Lq, Lk)}"
        )


def masked_softmax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last axis after forbidden scores are set to the most negative float.

    Mask before softmax: a future score must leave the denominator, so the allowed weights
    renormalise and every row still sums to 1.
    """
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1)


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(D)) V over the last two axes; returns (output, weights).

    query (..., Lq, D), key (..., Lk, D), value (..., Lk, Dv) -> output (..., Lq, Dv) and
    weights (..., Lq, Lk). ``mask`` (N, Lq, Lk) broadcasts over a head axis if there is one.
    """
    D = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(D)  # (..., Lq, D) x (..., D, Lk) -> (..., Lq, Lk)
    if mask is not None:
        check_mask(mask, tuple(scores.shape))
        if scores.dim() == 4 and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (N, Lq, Lk) -> (N, 1, Lq, Lk): one mask for every head
    weights = masked_softmax(scores, mask)  # (..., Lq, Lk)
    return weights @ value, weights  # (..., Lq, Lk) x (..., Lk, Dv) -> (..., Lq, Dv)


def rope_rotate(x: Tensor, start: int = 0, base: float = 10000.0) -> Tensor:
    """Rotary position embedding (RoPE): rotate each feature pair (2i, 2i+1) of row p by p / base^(2i/Dh).

    x (..., L, Dh) -> (..., L, Dh), its rows at positions start .. start + L - 1. Rotating a query at
    m and a key at n leaves their dot product a function of m - n alone (a rotation by m, then the
    transpose of one by n, is one by m - n), so attention sees offsets, never absolute positions.
    """
    L, Dh = x.shape[-2], x.shape[-1]
    if Dh % 2:
        raise ValueError(f"rope_rotate needs an even head width to pair its features, got Dh={Dh}")
    pos = torch.arange(start, start + L, dtype=torch.float32, device=x.device)  # (L,)
    freq = base ** (-torch.arange(0, Dh, 2, dtype=torch.float32, device=x.device) / Dh)  # (Dh/2,)
    angles = pos[:, None] * freq  # (L, 1) x (Dh/2,) -> (L, Dh/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (L, Dh/2) each
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., L, Dh/2) each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., L, Dh/2, 2)
    return rotated.flatten(-2)  # (..., L, Dh/2, 2) -> (..., L, Dh)


class KVCache:
    """Keys and values one attention layer has projected so far (chapter 13).

    Self-attention appends the new positions at each decoding step. Cross-attention uses a
    ``static`` cache: the encoder memory is projected once and reused at every step.
    """

    def __init__(self, static: bool = False, start: int = 0):
        self.static = static
        self.start = start  # absolute position of the first row (RoPE rotates by it; nothing else reads it)
        self.k: Tensor | None = None  # (N, H, T, Dh)
        self.v: Tensor | None = None  # (N, H, T, Dh)

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Append (N, H, t, Dh) keys and values along the time axis; return all of them."""
        if self.k is None:
            self.k, self.v = k_new, v_new
        else:
            self.k = torch.cat([self.k, k_new], dim=2)  # (N, H, T, Dh) + (N, H, t, Dh) -> (N, H, T+t, Dh)
            self.v = torch.cat([self.v, v_new], dim=2)
        return self.k, self.v


class MultiHeadAttention(nn.Module):
    """Multi-head attention with all heads in one batched matmul (no loop over heads).

    ``forward(query, key, value, mask=None)``: the first argument is the Q source, the other
    two the K and V sources. In the decoder, ``attention_self(x, x, x, mask)`` and
    ``attention_cross(x, memory, memory)``. The last attention weights (N, H, Lq, Lk) are kept
    in ``last_attention`` for plotting. With ``rope`` set (``Transformer`` sets it on self-attention
    when ``position_encoding="rope"``) queries and keys are rotated by their positions, counted
    from the cache's end, so a decode step rotates only its one new query and key; the cache keeps
    rotated keys.
    """

    def __init__(self, num_heads: int, emb_dim: int):
        super().__init__()
        if emb_dim % num_heads != 0:
            raise ValueError(f"emb_dim={emb_dim} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.emb_dim = emb_dim
        self.q_proj = nn.Linear(emb_dim, emb_dim)
        self.k_proj = nn.Linear(emb_dim, emb_dim)
        self.v_proj = nn.Linear(emb_dim, emb_dim)
        self.out_proj = nn.Linear(emb_dim, emb_dim)
        self.rope = False  # rotate q and k by position (no parameters: a checkpoint loads either way)
        self.last_attention: Tensor | None = None

    def _split_heads(self, x: Tensor) -> Tensor:
        N, L, M = x.shape
        return x.view(N, L, self.num_heads, M // self.num_heads).transpose(1, 2)  # (N, L, M) -> (N, H, L, Dh)

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dim() != 3 or x.shape[-1] != self.emb_dim:
                raise ValueError(f"{name} of shape {tuple(x.shape)}: expected (N, L, M) with M={self.emb_dim}")
        if not (query.shape[0] == key.shape[0] == value.shape[0]):
            raise ValueError(
                f"batch sizes differ: query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} must have the same length")

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """query (N, Lq, M), key and value (N, Lk, M) -> (N, Lq, M)."""
        self._check_inputs(query, key, value)
        N, Lq, M = query.shape
        q = self._split_heads(self.q_proj(query))  # (N, Lq, M) -> (N, H, Lq, Dh)
        if self.rope:  # self-attention: the new rows come right after what the cache holds
            start = 0 if cache is None else cache.start + len(cache)
            q = rope_rotate(q, start)  # (N, H, Lq, Dh)
        if cache is not None and cache.static and cache.k is not None:
            k, v = cache.k, cache.v  # encoder memory: projected at the first step, fixed after
        else:
            k = self._split_heads(self.k_proj(key))  # (N, Lk, M) -> (N, H, Lk, Dh)
            v = self._split_heads(self.v_proj(value))  # (N, Lk, M) -> (N, H, Lk, Dh)
            if self.rope:
                k = rope_rotate(k, start)  # (N, H, Lk, Dh): rotated once, cached rotated
            if cache is not None:
                k, v = cache.update(k, v)  # (N, H, T, Dh): every position decoded so far
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (N, H, Lq, Dh), (N, H, Lq, T)
        self.last_attention = weights.detach()
        out = out.transpose(1, 2).reshape(N, Lq, M)  # (N, H, Lq, Dh) -> (N, Lq, M)
        return self.out_proj(out)


def _check_shapes() -> None:
    """Executable shape check of this module (the same assertions live in tests/)."""
    N, Ka, Kq, M, H = 2, 5, 9, 8, 2
    mask = get_subsequent_mask(torch.zeros(N, Ka, dtype=torch.long))
    assert mask.shape == (N, Ka, Ka)
    mha = MultiHeadAttention(H, M)
    assert mha(torch.randn(N, Ka, M), torch.randn(N, Kq, M), torch.randn(N, Kq, M)).shape == (N, Ka, M)
    assert mha.last_attention.shape == (N, H, Ka, Kq)
    assert rope_rotate(torch.randn(N, H, Ka, M // H), start=3).shape == (N, H, Ka, M // H)


if __name__ == "__main__":
    _check_shapes()
    print("attention shapes ok")
