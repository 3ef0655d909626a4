"""The grader's own memory over a long batch: one stock `nbgrader autograde` of many honest kv_cache
notebooks, as an instructor runs it from the course root (every kernel in the sandbox).

    .venv/bin/python bench/bench_grader_batch.py [--students 100] [--assignment kv_cache]

Builds a copy of the course in a temporary folder, hands in for each student one of the honest
fixtures of the assignment (`*_pass_all`, `*_style`, `*_words`, in turn), runs `nbgrader autograde`
once and reads the grader process's resident size from /proc every quarter second: its peak
(`VmHWM`), and its size after each quarter of the batch, so that growth per notebook shows. The
target: a peak under 1 GB over a batch of any length (issue: every notebook graded, by a grader
that stays bounded). Also prints the wall time per notebook and checks every notebook was graded
to full marks.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_grading import make_course, scores, submit  # noqa: E402 (after the sys.path line that lets it be found)

from autograder.fixtures import table  # noqa: E402 (after the sys.path line that lets it be found)
from autograder.fixtures.make import graded_notebook  # noqa: E402 (after the sys.path line that lets it be found)

TARGET_MB = 1024


def status_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MB (empty once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return {
                k: int(v.split()[0]) / 1024 for k, v in (line.split(":", 1) for line in f) if k in ("VmRSS", "VmHWM")
            }
    except (OSError, ValueError):
        return {}


def graded_count(course: Path, assignment: str) -> int:
    return sum(1 for _ in (course / "grading" / "autograded").glob(f"*/{assignment}/{assignment}.ipynb"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--assignment", default="kv_cache")
    args = parser.parse_args()
    a = args.assignment
    honest = [
        graded_notebook(n)
        for n, spec in sorted(table.grading().items())
        if spec["assignment"] == a and n.endswith(("_pass_all", "_style", "_words"))
    ]
    if not honest:
        raise SystemExit(f"no honest fixtures of {a} (*_pass_all, *_style, *_words)")
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        course = make_course(Path(tmp) / "course")
        submit(course, {(f"s{i:03d}", a): honest[i % len(honest)] for i in range(args.students)})
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "nbgrader", "autograde", a],
            cwd=course,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        peak, marks, last = 0.0, {}, {}
        while proc.poll() is None:
            now = status_mb(proc.pid)
            if now:
                last = now
                peak = max(peak, now.get("VmHWM", 0.0))
                done = graded_count(course, a)
                quarter = 4 * done // max(1, args.students)
                if quarter and quarter not in marks:
                    marks[quarter] = (done, now["VmRSS"])
            time.sleep(0.25)
        wall = time.perf_counter() - start
        got = scores(course)
        full = sum(1 for s in got.values() if s == max(got.values(), default=0))
    print(f"batch: {args.students} honest {a} notebooks in one stock `nbgrader autograde`, {os.cpu_count()} CPUs")
    print(
        f"graded {len(got)} of {args.students} ({full} at full marks); {wall:.0f} s, {wall / args.students:.2f} s per notebook"
    )
    for q in sorted(marks):
        print(f"  after {marks[q][0]:4d} notebooks: grader resident {marks[q][1]:7.0f} MB")
    print(
        f"grader's peak resident size (VmHWM): {peak:.0f} MB = {peak / TARGET_MB:.2f} x the 1 GB target "
        f"(last reading {last.get('VmRSS', 0):.0f} MB)"
    )
    return 0 if len(got) == args.students and peak < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
