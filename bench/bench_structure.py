"""The kv_cache structure runs' costs: for each run (autograder/judge/run_draws.RUNS), the CPU time
of honest decodings in other styles and of each wrong structure, over the package's own structure,
on the run's inputs, on one thread (the bound, autograder/judge/budget.py, allows FACTORS[run] of it
plus SLACK). The wrong structures must cost ten times the lesson's or more; the honest styles stay
under the bound with room for a busy machine.

    .venv/bin/python bench/bench_structure.py [--seed 5]
"""

from __future__ import annotations

import argparse
import time

import torch

from autograder.judge import budget
from autograder.judge.decode_draws import one_thread
from autograder.judge.run_draws import RUNS, build_run
from encdec import attention as A
from encdec.generate import greedy_decode, new_caches


@torch.no_grad()
def _stepwise(model, ques, prefix, n, encode_every_step=False, prefill_one_call=True, cache=True):
    """A decoding of ``n`` tokens after ``prefix`` (N, P), built one way or another."""
    N, P = prefix.shape
    pos, memory, caches = model.positions(P + n), model.encode(ques), new_caches(model)
    tokens = prefix
    fed = 0
    for _ in range(n):
        if encode_every_step:
            memory = model.encode(ques)
        if not cache:  # the whole prefix again
            T = tokens.shape[1]
            h = model.decoder(model.emb_layer(tokens) + pos[:, :T], memory, A.get_subsequent_mask(tokens))
        else:
            while fed < tokens.shape[1]:
                width = tokens.shape[1] - fed if prefill_one_call else 1
                new = tokens[:, fed : fed + width]
                mask = A.get_subsequent_mask(new) if width > 1 else None
                h = model.decoder(model.emb_layer(new) + pos[:, fed : fed + width], memory, mask, caches=caches)
                fed += width
        tokens = torch.cat([tokens, model.proj_to_vocab(h[:, -1]).argmax(-1, keepdim=True)], dim=1)
    return tokens


def _rows(model, ques, prefix, n):
    return torch.cat([greedy_decode(model, ques[i : i + 1], n, prefix=prefix[i : i + 1]) for i in range(len(ques))])


def _double(model, ques, prefix, n):
    return greedy_decode(model.double(), ques, n, prefix=prefix)


STYLES = {  # honest
    "lesson": lambda m, q, p, n: greedy_decode(m, q, n, prefix=p),
    "row_by_row": _rows,
    "float64": _double,
    "stepwise": _stepwise,
}
WRONG = {
    "encoder_every_step": lambda m, q, p, n: _stepwise(m, q, p, n, encode_every_step=True),
    "no_cache": lambda m, q, p, n: _stepwise(m, q, p, n, cache=False),
    "prefill_not_one_call": lambda m, q, p, n: _stepwise(m, q, p, n, prefill_one_call=False),
}


def _cpu(fn, *args) -> float:
    with one_thread():
        start = time.thread_time()
        fn(*args)
        return time.thread_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    budget.steady_allocator()  # as the grader times the lesson and every graded kernel starts
    print(f"bound: FACTORS[run] x the lesson's CPU time + {budget.SLACK:g} s, FACTORS = {budget.FACTORS}")
    for part in RUNS:
        inputs = build_run(part, args.seed, prefix=True)
        model, ques, prefix, n = inputs["model"], inputs["ques"], inputs["prefix"], inputs["n"]
        lesson = min(_cpu(STYLES["lesson"], model, ques, prefix, n) for _ in range(3))
        cells = []
        for name, fn in {**STYLES, **WRONG}.items():
            twin = type(model)(model.config).eval().requires_grad_(False)
            twin.load_state_dict(model.state_dict())
            cells.append(f"{name} {_cpu(fn, twin, ques, prefix, n) / lesson:.1f}")
        allowed = budget.bound(lesson, part) / lesson
        print(
            f"{part} (lesson {lesson * 1000:.0f} ms, bound {allowed:.1f}; x the lesson's): " + ", ".join(cells),
            flush=True,
        )


if __name__ == "__main__":
    main()
