"""`python -m autograder.driver`: the command line of the batch driver."""

from __future__ import annotations

import argparse
import json
import os
import warnings
from dataclasses import asdict
from pathlib import Path

from .batch import run, summary

DESCRIPTION = "Grade a whole batch of submissions in parallel, in the sandbox, resumably."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.driver", description=DESCRIPTION)
    parser.add_argument("assignment", nargs="+", help="one or more assignments, graded in one batch")
    parser.add_argument(
        "--workers",
        type=int,
        default=max(1, os.cpu_count() or 1),
        help="notebooks graded at the same time (default: one per CPU)",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=None,
        help="wall-clock seconds per notebook (default: SandboxedExecute.notebook_timeout)",
    )
    parser.add_argument("--force", action="store_true", help="regrade notebooks already graded")
    parser.add_argument("--student", action="append", help="grade only this student (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    # nbgrader's own gradebook code trips SQLAlchemy's autoflush warning on every new submission
    warnings.filterwarnings("ignore", message=".*not in session.*")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    results = run(args.assignment, args.workers, args.timeout, args.force, args.student)
    print(summary(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    bad = [r for r in results if r.status in ("failed", "killed")]
    return 1 if bad else 0
