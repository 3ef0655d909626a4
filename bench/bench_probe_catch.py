"""How often each hidden probe catches each mistake of the catalogue, over many students' draws.

    .venv/bin/python bench/bench_probe_catch.py [--students 100] [--held-out] [--target decode]

Every entry of the catalogue (autograder/fixtures/mistakes: ``tuned``, and ``held_out`` with
``--held-out``) is graded in this process as a graded run would be, on every hidden check of its
target, once per student (each student's seed is an HMAC of the student, as in a real course). A
probe should catch a mistake either always or never (the probes are built so: a wrong position or
structure changes the tokens at a clear choice; a forward is called with positions of the grader's
drawing). So the figure that matters is the rate of each (mistake, probe) pair that is neither 0
nor 1: a mistake that passes a probe by chance. Prints each pair's caught share, the lowest rate
among the pairs that catch at all, and the rule-of-three lower bound it supports (with no miss in S
students, the rate is at least 1 - 3/S at 95 %); the target is at least 0.999 for every pair that
catches.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder import judge  # noqa: E402 (after the sys.path line that lets it be found)
from autograder.fixtures import in_process  # noqa: E402 (after the sys.path line that lets it be found)
from autograder.fixtures.mistakes import PASSED, build, held_out, tuned  # noqa: E402 (after the sys.path line that lets it be found)
from autograder.fixtures.mistakes.evaluate import CHECKS  # noqa: E402 (after the sys.path line that lets it be found)

SECRET = b"bench: a course secret"


def caught(mistake, check_id: str, students: int) -> int:
    """How many of ``students`` seeds fail the check for this entry."""
    impl = build(mistake)
    misses = 0
    for i in range(students):
        seed = judge.check_seed(SECRET, f"student{i:04d}", CHECKS[mistake.target][0], check_id)
        with (
            tempfile.TemporaryDirectory() as work,
            contextlib.redirect_stdout(io.StringIO()),
        ):  # the kernel side's prints
            verdict, _ = in_process.verdict(check_id, impl, Path(work), seed)
        misses += verdict.ok
    return students - misses


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=100)
    p.add_argument("--held-out", action="store_true")
    p.add_argument("--target", default=None, help="only the entries of this target (mask, block, decode, ...)")
    args = p.parse_args()
    entries = [
        m
        for m in tuned.MISTAKES + (held_out.MISTAKES if args.held_out else [])
        if m.expect != PASSED and (args.target is None or m.target == args.target)
    ]
    S = args.students
    lowest, chance = 1.0, []
    print(f"{len(entries)} mistakes, {S} students each, every hidden check of the entry's target")
    for m in entries:
        hidden = [c for c in CHECKS[m.target][1] if judge.checks()[c].hidden]
        rates = {c: caught(m, c, S) / S for c in hidden}
        for c, r in rates.items():
            if r > 0:
                lowest = min(lowest, r)
            if 0 < r < 1:
                chance.append((m.name, c, r))
        shown = "  ".join(f"{c.split('.', 1)[1]} {r:.3f}" for c, r in rates.items())
        print(f"  {m.name:36s} {m.expect:26s} {shown}")
    print(
        f"lowest catch rate among the probes that catch: {lowest:.4f} "
        f"(no miss in {S} students supports >= {1 - 3 / S:.4f} at 95 %; target >= 0.999)"
    )
    print(
        f"pairs caught by chance (0 < rate < 1): {len(chance)}"
        + "".join(f"\n  {n} on {c}: {r:.3f}" for n, c, r in chance)
    )
    return 1 if chance else 0


if __name__ == "__main__":
    sys.exit(main())
