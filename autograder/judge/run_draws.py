"""The inputs of the kv_cache structure runs (chapter 13): a structure item is judged by the CPU time
the kernel spends on a run (``budget.py``), so each run's sizes make its wrong structure dear
(``RUNS``). The model is drawn as the decoding checks' are (``decode_draws.py``), with EOS never
chosen and every greedy choice clear."""

from __future__ import annotations

import torch

from encdec.config import ModelConfig
from encdec.data import BOS_ID, EOS_ID
from encdec.generate import greedy_decode

from . import variants as Var
from .core import gen
from .decode_draws import (
    _ATTEMPTS,
    _apart,
    _clear,
    _Drawn,
    _drawn_model,
    _min_margins,
    _sharpen_readout,
    one_thread,
    teacher_forced_logits,
)

# The structure runs: inputs on which the lesson's structure is cheap and each wrong one dear.
# A structure item is judged by the CPU time the kernel spends on a run (judge/budget.py), so each
# run's sizes make its wrong structure cost ten times the lesson's or more (bench/bench_structure.py
# prints the ratios), with two rows only, so that decoding row by row costs about the lesson's:
# "encoder", a long question and a short answer (the encoder dominates: running it at every step
# multiplies the cost by about n); "cache", one head per model dimension (re-running the prefix
# computes (N, H, t, t) attention weights at step t where the cache computes (N, H, 1, t); 112 steps:
# re-running costs some 18 times the lesson's, and the run draws in half the time 160 steps took);
# "prefill", a long decoder prefix and some new tokens (fed one token a call, the prefix costs P
# calls where the lesson makes one).
RUNS = {  # part -> (width M, MLP width, encoder and decoder layers, heads H), (N, Kq, n, P)
    "encoder": ((64, 256, 3, 1, 2), (2, 1024, 32, 1)),
    "cache": ((128, 256, 1, 2, 128), (2, 4, 112, 8)),
    "prefill": ((32, 64, 1, 2, 2), (2, 4, 16, 1024)),
}


def build_run(part: str, seed: int, prefix: bool = False) -> dict:
    """A structure run's model and inputs: random weights, a readout that follows the decoder's
    state, EOS never chosen (every row decodes all its tokens: the cost is the structure's), drawn
    until every greedy choice of the reference is clear. ``prefix``: the stretch's inputs, with a
    decoder prefix (N, P) of words after BOS. Drawn until every known mistake the run is judged on
    returns other tokens (the run's tokens decide its part of the item, as a check's own draw's do)."""
    (M, F, Le, Ld, H), (N, Kq, n, P) = RUNS[part]
    cfg = ModelConfig(
        emb_dim=M,
        num_heads=H,
        feedforward_dim=F,
        num_enc_layers=Le,
        num_dec_layers=Ld,
        dropout=0.1,
        position_encoding="sinusoid",
    )
    g = gen(seed + 7919 * (1 + list(RUNS).index(part)))
    P = P if prefix else 1
    with one_thread():
        for attempt in range(_ATTEMPTS):
            model = _drawn_model(cfg, seed, attempt)
            ques = torch.randint(0, 16, (N, Kq), generator=g)
            drawn = _Drawn.of(model, ques)
            _sharpen_readout(drawn, P + n - 1, g)
            words = torch.randint(0, min(BOS_ID, EOS_ID), (N, P - 1), generator=g)  # (N, P - 1)
            start = torch.cat([torch.full((N, 1), BOS_ID, dtype=torch.long), words], dim=1)  # (N, P)
            tokens = greedy_decode(model, ques, n, prefix=start)  # (N, P + n)
            logits = teacher_forced_logits(model, ques, tokens, drawn.memory)  # (P + n - 1, N, V)
            clear = _clear(drawn, tokens, logits)
            if _min_margins(logits[P - 1 :]).min() >= clear and _tells_mistakes(model, ques, start, tokens, clear):
                # the reference tokens: every choice clear of float rounding, so float64 chooses alike
                inputs = {
                    "model": model,
                    "config": cfg,
                    "ques": ques,
                    "n": n,
                    "tokens": tokens,
                    "dims": {"N": N, "n": n},
                }
                return {**inputs, "prefix": start, "dims": {"N": N, "n": n, "P": P}} if prefix else inputs
    raise RuntimeError(
        f"kv_cache run {part}, seed {seed}: no model with clear greedy choices on which every known "
        f"mistake changes the tokens in {_ATTEMPTS} draws"
    )


# The known mistakes whose tokens a run's part is judged on (kv_cache.py): on a run no EOS wins (a
# decoder that ignores it returns the lesson's tokens), and a prefix re-fed into the cache is over the
# bound long before its tokens could be read (and dear to replay).
ON_RUNS = tuple(m for m in Var.DECODE if m not in ("ignores_done", "prefix_refed_into_cache"))
FIRST_STEPS = 16  # the mistakes are decoded this far first: most are told apart within it


def _tells_mistakes(model, ques, prefix, tokens, clear) -> bool:
    """Every known mistake a run is judged on (``ON_RUNS``; with a prefix, ``Var.PREFILL``) returns
    other tokens than the reference and than each other on these inputs, at a clear choice
    (``decode_draws._apart``): a long prefix averages a missing mask or a restarted position away on
    about one draw in ten of the "prefill" run's. Greedy decoding is causal, so mistakes told apart
    within the first steps are told apart on the whole run; the whole run is decoded only when not."""
    P = prefix.shape[1]  # prefix (N, P); tokens, the reference's: (N, P + n)
    n = tokens.shape[1] - P
    for m in sorted({min(n, FIRST_STEPS), n}):
        if P > 1:
            made = Var.prefill_variants(model, ques, prefix, m)  # name -> (N, P + m), (m, N, V)
        else:
            made = Var.decode_variants(model, ques, m, ON_RUNS)
        variants = {k: (t[:, P - 1 :], steps) for k, (t, steps) in made.items()}  # (N, 1 + m), (m, N, V)
        if _apart(variants, tokens[:, P - 1 : P + m], clear):
            return True
    return False
