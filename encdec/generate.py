"""Greedy generation: prefill, then decode one token at a time, with or without a KV cache.

Also the KV cache's size in bytes (sampling is encdec.sampling).
Taught in chapter 13. The encoder runs once: its memory (N, Kq, M) is the fixed reference
book that every decoding step reads through cross-attention. With ``use_cache=True`` each
decoder layer keeps the keys and values of the positions already decoded, so a step feeds
only the newest token; with ``use_cache=False`` each step re-runs the whole prefix under the
causal mask. Both give the same tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .attention import KVCache, get_subsequent_mask
from .data import BOS_ID, EOS_ID
from .model import Transformer


def new_caches(model: Transformer) -> list[tuple[KVCache, KVCache]]:
    """One (self-attention, cross-attention) cache pair per decoder layer, all empty."""
    return [(KVCache(), KVCache(static=True)) for _ in model.decoder.layers]


def pick_next(logits_last: Tensor, done: Tensor) -> tuple[Tensor, Tensor]:
    """Greedy choice from the last position's logits (N, V); a finished row keeps producing EOS.

    Returns the next tokens (N,) and which rows have finished (N,). The kv_cache exercise gives
    students this same function.
    """
    next_token = logits_last.argmax(dim=-1)  # (N,)
    next_token = torch.where(done, torch.full_like(next_token, EOS_ID), next_token)
    return next_token, done | (next_token == EOS_ID)


def _start(model: Transformer, ques_b: Tensor, max_new_tokens: int, prefix: Tensor | None):
    """A decoding's inputs, checked: the questions and the answer prefix (BOS alone by default) on
    the model's device, and the positions of an answer of P + max_new_tokens tokens (1, Ka, M)."""
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if ques_b.dim() != 2:
        raise ValueError(f"ques_b must be token ids of shape (N, Kq), got {tuple(ques_b.shape)}")
    N = ques_b.shape[0]
    device = model.emb_layer.weight.device
    ques_b = ques_b.to(device)
    if prefix is None:
        prefix = torch.full((N, 1), BOS_ID, dtype=torch.long, device=device)  # (N, 1)
    if prefix.dim() != 2 or prefix.shape[0] != N:
        raise ValueError(f"prefix of shape {tuple(prefix.shape)} does not fit ques_b {tuple(ques_b.shape)}")
    tokens = prefix.to(device)
    P = tokens.shape[1]
    ans_pos = model.positions(P + max_new_tokens)  # (1, Ka, M)
    return ques_b, tokens, ans_pos


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    ques_b: Tensor,
    max_new_tokens: int,
    use_cache: bool = True,
    prefix: Tensor | None = None,
) -> Tensor:
    """Greedy answers for questions (N, Kq): ids (N, P + max_new_tokens), BOS first.

    ``prefix`` (N, P) defaults to BOS alone. A sequence that has produced EOS is padded with
    EOS; decoding stops early once every sequence has. Position encodings are those of an
    answer of length P + max_new_tokens, as in training (where Ka = 5 and max_new_tokens = 4).
    """
    ques_b, tokens, ans_pos = _start(model, ques_b, max_new_tokens, prefix)  # (N, Kq), (N, P), (1, Ka, M)
    N, device = tokens.shape[0], tokens.device

    memory = model.encode(ques_b)  # (N, Kq, M): once, fixed for every step
    caches = new_caches(model) if use_cache else None
    done = (tokens == EOS_ID).any(dim=1)  # (N,)
    fed = 0  # answer positions already inside the caches
    for _ in range(max_new_tokens):
        if done.all():
            tokens = torch.cat([tokens, torch.full((N, 1), EOS_ID, device=device)], dim=1)
            continue
        T = tokens.shape[1]
        if use_cache:
            # Prefill: the first pass feeds the whole prefix; later passes only the newest token.
            new = tokens[:, fed:]  # (N, T - fed)
            mask = get_subsequent_mask(new) if new.shape[1] > 1 else None  # (N, P, P) at prefill
            x = model.emb_layer(new) + ans_pos[:, fed:T]  # (N, T - fed, M)
            fed = T
        else:
            mask = get_subsequent_mask(tokens)  # (N, T, T): the whole prefix, re-run
            x = model.emb_layer(tokens) + ans_pos[:, :T]  # (N, T, M)
        h = model.decoder(x, memory, mask, caches=caches)  # (N, t, M)
        logits = model.proj_to_vocab(h[:, -1])  # last position only: (N, M) -> (N, V)
        next_token, done = pick_next(logits, done)  # (N,), (N,)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (N, T + 1)
    return tokens


@torch.no_grad()
def exact_match(model: Transformer, questions: Tensor, answers: Tensor, batch_size: int = 500) -> float:
    """Fraction of questions whose greedy answer equals the whole reference answer."""
    if len(questions) == 0:
        raise ValueError("exact_match needs at least one question")
    was_training = model.training
    model.eval()
    correct = 0
    Ka = answers.shape[1]
    for start in range(0, len(questions), batch_size):
        q = questions[start : start + batch_size]
        a = answers[start : start + batch_size].to(model.emb_layer.weight.device)
        out = greedy_decode(model, q, max_new_tokens=Ka - 1)  # (n, Ka)
        correct += (out == a).all(dim=1).sum().item()
    model.train(was_training)
    return correct / len(questions)


def kv_cache_bytes(
    num_layers: int, num_heads: int, head_dim: int, bytes_per_value: int = 4, question_len: int = 0
) -> dict[str, int]:
    """Bytes the KV cache holds for one sequence: per answer token (each decoder layer's
    self-attention cache grows by one row) and per question (the cross-attention cache of
    ``question_len`` memory positions, projected once).

    Per token: 2 (K and V) x layers x heads x head width x bytes per value.
    """
    per_token = 2 * num_layers * num_heads * head_dim * bytes_per_value  # one K row and one V row per layer
    return {"self_per_token": per_token, "cross_per_question": per_token * question_len}
