"""Greedy decoding, beam search and sampling compared on the question space (chapter 13, "Beam search").

``decoding_table(preset)``: for each decoder, the exact match of its answers and the seconds it took,
on a fixed sample of the question space (every ``STRIDE``-th question of ``data.problem_space``, in
batches of ``BATCH``): beam search with k = 4 costs about four greedy decodings, and the whole space
for every decoder and both checkpoints would add minutes to the book's build. Computed once per
checkpoint before any page runs (``whole_space.RESULTS``); the page only reads it.
"""

from __future__ import annotations

import sys
import time

import torch

from . import attention, beam, data, generate, model, sampling
from .whole_space import cached

STRIDE = 5  # every fifth question: 3,921 of 19,602, every operator, sign and operand among them
BATCH = 1000
BEAMS = (2, 4)
# the sampling settings of chapter 13's "Sampling" section, each drawn with torch.Generator seed 0
SAMPLING = {
    "T = 1": {"temperature": 1.0},
    "T = 2": {"temperature": 2.0},
    "T = 2, top-k = 3": {"temperature": 2.0, "top_k": 3},
    "T = 2, top-p = 0.9": {"temperature": 2.0, "top_p": 0.9},
}


def _decoders(m, n: int):
    """(name, function of a batch of questions (b, Kq) -> its answers (b, 1 + n)) of each decoder."""
    yield "greedy", lambda q: generate.greedy_decode(m, q, n)
    for k in BEAMS:
        yield f"beam, k = {k}", lambda q, k=k: beam.beam_search(m, q, k, n)[0][:, 0]  # the best beam
    for label, kw in SAMPLING.items():
        g = torch.Generator().manual_seed(0)
        yield f"sampling, {label}", lambda q, kw=kw, g=g: sampling.sample_decode(m, q, n, g, **kw)


@torch.no_grad()
def _compute(preset: str) -> dict:
    from .train import load_run

    m, _ = load_run(preset)
    ques, answers = data.problem_space()
    ques, answers = ques[::STRIDE], answers[::STRIDE]  # (S, Kq), (S, Ka)
    rows, greedy = [], None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # batches of a small model: one thread is as fast, and steadier on a busy machine
    try:
        for name, decode in _decoders(m.eval(), answers.shape[1] - 1):
            start = time.perf_counter()
            out = torch.cat([decode(ques[s : s + BATCH]) for s in range(0, len(ques), BATCH)])  # (S, Ka)
            seconds = time.perf_counter() - start
            greedy = out if greedy is None else greedy
            rows.append(
                {
                    "decoder": name,
                    "right": int((out == answers).all(dim=1).sum()),
                    "changed": int((out != greedy).any(dim=1).sum()),  # answers other than greedy's
                    "seconds": round(seconds, 2),
                }
            )
    finally:
        torch.set_num_threads(threads)
    return {"preset": preset, "questions": len(ques), "rows": rows}


def decoding_table(preset: str) -> dict:
    """The comparison for ``preset``'s checkpoint, cached (whole_space.cached): {questions, rows}."""
    modules = (attention, beam, data, generate, model, sampling, sys.modules[__name__])
    return cached("decoding_table", preset, modules, lambda: _compute(preset))
