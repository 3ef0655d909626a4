"""The grader's memory over a batch that mixes every hostile message fixture with 100 honest notebooks,
in one stock `nbgrader autograde` from a copy of the course (every kernel in the sandbox, behind the
metering relay, autograder/sandbox/relay.py).

    .venv/bin/python bench/bench_message_batch.py [--students 100] [--work DIR]

Hands in, for decoder_block, `--students` honest notebooks (the assignment's `*_pass_all`, `*_style`
fixtures in turn) and the rows `hostile_message_<kind>` (autograder/fixtures/big_messages.py: one
message past the limit, 64 input requests of 31 MiB on stdin, 64 messages of 31 MiB on control, a
million empty messages, a drip, 40 messages of 31 MiB on shell and on iopub), graded in this order:
the first tenth of the honest ones, the hostile ones, the rest. Reads the grading process's resident
size from /proc every 50 ms and prints its baseline (its largest size over the first honest ones),
its peak (VmHWM) and its size over the honest notebooks graded after the hostile ones, against the
baseline; the scores against the table and each hostile notebook's recorded cut. Issue 49 saw 64
input requests of 31 MiB take the grader to 3.66 GB, and the later honest notebooks graded in a
1.7 GB process. Exit status 1 if the peak reaches TARGET_MB, a score differs from the table's, or a
hostile notebook was not stopped by the relay on the expected channel.
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

from bench_grader_batch import status_mb  # noqa: E402 (after the sys.path line that lets it be found)
from bench_grading import make_course, scores, submit  # noqa: E402 (after the sys.path line that lets it be found)
from bench_message_cap import stopped  # noqa: E402 (the same assignment's record of a cut)

from autograder.fixtures import table  # noqa: E402 (after the sys.path line that lets it be found)
from autograder.fixtures.big_messages import MESSAGES  # noqa: E402 (after the sys.path line that lets it be found)
from autograder.fixtures.make import graded_notebook  # noqa: E402 (after the sys.path line that lets it be found)

A = "decoder_block"
TARGET_MB = 1024


def students(n: int) -> dict[str, str]:
    """Student -> fixture, in the order nbgrader grades them (sorted by name): a tenth of the honest
    ones (`a...`), the hostile ones (`h_<kind>`), the other honest ones (`s...`)."""
    honest = sorted(
        n for n, spec in table.grading().items() if spec["assignment"] == A and n.endswith(("_pass_all", "_style"))
    )
    first = max(1, n // 10)
    out = {f"a{i:03d}": honest[i % len(honest)] for i in range(first)}
    out.update({f"h_{kind}": f"hostile_message_{kind}" for kind in MESSAGES})
    out.update({f"s{i:03d}": honest[i % len(honest)] for i in range(first, n)})
    return out


def done(course: Path) -> set[str]:
    return {p.parent.parent.name for p in (course / "grading" / "autograded").glob(f"*/{A}/{A}.ipynb")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=100, help="honest notebooks")
    parser.add_argument("--work", type=Path, help="folder for the course copy (default: a temporary one)")
    args = parser.parse_args()
    who = students(args.students)
    hostile = [s for s in who if s.startswith("h_")]
    first = [s for s in who if s.startswith("a")]
    with tempfile.TemporaryDirectory(prefix="bench-message-batch-", dir=args.work) as tmp:
        course = make_course(Path(tmp) / "course")
        submit(course, {(s, A): graded_notebook(n) for s, n in who.items()})
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "nbgrader", "autograde", A],
            cwd=course,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        phases = {"before": [], "hostile": [], "after": []}  # resident MB while grading each part
        peak, spans = 0.0, {}  # phase -> when it began
        while proc.poll() is None:
            now = status_mb(proc.pid)
            if now:
                peak = max(peak, now.get("VmHWM", 0.0))
                finished = done(course)
                phase = "after" if finished >= set(hostile) else "hostile" if finished >= set(first) else "before"
                phases[phase].append(now["VmRSS"])
                spans.setdefault(phase, time.perf_counter())
            time.sleep(0.05)
        wall = time.perf_counter() - start
        got = scores(course)
        cuts = {s: stopped(course, s) for s in hostile}
    expected = table.grading()
    ok = all(got.get((s, A)) == expected[n]["expected_score"] for s, n in who.items())
    print(
        f"batch: {args.students} honest {A} notebooks and {len(hostile)} hostile message fixtures in one stock "
        f"`nbgrader autograde`, {os.cpu_count()} CPUs, {wall:.0f} s; scores as the table: {ok}"
    )
    for s in hostile:
        kind, cut = s[2:], cuts[s]
        want = MESSAGES[kind][1]
        ok &= (cut.get("channel"), cut.get("why")) == want
        print(
            f"  hostile_message_{kind:8s} score {got.get((s, A))}  cut {cut.get('key', '-')} "
            f"{cut.get('channel', '')} {cut.get('why', '')} (expected {want[0]} {want[1]})"
        )
    base = max(phases["before"], default=0.0)
    after = phases["after"] or [0.0]
    print(f"grader resident size: baseline {base:.0f} MB (largest over the first {len(first)} honest notebooks)")
    hostile_s = spans.get("after", start) - spans.get("hostile", start)
    print(f"  while grading the hostile ones ({hostile_s:.0f} s): up to {max(phases['hostile'], default=0.0):.0f} MB")
    later = sum(s[0] == "s" for s in who)
    print(
        f"  over the {later} honest ones after them: {min(after):.0f} to {max(after):.0f} MB, "
        f"last {after[-1]:.0f} MB = {after[-1] / max(base, 1):.2f} x the baseline"
    )
    print(
        f"  peak (VmHWM) {peak:.0f} MB = {peak / TARGET_MB:.2f} x the 1 GB target "
        f"(issue 49: 3,660 MB peak, 1,700 MB after, before the budgets over time)"
    )
    return 0 if ok and peak < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
