"""Break the trained model on purpose: one mistake of the lessons switched into its inference.

Taught in chapter 13 ("Break it on purpose"). Each mistake the lessons warn about is applied to
the trained model by swapping the one piece it concerns, for the length of a ``with`` block, and
``greedy_decode`` itself then decodes; ``broken_answers`` runs it on any batch of questions.

Every mistake runs on the decoding path where it can matter (``MISTAKES``' ``use_cache``):

- ``mask_after_softmax``: the decoder's self-attention normalises over every position, then zeros
  the future weights (the rows no longer sum to 1). A cached decode step has one query and no future
  to mask, so it runs uncached: every step re-runs the prefix in one pass.
- ``no_causal_mask``: the decoder's self-attention drops the causal mask; uncached for the same reason.
- ``stale_position``: with the KV cache, every decode step adds the position of step 1 (position 0)
  to its token instead of its own (the offset never advances past the prefill).
- ``q_from_encoder``: cross-attention takes Q from the encoder memory and K, V from the decoder
  state. Its output then has Kq = 9 rows, one per question position, where the residual needs one per
  answer position. Uncached, where each step is one pass as in training: at step 1 (one answer
  position) broadcasting adds the (N, 1, M) state to the (N, 9, M) output without complaint, and the
  next layer's causal mask (N, 1, 1) no longer fits its (N, 9, 9) scores: ``ValueError``. The model
  answers nothing.
- ``no_cross_attention``: cross-attention's output is replaced by zeros; the decoder no longer reads
  the question at all. Cached.

Letters: ``N`` batch, ``Kq`` question length, ``Ka`` answer length, ``M`` model width, ``H`` heads.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .attention import MultiHeadAttention, check_mask
from .generate import greedy_decode
from .model import Transformer


@dataclass(frozen=True)
class Mistake:
    """One mistake: what it swaps, and on which decoding path it runs."""

    name: str
    use_cache: bool  # the path where the mistake can matter (see the module's docstring)
    piece: str  # what the mistake swaps, as the lesson names it


MISTAKES: dict[str, Mistake] = {
    m.name: m
    for m in (
        Mistake("intact", True, "nothing: greedy_decode as shipped"),
        Mistake("mask_after_softmax", False, "decoder attention_self: softmax, then the future weights zeroed"),
        Mistake("no_causal_mask", False, "decoder attention_self: mask=None"),
        Mistake("stale_position", True, "the answer positions: step 1's at every decode step"),
        Mistake("q_from_encoder", False, "decoder attention_cross(memory, state, state)"),
        Mistake("no_cross_attention", True, "decoder attention_cross: output zeros"),
    )
}


def attention_mask_after_softmax(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None):
    """The mistake: softmax over every score, then the forbidden weights set to 0.

    The future scores stayed in the denominator, so the allowed weights are too small and a row sums
    to less than 1. query (N, H, Lq, Dh), key and value (N, H, Lk, Dh) -> (N, H, Lq, Dh), weights.
    """
    D = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(D)  # (N, H, Lq, Dh) x (N, H, Dh, Lk) -> (N, H, Lq, Lk)
    weights = torch.softmax(scores, dim=-1)  # every position in the denominator, the future too
    if mask is not None:
        check_mask(mask, tuple(scores.shape))
        weights = weights.masked_fill(mask.unsqueeze(1) if mask.dim() == 3 else mask, 0.0)  # after: too late
    return weights @ value, weights  # (N, H, Lq, Lk) x (N, H, Lk, Dh) -> (N, H, Lq, Dh)


def _mask_after_softmax_forward(att: MultiHeadAttention):
    """``att.forward`` with the mistake: MultiHeadAttention.forward, the softmax and mask swapped."""

    def forward(query, key, value, mask=None, cache=None):
        att._check_inputs(query, key, value)
        N, Lq, M = query.shape
        q = att._split_heads(att.q_proj(query))  # (N, Lq, M) -> (N, H, Lq, Dh)
        k = att._split_heads(att.k_proj(key))  # (N, Lk, M) -> (N, H, Lk, Dh)
        v = att._split_heads(att.v_proj(value))
        if cache is not None:
            k, v = cache.update(k, v)  # (N, H, T, Dh)
        out, weights = attention_mask_after_softmax(q, k, v, mask)  # (N, H, Lq, Dh)
        att.last_attention = weights.detach()
        return att.out_proj(out.transpose(1, 2).reshape(N, Lq, M))  # (N, H, Lq, Dh) -> (N, Lq, M)

    return forward


def _swapped(att: MultiHeadAttention, name: str):
    """``att.forward`` with mistake ``name`` (one of the attention mistakes)."""
    original = att.forward
    if name == "mask_after_softmax":
        return _mask_after_softmax_forward(att)
    if name == "no_causal_mask":
        return lambda query, key, value, mask=None, cache=None: original(query, key, value, None, cache)
    if name == "q_from_encoder":  # DecoderBlock calls attention_cross(out_2, enc_inp, enc_inp)
        return lambda query, key, value, mask=None, cache=None: original(key, query, query, mask, cache)
    if name == "no_cross_attention":
        return lambda query, key, value, mask=None, cache=None: torch.zeros_like(query)  # (N, Ka, M)
    raise ValueError(name)


@contextlib.contextmanager
def broken(model: Transformer, name: str):
    """Inside the block, ``model`` makes mistake ``name`` (a key of ``MISTAKES``); after it, none.

    Only instance attributes are set (a module's ``forward``, the model's ``positions`` and
    ``encode``), and they are removed on the way out, so the class and every other model are untouched.
    """
    if name not in MISTAKES:
        raise ValueError(f"unknown mistake {name!r}: expected one of {', '.join(MISTAKES)}")
    swapped: list[tuple[object, str]] = []

    def swap(obj, attr, value):
        object.__setattr__(obj, attr, value)
        swapped.append((obj, attr))

    if name in ("mask_after_softmax", "no_causal_mask"):
        for layer in model.decoder.layers:
            swap(layer.attention_self, "forward", _swapped(layer.attention_self, name))
    elif name in ("q_from_encoder", "no_cross_attention"):
        for layer in model.decoder.layers:
            swap(layer.attention_cross, "forward", _swapped(layer.attention_cross, name))
    elif name == "stale_position":
        real_positions, real_encode = model.positions, model.encode

        def stale(K: int) -> Tensor:  # every answer position is position 0, the one of step 1
            return real_positions(K)[:, :1].expand(1, K, model.config.emb_dim)  # (1, K, M)

        swap(
            model,
            "encode",
            lambda ques_b, ques_pos=None: real_encode(
                ques_b, real_positions(ques_b.shape[1]) if ques_pos is None else ques_pos
            ),
        )  # the question keeps its own
        swap(model, "positions", stale)
    try:
        yield model
    finally:
        for obj, attr in reversed(swapped):
            object.__delattr__(obj, attr)


@torch.no_grad()
def broken_answers(
    model: Transformer, questions: Tensor, name: str, max_new_tokens: int = 4, batch_size: int = 2000
) -> tuple[Tensor | None, str | None]:
    """Greedy answers (N, 1 + max_new_tokens) of ``model`` with mistake ``name`` on its path, or
    (None, the error PyTorch raised) when the broken model cannot run (``q_from_encoder``)."""
    use_cache = MISTAKES[name].use_cache if name in MISTAKES else True
    was_training = model.training
    model.eval()
    out = []
    try:
        with broken(model, name):
            for start in range(0, len(questions), batch_size):
                out.append(
                    greedy_decode(model, questions[start : start + batch_size], max_new_tokens, use_cache=use_cache)
                )
    except (RuntimeError, ValueError) as err:
        if name == "intact":
            raise
        return None, f"{type(err).__name__}: {err}"
    finally:
        model.train(was_training)
    return torch.cat(out), None


def still_right(model: Transformer, questions: Tensor, answers: Tensor, name: str) -> dict:
    """How many questions the model with mistake ``name`` still answers right, on its path:
    ``{"mistake", "right", "total", "error"}`` (``right`` 0 and ``error`` PyTorch's words if it raised)."""
    got, error = broken_answers(model, questions, name, max_new_tokens=answers.shape[1] - 1)
    right = 0 if got is None else int((got == answers.to(got.device)).all(dim=1).sum())
    return {"mistake": name, "right": right, "total": len(questions), "error": error}


def _check_shapes() -> None:
    """Executable shape check of this module (the same assertions live in tests/)."""
    N, H, Lq, Dh = 2, 2, 4, 3
    q, k, v = (torch.randn(N, H, Lq, Dh) for _ in range(3))
    mask = torch.triu(torch.ones(Lq, Lq, dtype=torch.bool), diagonal=1).expand(N, Lq, Lq)  # (N, Lq, Lq)
    out, weights = attention_mask_after_softmax(q, k, v, mask)
    assert out.shape == (N, H, Lq, Dh) and weights.shape == (N, H, Lq, Lq)
    assert bool((weights.sum(-1)[..., :-1] < 1).all())  # every row but the last lost its future's share


if __name__ == "__main__":
    _check_shapes()
    print("broken shapes ok")
