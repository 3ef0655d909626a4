"""Sampling: temperature, top-k and top-p, in place of greedy decoding's argmax.

Taught in chapter 13 ("Sampling"). ``sampling_probs`` reshapes a step's distribution; ``pick_sample``
draws from it with a seeded ``torch.Generator``; ``sample_decode`` is greedy_decode's cached loop
with that draw. Its own module, which no exercise needs: a graded kernel's edition of the package
leaves it out (autograder/edition.py), since temperature 0 is greedy decoding.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .attention import get_subsequent_mask
from .data import EOS_ID
from .generate import _start, new_caches
from .model import Transformer


def sampling_probs(
    logits_last: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """The distribution a sampling step draws from, (N, V) from the last position's logits (N, V).

    Temperature first (logits / T; T = 0 is greedy: all mass on the argmax), then top-k (keep the
    k largest), then top-p (keep the smallest set of most probable tokens whose mass reaches p);
    what is kept is renormalised, so every row sums to 1.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if temperature == 0:  # the limit T -> 0: a one-hot on the greedy choice
        return torch.nn.functional.one_hot(logits_last.argmax(dim=-1), logits_last.shape[-1]).to(logits_last.dtype)
    probs = torch.softmax(logits_last / temperature, dim=-1)  # (N, V)
    if top_k is not None:
        kth = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values[:, -1:]  # (N, 1): the k-th largest
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if top_p is not None:
        sorted_p, order = probs.sort(dim=-1, descending=True)  # (N, V), most probable first
        before = sorted_p.cumsum(dim=-1) - sorted_p  # (N, V): the mass of the tokens ahead of each
        keep_sorted = before < top_p  # a token is kept while the mass ahead of it is short of p
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)  # (N, V), back in vocabulary order
        probs = torch.where(keep, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def pick_sample(
    logits_last: Tensor,
    done: Tensor,
    generator: torch.Generator,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> tuple[Tensor, Tensor]:
    """``pick_next``'s sampling twin: draw from ``sampling_probs`` with ``generator`` (N, V) -> (N,)."""
    probs = sampling_probs(logits_last, temperature, top_k, top_p)  # (N, V)
    next_token = torch.multinomial(probs, 1, generator=generator)[:, 0]  # (N,)
    next_token = torch.where(done, torch.full_like(next_token, EOS_ID), next_token)
    return next_token, done | (next_token == EOS_ID)


@torch.no_grad()
def sample_decode(
    model: Transformer,
    ques_b: Tensor,
    max_new_tokens: int,
    generator: torch.Generator,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    prefix: Tensor | None = None,
) -> Tensor:
    """Sampled answers (N, P + max_new_tokens), BOS first: ``greedy_decode``'s cached loop with
    ``pick_sample`` in place of ``pick_next``. The same ``generator`` state gives the same answers."""
    ques_b, tokens, ans_pos = _start(model, ques_b, max_new_tokens, prefix)  # (N, Kq), (N, P), (1, Ka, M)
    memory = model.encode(ques_b)  # (N, Kq, M)
    caches = new_caches(model)
    done = (tokens == EOS_ID).any(dim=1)  # (N,)
    fed = 0
    for _ in range(max_new_tokens):
        T = tokens.shape[1]
        new = tokens[:, fed:]  # (N, T - fed): the prefix at the prefill, then the newest token
        mask = get_subsequent_mask(new) if new.shape[1] > 1 else None
        h = model.decoder(model.emb_layer(new) + ans_pos[:, fed:T], memory, mask, caches=caches)  # (N, t, M)
        fed = T
        logits = model.proj_to_vocab(h[:, -1])  # (N, M) -> (N, V)
        next_token, done = pick_sample(logits, done, generator, temperature, top_k, top_p)  # (N,), (N,)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (N, T + 1)
    return tokens
