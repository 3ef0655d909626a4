"""The grader's memory and time at intake, on the worst notebooks a student can hand in, against an
honest one (issue 49).

    python bench/bench_intake.py [--before] [--autograde] [CASE ...]

Each case is a file a student hands in; a fresh process reads it as the course's exporter does
(``autograder.handed_in.read_handed_in``: the bounded reader and the course's own schema) and writes
the canonical notebook as nbgrader would (``nbformat.writes``, which validates it), and its peak
resident size (``VmHWM``: ``ru_maxrss`` would start from the bench's own size) and time are the
figures, against the floor of the same process on the honest solution. ``--before`` also reads each
file as the intake did before (``nbformat.reads``, whose schema validation of 30,000 invalid outputs
took 1.7 GB and 24 s, of 100,000 4.4 GB and 116 s). ``--autograde`` grades the honest solution and
the invalid outputs through stock ``nbgrader autograde`` with the course's configuration and prints
the peak of nbgrader's own process (the grader), of its children (the sandboxed kernel), and its
time (tens of seconds each).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

READ = """
import json, sys, time
from pathlib import Path
import nbformat
from autograder.handed_in import read_handed_in
from autograder.canonical import Refused
nbformat.writes(nbformat.v4.new_notebook())  # the validator loaded before the figures start


def hwm():  # this process's own peak (ru_maxrss would start from the parent's size at the fork)
    return int(next(x for x in open("/proc/self/status") if x.startswith("VmHWM")).split()[1])


path, how = Path(sys.argv[1]), sys.argv[2]
before = hwm()
start = time.perf_counter()
if how == "before":
    nb = nbformat.reads(path.read_text(), as_version=4)
    outcome = f"read, {len(nb.cells)} cells"
else:
    try:
        nb = read_handed_in(path)
        nbformat.writes(nb)
        outcome = f"read, {len(nb.cells)} cells"
    except Refused as refused:
        outcome = f"refused: {refused.key}"
print(json.dumps({"peak_kb": hwm(), "before_kb": before,
                  "seconds": time.perf_counter() - start, "outcome": outcome}))
"""


def cases() -> dict:
    """name -> the file's text (made here from the release and the solutions, as the fixtures are)."""
    import nbformat

    from autograder.fixtures.make import apply
    from autograder.fixtures.rows import invalid_outputs, printed
    from autograder.handed_in import LIMITS

    dicts = (LIMITS.json_items - 10) // 3  # {"a":0}, counts a string, a bracket and a comma
    return {
        "honest solution (the floor)": lambda: nbformat.writes(apply("decoder_block", {})),
        "honest solution, 12 MB of printed outputs": lambda: apply("decoder_block", {"__json__": printed(12)}),
        "30,000 invalid outputs": lambda: apply("decoder_block", {"__json__": invalid_outputs(30_000)}),
        "100,000 invalid outputs": lambda: apply("decoder_block", {"__json__": invalid_outputs(100_000)}),
        f"{dicts:,} one-key objects (just under the item limit)": lambda: (
            '{"cells": [' + ",".join(['{"a":0}'] * dicts) + "]}"
        ),
        "one string at the byte limit": lambda: json.dumps(
            {"cells": [], "metadata": {"x": "y" * (LIMITS.notebook_bytes - 100)}}
        ),
    }


def measure(path: Path, how: str) -> dict:
    out = subprocess.run([sys.executable, "-c", READ, str(path), how], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1][:80]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def autograde(files: dict[str, Path]) -> None:
    """Each file graded alone by stock `nbgrader autograde`: peak of the process tree, time."""
    from autograder.grade_fixtures import course_args, nbgrader
    from autograder.state import ENV, GradingState

    with tempfile.TemporaryDirectory(prefix="bench-intake-") as tmp:
        work = Path(tmp)
        state = GradingState(work)
        log = work / "nbgrader.log"
        args = course_args(work)
        if nbgrader("generate_assignment", "decoder_block", "--force", *args, log=log, work=work) != 0:
            raise SystemExit(f"generate_assignment failed: {log.read_text()[-2000:]}")
        print(f"{'through stock nbgrader autograde':52s} {'peak MB':>8s} {'kernel MB':>11s} {'s':>7s}  score")
        for i, (name, path) in enumerate(files.items()):
            student = f"s{i}"
            dest = state.submitted / student / "decoder_block"
            dest.mkdir(parents=True)
            shutil.copy(path, dest / "decoder_block.ipynb")
            shutil.copytree(ROOT / "exercises" / "decoder_block" / "reference", dest / "reference")
            # nbgrader in this process (its kernel is another): its own peak, and its children's
            wrapper = (
                "import atexit, os, resource, runpy, sys\n"
                "def peaks():\n"
                "    own = next(x for x in open('/proc/self/status') if x.startswith('VmHWM')).split()[1]\n"
                "    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
                "    os.write(int(os.environ['BENCH_FD']), f'{own} {kids}'.encode())\n"
                "atexit.register(peaks)\n"
                "sys.argv = ['nbgrader', *sys.argv[1:]]\n"
                "runpy.run_module('nbgrader', run_name='__main__')\n"
            )
            read, write = os.pipe()
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", wrapper, "autograde", "decoder_block", f"--student={student}", *args],
                cwd=ROOT,
                capture_output=True,
                pass_fds=(write,),
                env={**os.environ, ENV: str(work), "BENCH_FD": str(write)},
            )
            seconds = time.perf_counter() - start
            os.close(write)
            own, children = (int(v) / 1024 for v in os.read(read, 100).split())
            os.close(read)
            from nbgrader.api import Gradebook, MissingEntry

            with Gradebook(state.db_url) as gb:
                try:
                    score = f"{gb.find_submission('decoder_block', student).score:g}"
                except MissingEntry:
                    score = "not graded"
            print(f"{name:52s} {own:8.0f} {children:11.0f} {seconds:7.1f}  {score}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", action="store_true", help="also read each file as the intake did before")
    p.add_argument("--autograde", action="store_true", help="also grade the invalid outputs through nbgrader")
    p.add_argument("only", nargs="*", help="substrings of the case names to run (default: all)")
    args = p.parse_args(argv)
    from autograder.handed_in import LIMITS

    print(f"intake limits: {LIMITS}")
    print(f"{'case':52s} {'file MB':>8s} {'peak MB':>8s} {'reading MB':>10s} {'s':>7s}  outcome")
    floor = worst = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-intake-") as tmp:
        files = {}
        for name, make in cases().items():
            if args.only and not any(o in name for o in args.only) and not name.startswith("honest solution ("):
                continue
            path = Path(tmp) / f"{len(files)}.ipynb"
            path.write_text(make())
            files[name] = path
            for how in ("now", "before") if args.before else ("now",):
                r = measure(path, how)
                label = name if how == "now" else f"  before: {name}"
                if "error" in r:
                    print(f"{label:52s} {path.stat().st_size / 1e6:8.1f}   {r['error']}")
                    continue
                peak, reading = r["peak_kb"] / 1024, (r["peak_kb"] - r["before_kb"]) / 1024
                if how == "now":
                    floor = peak if name.startswith("honest solution (") else floor
                    worst = max(worst, peak) if not name.startswith("honest solution (") else worst
                print(
                    f"{label:52s} {path.stat().st_size / 1e6:8.1f} {peak:8.0f} {reading:10.0f} {r['seconds']:7.2f}  "
                    f"{r['outcome']}"
                )
        print(
            f"honest floor {floor:.0f} MB; worst case {worst:.0f} MB (+{worst - floor:.0f} MB, "
            f"x{worst / floor:.2f} the floor)"
        )
        if args.autograde:
            autograde({n: f for n, f in files.items() if n.startswith("honest solution (") or "invalid" in n})
    return 0


if __name__ == "__main__":
    sys.exit(main())
