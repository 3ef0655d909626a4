"""The grader's memory when a kernel sends one message far past the limit, against an honest notebook:
each graded alone by stock `nbgrader autograde` from a copy of the course (every kernel in the sandbox,
behind the metering relay, autograder/sandbox/relay.py).

    .venv/bin/python bench/bench_message_cap.py [--work DIR] [--only-hostile]

The hostile notebooks are fixtures of the table (autograder/fixtures/big_messages.py): one display
message with 3 GiB of zero pages as buffers, and one of 4,096 frames of 1 MiB. Before the relay the
first took the grader to 2.4 GB (jupyter_client receives a message whole). Prints, for each run, the
grading process's peak resident size (VmHWM, read from /proc every 50 ms), its score and the relay's
reason, then the ratio of the worst hostile peak to the honest one; `peak-mb <MB>` is the worst
hostile peak (the test reads it). Exit status 1 if a hostile peak reaches TARGET_MB or a score differs
from the table's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_grader_batch import status_mb  # noqa: E402 (after the sys.path line that lets it be found)
from bench_grading import make_course, scores, submit  # noqa: E402 (after the sys.path line that lets it be found)

from autograder.fixtures import table  # noqa: E402 (after the sys.path line that lets it be found)
from autograder.fixtures.make import graded_notebook  # noqa: E402 (after the sys.path line that lets it be found)

HOSTILE = ["hostile_message_buffers", "hostile_message_frames"]
HONEST = "db_pass_all"
A = "decoder_block"
TARGET_MB = 1024


def graded_alone(course: Path, student: str) -> tuple[float, float]:
    """(peak resident MB of `nbgrader autograde` grading `student` alone, seconds)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbgrader", "autograde", A, "--student", student],
        cwd=course,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, status_mb(proc.pid).get("VmHWM", 0.0))
        time.sleep(0.05)
    return peak, time.perf_counter() - start


def stopped(course: Path, student: str) -> dict:
    path = course / "grading" / "autograded" / student / A / f"{A}.ipynb"
    try:
        return json.loads(path.read_text())["metadata"].get("encdec", {}).get("stopped", {})
    except (OSError, ValueError):
        return {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="folder for the course copy (default: a temporary one)")
    parser.add_argument("--only-hostile", action="store_true", help="skip the honest run")
    args = parser.parse_args()
    names = HOSTILE if args.only_hostile else [HONEST, *HOSTILE]
    with tempfile.TemporaryDirectory(prefix="bench-message-", dir=args.work) as tmp:
        course = make_course(Path(tmp) / "course")
        submit(course, {(n, A): graded_notebook(n) for n in names})
        runs = {n: graded_alone(course, n) for n in names}
        got = scores(course)
        expected = table.grading()
        ok = True
        for n in names:
            peak, seconds = runs[n]
            score, want = got.get((n, A)), expected[n]["expected_score"]
            ok &= score == want
            why = stopped(course, n)
            print(
                f"{n:26s} peak {peak:6.0f} MB  {seconds:5.1f} s  score {score} (table: {want})  "
                f"{why.get('key', '-')} {why.get('why', '')} {why.get('channel', '')}"
            )
    worst = max(runs[n][0] for n in HOSTILE)
    if not args.only_hostile:
        print(
            f"worst hostile peak / honest peak: {worst:.0f} / {runs[HONEST][0]:.0f} MB = "
            f"{worst / runs[HONEST][0]:.2f} (issue 37 saw 2,400 MB for such a message before the relay)"
        )
    print(f"peak-mb {worst:.0f}")
    return 0 if ok and worst < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
