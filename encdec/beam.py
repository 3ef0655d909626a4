"""Beam search with the KV cache: keep the ``beam_size`` best answers so far, not just one.

Taught in chapter 13 ("Beam search"); the kv_cache exercise's stretch part 4 asks for it. Each
question keeps ``k`` beams. A step extends every live beam by every token, scores the k * V
candidates and keeps the best ``k``; a kept candidate's beam may come from another beam (its
*parent*), so each decoder layer's self-attention cache is reordered to follow it
(``index_select`` on the batch axis). The cross-attention cache (the question's memory, projected
once) is the same for every beam of a question: it is projected at the first step, on one row per
question, and copied to the question's k beams there; a reorder never mixes questions, so it never
needs reordering after.

Scores (one convention, the one ``length_penalty`` of Hugging Face's generate uses): a beam's score
is the sum of its tokens' log-probabilities divided by its length ** ``length_penalty`` (alpha),
its length being the tokens generated up to and including EOS. alpha = 0 ranks by the sum alone
(short answers win: every token adds a negative log-prob); alpha = 1 by the mean log-prob per token.
Candidates are ranked by that score at every step. A finished beam (it produced EOS) stays a
candidate with its score unchanged, padded with EOS, and is never extended.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .attention import get_subsequent_mask
from .data import EOS_ID
from .generate import _start, new_caches
from .model import Transformer

LENGTH_PENALTY = 1.0  # alpha: scores are sum log p / length ** alpha (the mean log-prob per token)


def _finished_row(V: int, like: Tensor) -> Tensor:
    """The log-probs a finished beam continues with (V,): EOS at no cost, every other token never."""
    row = torch.full((V,), float("-inf"), dtype=like.dtype, device=like.device)
    row[EOS_ID] = 0.0
    return row


def reorder(caches, rows: Tensor, cross: bool) -> None:
    """Each layer's self-attention cache follows the kept beams: row i takes row ``rows[i]``'s keys
    and values, (B, H, T, Dh) -> (N * k, H, T, Dh); ``cross``: the cross cache too (the first step,
    one row per question copied to its beams)."""
    for cache_self, cache_cross in caches:
        for c in (cache_self, cache_cross) if cross else (cache_self,):
            c.k, c.v = c.k.index_select(0, rows), c.v.index_select(0, rows)


@torch.no_grad()
def beam_search(
    model: Transformer,
    ques_b: Tensor,
    beam_size: int,
    max_new_tokens: int,
    length_penalty: float = LENGTH_PENALTY,
    use_cache: bool = True,
    trace: list | None = None,
) -> tuple[Tensor, Tensor]:
    """The ``beam_size`` best answers of questions (N, Kq): ids (N, k, 1 + max_new_tokens), BOS
    first, and their scores (N, k), best first. ``use_cache=False`` re-runs each beam's whole prefix
    at every step (the same beams: tests/test_beam.py); ``trace`` (a list) receives each step's
    parents and tokens, (N, k) each (chapter 13 prints them)."""
    ques_b, tokens, ans_pos = _start(model, ques_b, max_new_tokens, None)  # (N, Kq), (N, 1), (1, Ka, M)
    N, k, V = ques_b.shape[0], beam_size, model.config.vocab_size
    if not 1 <= k <= V:
        raise ValueError(f"beam_size must be in 1..{V}, got {beam_size}")
    memory = model.encode(ques_b)  # (N, Kq, M): once per question
    caches = new_caches(model) if use_cache else None
    tokens = tokens[:, None]  # (N, B, 1): one beam per question until the first step
    total = torch.zeros(N, 1, device=memory.device)  # (N, B): sum of log-probs
    length = torch.zeros(N, 1, device=memory.device)  # (N, B): tokens generated, EOS included
    done = torch.zeros(N, 1, dtype=torch.bool, device=memory.device)  # (N, B)
    finished_row = _finished_row(V, total)
    for t in range(max_new_tokens):
        B = tokens.shape[1]  # beams per question: 1 at the first step, then k
        if use_cache:
            x = model.emb_layer(tokens[:, :, -1].reshape(N * B, 1)) + ans_pos[:, t : t + 1]  # (N*B, 1, M)
            h = model.decoder(x, memory, None, caches=caches)  # (N*B, 1, M)
        else:
            flat = tokens.reshape(N * B, t + 1)  # (N*B, t+1)
            x = model.emb_layer(flat) + ans_pos[:, : t + 1]  # (N*B, t+1, M)
            h = model.decoder(x, memory, get_subsequent_mask(flat), caches=None)  # (N*B, t+1, M)
        logp = torch.log_softmax(model.proj_to_vocab(h[:, -1]), dim=-1).view(N, B, V)  # (N, B, V)
        logp = torch.where(done[..., None], finished_row, logp)  # a finished beam is kept, not extended
        cand_total = total[..., None] + logp  # (N, B, V)
        cand_length = (length + (~done).float())[..., None].expand(N, B, V)  # (N, B, V)
        cand_score = cand_total / cand_length**length_penalty  # (N, B, V)
        score, idx = cand_score.reshape(N, B * V).topk(k, dim=1)  # (N, k): the k best candidates
        parent, token = idx // V, idx % V  # (N, k): which beam each came from, the token it added
        if trace is not None:
            trace.append((parent, token))
        total = cand_total.reshape(N, B * V).gather(1, idx)  # (N, k)
        length = cand_length.reshape(N, B * V).gather(1, idx)  # (N, k)
        done = done.gather(1, parent) | (token == EOS_ID)  # (N, k)
        tokens = tokens.gather(1, parent[..., None].expand(N, k, t + 1))  # (N, k, t+1): the parents' ids
        tokens = torch.cat([tokens, token[..., None]], dim=2)  # (N, k, t+2)
        rows = (torch.arange(N, device=idx.device)[:, None] * B + parent).reshape(N * k)  # (N*k,) parent rows
        if B == 1:  # the first step: each question's memory, and its cross cache, copied to its k beams
            memory = memory.index_select(0, rows)  # (N, Kq, M) -> (N*k, Kq, M)
        if use_cache:
            reorder(caches, rows, cross=B == 1)
    if max_new_tokens == 0:
        return tokens.expand(N, k, 1), torch.zeros(N, k, device=memory.device)
    return tokens, score  # (N, k, 1+n), (N, k): topk gives the best first


def sequence_score(
    model: Transformer, ques_b: Tensor, answers: Tensor, length_penalty: float = LENGTH_PENALTY
) -> Tensor:
    """The beam score of given answers (N, 1 + n), BOS first (e.g. greedy's): (N,). Tokens after the
    first EOS are padding and count nothing."""
    ans_pos = model.positions(answers.shape[1])  # (1, 1+n, M)
    memory = model.encode(ques_b)  # (N, Kq, M)
    prev = answers[:, :-1]  # (N, n)
    h = model.decoder(model.emb_layer(prev) + ans_pos[:, :-1], memory, get_subsequent_mask(prev))  # (N, n, M)
    logp = torch.log_softmax(model.proj_to_vocab(h), dim=-1)  # (N, n, V)
    picked = logp.gather(2, answers[:, 1:, None])[..., 0]  # (N, n)
    eos = (answers[:, 1:] == EOS_ID).long()  # (N, n)
    live = (eos.cumsum(dim=1) - eos) == 0  # (N, n): up to and including the first EOS
    return (picked * live).sum(dim=1) / live.sum(dim=1).float() ** length_penalty  # (N,)


def _check_shapes() -> None:
    """Executable shape check of this module (the same assertions live in tests/)."""
    model = Transformer(emb_dim=8, num_heads=2, feedforward_dim=16, num_enc_layers=1, num_dec_layers=1).eval()
    ques = torch.randint(0, 10, (3, 9))
    tokens, score = beam_search(model, ques, beam_size=2, max_new_tokens=4)
    assert tokens.shape == (3, 2, 5) and score.shape == (3, 2)
    assert sequence_score(model, ques, tokens[:, 0]).shape == (3,)


if __name__ == "__main__":
    _check_shapes()
    print("beam shapes ok")
