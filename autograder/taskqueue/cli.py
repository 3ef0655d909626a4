"""`python -m autograder.taskqueue`: grading on an RQ queue (enqueue, worker, collect, grade)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from dataclasses import asdict
from pathlib import Path

from .jobs import DEFAULT_URL, QUEUE, collect, enqueue
from .writer import summary

DESCRIPTION = "Grade submissions on an RQ job queue: workers on any host, one writer of the gradebook."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.taskqueue", description=DESCRIPTION)
    parser.add_argument(
        "--redis",
        default=os.environ.get("ENCDEC_REDIS_URL", DEFAULT_URL),
        help=f"the broker (default: $ENCDEC_REDIS_URL or {DEFAULT_URL})",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in [
        ("enqueue", "queue every submission not graded yet"),
        ("collect", "apply the published results to the gradebook (the single writer)"),
        ("grade", "enqueue, then collect until every job is done"),
    ]:
        p = sub.add_parser(name, help=text)
        p.add_argument("assignment", nargs="+")
        p.add_argument("--student", action="append", help="only this student (repeatable)")
        if name != "collect":
            p.add_argument("--force", action="store_true", help="regrade what was graded")
            p.add_argument("--timeout", type=int, default=None, help="wall-clock seconds per notebook")
        if name != "enqueue":
            p.add_argument("--json", type=Path, help="also write the results to this JSON file")
        if name == "collect":
            p.add_argument("--wait", action="store_true", help="until no job of these submissions is pending")
    w = sub.add_parser("worker", help="an RQ worker of the grading queue (RQ's own `Worker`)")
    w.add_argument("--burst", action="store_true", help="stop when the queue is empty")
    w.add_argument("--name", default=None)
    w.add_argument(
        "--simple",
        action="store_true",
        help="RQ's non-forking worker: one sandbox fork server for every job (faster); a lost "
        "worker's job is retried only after its whole budget",
    )
    w.add_argument("--heartbeat", type=int, default=10, help="seconds between a busy worker's heartbeats")
    w.add_argument(
        "--grace",
        type=int,
        default=60,
        help="seconds after a missed heartbeat before the job counts as abandoned and is retried",
    )
    args = parser.parse_args(argv)
    # nbgrader's own gradebook code trips SQLAlchemy's autoflush warning on every new submission
    warnings.filterwarnings("ignore", message=".*not in session.*")
    root = Path.cwd()
    if args.command == "worker":
        return worker(args.redis, args.burst, args.name, args.heartbeat, args.grace, args.simple)
    if args.command in ("enqueue", "grade"):
        queued = enqueue(root, args.assignment, args.redis, args.force, args.timeout, args.student)
        print(f"queued {len(queued)} job(s) on {QUEUE!r}", file=sys.stderr)
        if args.command == "enqueue":
            return 0
    results = collect(root, args.assignment, args.redis, wait=args.command == "grade" or args.wait, only=args.student)
    print(summary(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 1 if any(r.status in ("failed", "killed") for r in results) else 0


def worker(url: str, burst: bool, name: str | None, heartbeat: int = 10, grace: int = 60, simple: bool = False) -> int:
    """RQ's own forking `Worker` (`jobs.GradingWorker`) on the grading queue, with the grader's
    modules imported once here (each job runs in a fork of this process, RQ's work-horse)."""
    from rq import Queue

    from autograder.sandbox.sandbox import SandboxUnavailable, check_available

    from .course import load_config
    from .jobs import GradingSimpleWorker, GradingWorker, connect

    try:
        check_available()
    except SandboxUnavailable as err:
        raise SystemExit(f"autograder.taskqueue: {err}") from None
    import nbgrader.converters  # noqa: F401 - paid once, not once per job

    config = load_config(Path.cwd())  # imports the course's preprocessors and the sandbox
    from .unit import preload

    preload()  # the judges (torch), the integrity scan, the gradebook: imported here, not in every job
    from autograder.sandbox.kernel import prestart

    prestart(config)  # torch imported once in the sandbox, for every job's kernels
    conn = connect(url)
    if simple:
        w = GradingSimpleWorker([Queue(QUEUE, connection=conn)], connection=conn, name=name)
    else:
        w = GradingWorker(
            [Queue(QUEUE, connection=conn)], connection=conn, name=name, job_monitoring_interval=heartbeat
        )
        w.grace = grace
    w.work(burst=burst, with_scheduler=False)
    return 0
