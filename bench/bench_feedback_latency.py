"""Feedback at submission under a deadline rush: from hand-in to the feedback the student fetches.

    sudo .venv/bin/python bench/bench_feedback_latency.py [--students 100] [--window 60] [--workers 3]

Builds a copy of the course (bench_grading.make_course) with an exchange, a Redis on 127.0.0.1
(tests/redis_server.py) and the feedback service (``python -m autograder.ontime --workers N``, every
assignment graded at submission), and makes ``--students`` Linux accounts (``ebench-sNNN``, no home,
no shell; removed at the end: the service checks that each hand-in is its student's own). Then, in
the same run:

0. the service draws the roster's graded inputs ahead (``judge/ahead.py``: the students are the
   members of a group, as on the hub; ``--no-ahead``: none), as it does long before a deadline;
   the time it took is printed;
1. the floor: one hand-in alone, the queue's workers warm, from its folder in the inbound to its
   feedback released (the service's own record: the server's ctime of the folder, the time it
   released); and the plain kernel floor of bench_grading (a kernel started, ``import torch, encdec``,
   shut down);
2. the rush: each student hands in one notebook at a random moment of ``--window`` seconds (a
   realistic mix of the course's fixture submissions: about 60 % correct, 20 % one known mistake,
   15 % the untouched release, 5 % hostile folders of autograder/fixtures/inbound.py), and the
   latency of each is read from the service's record: p50, p95 and max (target: p95 under 90 s),
   each beside the floor;
3. the class figure: the rush's graded notebooks per minute once the queue was busy, extrapolated to
   1,500 notebooks (target: 20 minutes), beside the same class at the plain floor's cost per
   notebook on the same workers; and the workers' busy seconds per notebook (RQ's own start and end).

Needs root (accounts, owners). Say what else ran on the machine when you quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from bench_grading import ASSIGNMENTS, PY, busy_seconds, floor, make_course

from autograder.fixtures import table
from autograder.fixtures.inbound import ROWS
from autograder.fixtures.make import graded_notebook

CLASS_NOTEBOOKS, CLASS_MINUTES, P95_S = 1500, 20, 90  # the targets
HOSTILE = ["notebook_link", "fifo", "too_many_bytes", "folder_swapped", "other_owner"]  # inbound.py rows
PREFIX = "ebench-s"
GROUP = "ebench-students"  # the roster the service draws ahead for (ENCDEC_STUDENTS_GROUP)


def mix(n: int, rng: random.Random) -> list[tuple[str, str, str | None]]:
    """(student, assignment, fixture or None: the release; 'hostile:<row>': a hostile folder)."""
    manifest = table.grading()
    out = []
    for i in range(n):
        a = ASSIGNMENTS[i % len(ASSIGNMENTS)]
        mine = sorted(name for name, spec in manifest.items() if spec["assignment"] == a)
        good = [m for m in mine if m.endswith(("_pass_all", "_style"))]
        bugs = [m for m in mine if "_bug_" in m]
        roll = rng.random()
        pick = (
            rng.choice(good)
            if roll < 0.6
            else rng.choice(bugs)
            if roll < 0.8
            else None
            if roll < 0.95
            else f"hostile:{rng.choice(HOSTILE)}"
        )
        out.append((f"{PREFIX}{i:03d}", a, pick))
    return out


def hand_in(course: Path, inbound: Path, student: str, a: str, pick: str | None, secret: Path) -> None:
    """The folder nbgrader's submit makes, then renamed into the inbound folder in one step."""
    user = pwd.getpwnam(student)
    name = f"{student}+{a}+{time.strftime('%Y-%m-%d %H:%M:%S.000000 UTC', time.gmtime())}+{secrets.token_urlsafe(6)}"
    folder = Path(tempfile.mkdtemp(dir=inbound.parent)) / name  # a folder of its own: hostile plants move things
    shutil.copytree(course / "exercises" / a / "reference", folder / "reference")
    fixture = pick if pick and not pick.startswith("hostile:") else None
    shutil.copy(graded_notebook(fixture) if fixture else course / "exercises" / a / f"{a}.ipynb", folder / f"{a}.ipynb")
    (folder / "submission_secret.txt").write_text(secrets.token_hex(32))
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid)
    if pick and pick.startswith("hostile:"):
        ROWS[pick.split(":", 1)[1]].plant(folder, secret, user.pw_uid, user.pw_gid)
    os.rename(folder, inbound / name)  # (folder_swapped's: a link, its folder moved beside it)


def record(course: Path) -> dict:
    path = course / "grading" / "autograded" / ".driver" / "ontime.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def wait_settled(course: Path, count: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = {k: v for k, v in record(course).items() if v["outcome"] != "queued"}
        if len(done) >= count:
            return done
        time.sleep(0.5)
    raise SystemExit(f"not settled in {timeout:.0f} s: {len(done)} of {count}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--window", type=float, default=60.0, help="seconds the hand-ins are spread over")
    parser.add_argument("--workers", type=int, default=3)  # as hub.env: 3 on 2 cores
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument(
        "--no-ahead", action="store_true", help="put the students in no group: nothing drawn before they hand in"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: it makes the students' accounts and gives them their hand-ins")
    from redis_server import redis_server
    from rq import Worker

    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="bench-ontime-"))
    os.chmod(tmp, 0o755)
    made: list[str] = []
    service = None
    try:
        course = make_course(tmp / "course")
        inbound = course / "exchange" / "encdec" / "inbound"
        inbound.mkdir(parents=True)
        os.chmod(inbound, 0o3733)
        secret = tmp / "solutions.ipynb"  # what no hand-in may bring in (the hostile rows aim at it)
        secret.write_text("SOLUTIONS\n")
        students = mix(args.students + 1, rng)  # the first one is the floor's
        subprocess.run(["groupadd", "--system", GROUP], check=True, capture_output=True)
        for student, _, _ in students:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "-G", GROUP, student],
                check=True,
                capture_output=True,
            )
            made.append(student)
        load = os.getloadavg()
        with redis_server() as url:
            from redis import Redis

            env = dict(
                os.environ,
                ENCDEC_EXCHANGE=str(course / "exchange"),
                ENCDEC_FEEDBACK_AT_SUBMISSION=",".join(ASSIGNMENTS),
                ENCDEC_ATTEMPTS="5",
                ENCDEC_STUDENTS_GROUP="" if args.no_ahead else GROUP,
            )
            log = open(tmp / "service.log", "w")  # noqa: SIM115 (the service writes it until the run ends)
            service = subprocess.Popen(
                [PY, "-m", "autograder.ontime", "--redis", url, "--workers", str(args.workers), "--poll", "0.5"],
                cwd=course,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            t = time.monotonic()
            while Worker.count(connection=Redis.from_url(url)) < args.workers:
                if time.monotonic() - t > 600 or service.poll() is not None:
                    raise SystemExit("the workers did not start:\n" + (tmp / "service.log").read_text()[-3000:])
                time.sleep(0.5)
            print(f"service and {args.workers} simple workers ready in {time.monotonic() - t:.1f} s")
            ahead_s = None if args.no_ahead else wait_drawn_ahead(tmp / "service.log", service, t)

            # 1. the floor: one honest hand-in alone
            first = students[0]
            hand_in(course, inbound, first[0], first[1], graded_notebook_name(first), secret)
            alone = next(iter(wait_settled(course, 1, 600).values()))
            floor_s = alone["released"] - alone["handed_in"]
            plain = floor("plain", tmp)

            # 2. the rush
            rush = students[1:]
            moments = sorted(rng.uniform(0, args.window) for _ in rush)
            start = time.time()
            for (student, a, pick), at in zip(rush, moments):
                time.sleep(max(0.0, start + at - time.time()))
                hand_in(course, inbound, student, a, pick, secret)
            done = wait_settled(course, len(students), 3600)
            busy = busy_seconds(url)
        rows = [v for k, v in done.items() if v["student"] != first[0]]
        outcomes: dict[str, int] = {}
        for v in rows:
            outcomes[v["outcome"]] = outcomes.get(v["outcome"], 0) + 1
        latency = sorted(v["released"] - v["handed_in"] for v in rows if "released" in v)
        p50, p95 = statistics.median(latency), latency[max(0, int(round(0.95 * len(latency))) - 1)]
        graded = [v for v in rows if v["outcome"] == "graded"]
        span = max(v["released"] for v in graded) - min(v["handed_in"] for v in graded)
        notebooks = 1 + sum(1 for v in rows if "attempt" in v and v["outcome"] in ("graded", "failed"))  # jobs run
        per_min = len(graded) / span * 60
        class_min = CLASS_NOTEBOOKS / per_min
        class_floor = CLASS_NOTEBOOKS * plain / args.workers / 60
        print(
            f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
            f"(1/5/15 min) when the run began"
        )
        print(f"rush: {len(rush)} students handed in within {args.window:.0f} s; outcomes {outcomes}")
        print(
            "inputs drawn ahead: none (--no-ahead)"
            if ahead_s is None
            else f"inputs drawn ahead for the roster of {len(students)} in {ahead_s:.0f} s from the service's start, "
            "before the rush (the graders draw nothing at hand-in)"
        )
        print(
            f"floor: one hand-in alone, hand-in to feedback {floor_s:.1f} s; plain kernel floor "
            f"(start, import torch, encdec, shut down) {plain:.2f} s"
        )
        print(
            f"hand-in to feedback: p50 {p50:.1f} s, p95 {p95:.1f} s, max {latency[-1]:.1f} s "
            f"(p95 / floor {p95 / floor_s:.1f}x; target p95 < {P95_S} s: {'met' if p95 < P95_S else 'NOT met'})"
        )
        part = {
            k: statistics.median(v[k] - v[j] for v in graded)
            for j, k in (("handed_in", "published"), ("published", "applied"), ("applied", "released"))
        }
        print(
            f"where a graded hand-in's time went (medians): collected, queued and graded {part['published']:.1f} s, "
            f"written to the gradebook {part['applied']:.1f} s, feedback made and released {part['released']:.1f} s "
            f"(the last two in the service, one hand-in after another)"
        )
        print(
            f"throughput in the rush: {per_min:.1f} notebooks/min on {args.workers} workers; "
            f"workers busy {busy / notebooks:.2f} s per notebook (plain floor {plain:.2f} s, "
            f"{busy / notebooks / plain:.1f}x)"
        )
        print(
            f"a class of {CLASS_NOTEBOOKS:,} notebooks at this throughput: {class_min:.0f} min (at the plain "
            f"floor's cost on {args.workers} workers: {class_floor:.0f} min; target <= {CLASS_MINUTES} min: "
            f"{'met' if class_min <= CLASS_MINUTES else 'NOT met'})"
        )
        return 0
    finally:
        if service is not None and service.poll() is None:
            os.killpg(service.pid, 15)
            service.wait(60)
        for student in made:
            subprocess.run(["userdel", student], capture_output=True)
        subprocess.run(["groupdel", GROUP], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def wait_drawn_ahead(log: Path, service, start: float) -> float:
    """Seconds from ``start`` until the service's draw ahead (judge/ahead.py) said it was done with
    every assignment: a class's roster is drawn long before its deadline."""
    while True:
        said = [line for line in log.read_text().splitlines() if "students; inputs drawn" in line]
        if len(said) >= len(ASSIGNMENTS):
            return time.monotonic() - start
        if service.poll() is not None or time.monotonic() - start > 3600:
            raise SystemExit("the draw ahead did not finish:\n" + log.read_text()[-3000:])
        time.sleep(1.0)


def graded_notebook_name(student_row) -> str | None:
    """The floor's hand-in: a correct one of its assignment."""
    a = student_row[1]
    return next(n for n, s in sorted(table.grading().items()) if s["assignment"] == a and n.endswith("_pass_all"))


if __name__ == "__main__":
    sys.exit(main())
