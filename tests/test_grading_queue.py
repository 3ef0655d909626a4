"""Grading on a real job queue (RQ, with a Redis on 127.0.0.1: tests/redis_server.py) into a real
PostgreSQL gradebook (tests/pg_server.py): two workers as separate processes grade fixture
submissions (honest, wrong, a flagged cheat, crashing, not JSON) to the fixture table's scores and
integrity flags; a task delivered twice does not count twice; a worker killed mid-task (SIGKILL) leaves no partial result, and the
task is graded once a new worker picks it up (RQ's abandoned-job clean-up and retry). And the
fixture table through stock `nbgrader autograde`, the driver and the queue, into PostgreSQL and
into SQLite, to the table's scores."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from grading_course import MANIFEST, PY, coursedir, scores, scratch_course, submit
from pg_server import create_database, postgres_server
from redis_server import redis_server
from test_sandbox_hostile import course_base

pytestmark = [pytest.mark.grading, pytest.mark.slow]
A = "decoder_block"
FIXTURES = ["db_pass_all", "db_bug_mlp_skipped", "cheat_db_ref_forward", "broken_raises", "broken_invalid_json"]


@pytest.fixture
def course_dir():
    folder = Path(tempfile.mkdtemp(prefix="queue-", dir=course_base()))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def services():
    with postgres_server() as port, redis_server() as url:
        yield port, url


def queue(course: Path, url: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, "-m", "autograder.taskqueue", "--redis", url, *args],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def worker(course: Path, url: str, name: str) -> subprocess.Popen:
    """A worker in its own process group (so a test can kill it with everything it started)."""
    log = open(course / f"{name}.log", "w")  # noqa: SIM115 (the worker writes it until the fixture ends)
    return subprocess.Popen(
        [
            PY,
            "-m",
            "autograder.taskqueue",
            "--redis",
            url,
            "worker",
            "--name",
            name,
            "--heartbeat",
            "2",
            "--grace",
            "8",
        ],
        cwd=course,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (RQ's work-horse runs in a session of its own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def gradebook_rows(course: Path) -> dict[str, int]:
    """How many submissions, notebooks and grades the gradebook holds (nothing counted twice)."""
    from nbgrader.api import Gradebook

    cd = coursedir(course)
    with Gradebook(cd.db_url, cd.course_id) as gb:
        subs = gb.find_assignment(A).submissions
        nbs = [nb for s in subs for nb in s.notebooks]
        return {"submissions": len(subs), "notebooks": len(nbs), "grades": sum(len(nb.grades) for nb in nbs)}


def test_two_workers_grade_into_postgresql_and_a_redelivery_counts_once(services, course_dir):
    from redis import Redis
    from rq import Queue
    from rq.job import Job

    from autograder.integrity import flagged_submissions
    from autograder.taskqueue.course import fingerprint, submission_dir
    from autograder.taskqueue.jobs import QUEUE, job_id

    port, url = services
    course = scratch_course(course_dir, [A], create_database(port, "queue"))
    for name in FIXTURES:
        submit(course, name)
    assert queue(course, url, "enqueue", A).returncode == 0
    workers = [worker(course, url, f"w{i}") for i in (1, 2)]
    try:
        done = queue(course, url, "collect", A, "--wait")
        # every notebook graded, the unreadable one as the release with no answers (autograder/handed_in.py)
        assert done.returncode == 0 and f"graded: {len(FIXTURES)}" in done.stdout, done.stdout
        got = scores(course, A)
        assert got == {n: float(MANIFEST[n]["expected_score"]) for n in FIXTURES}, (got, done.stdout)
        # the single writer replays nbgrader's integrity step: the cheat is held for review, no one else
        flags = {f["student"]: str(f["reasons"]) for f in flagged_submissions(coursedir(course).db_url)}
        for n in FIXTURES:
            assert (MANIFEST[n]["flag"] in flags.get(n, "")) if MANIFEST[n]["flag"] else n not in flags, (n, flags)
        assert [p for p in course.rglob("gradebook.db") if ".driver" not in p.parts] == []  # nor to a SQLite file
        before = gradebook_rows(course)

        # RQ delivers a finished job again (an operator's requeue, a retry after a lost ack).
        conn = Redis.from_url(url)
        cd = coursedir(course)
        jid = job_id(
            cd.course_id, str(course.resolve()), A, "db_pass_all", fingerprint(submission_dir(cd, A, "db_pass_all"))
        )
        Queue(QUEUE, connection=conn).enqueue_job(Job.fetch(jid, connection=conn))
        deadline = time.monotonic() + 120
        while Job.fetch(jid, connection=conn).get_status().value != "finished" and time.monotonic() < deadline:
            time.sleep(0.5)
        again = queue(course, url, "collect", A, "--wait")
        assert "already graded" in again.stdout, again.stdout
        assert scores(course, A) == got and gradebook_rows(course) == before
    finally:
        stop(*workers)


def test_a_worker_killed_mid_task_leaves_nothing_and_a_new_worker_grades_it(services, course_dir):
    from autograder.taskqueue.course import TMP_PREFIX, results_dir

    port, url = services
    course = scratch_course(course_dir, [A], create_database(port, "killed"))
    submit(course, "db_pass_all", "late_student")
    assert queue(course, url, "enqueue", A).returncode == 0
    store = results_dir(coursedir(course), A, "late_student")
    first = worker(course, url, "doomed")
    deadline = time.monotonic() + 120
    while not (store.is_dir() and any(p.name.startswith(TMP_PREFIX) for p in store.iterdir())):
        assert time.monotonic() < deadline, (course / "doomed.log").read_text()[-3000:]
        time.sleep(0.1)
    time.sleep(1.0)  # inside nbgrader's Autograde
    for pid in [first.pid, *descendants(first.pid)]:  # the worker, its work-horse, the sandbox under it
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    first.wait()
    time.sleep(2.0)
    assert [p.name for p in store.iterdir() if not p.name.startswith(TMP_PREFIX)] == []  # nothing published
    assert "Job OK" not in (course / "doomed.log").read_text()
    assert queue(course, url, "collect", A).returncode == 1  # nothing to apply yet
    assert scores(course, A) == {}  # nothing written

    second = worker(course, url, "rescuer")
    try:
        done = queue(course, url, "collect", A, "--wait", timeout=400)
        assert "graded: 1" in done.stdout, done.stdout
        assert scores(course, A) == {"late_student": float(MANIFEST["db_pass_all"]["expected_score"])}
    finally:
        stop(second)


# The fixture table through every engine (stock `nbgrader autograde`, the driver, the queue's
# workers) into both gradebooks (PostgreSQL, SQLite): the matrix (`make test-all`, `make
# queue-check`). `make test` has one of each elsewhere: the queue into PostgreSQL above (the
# deployment the design note describes), stock nbgrader on SQLite over the whole table
# (tests/test_grading_fixtures.py), the driver on SQLite over the hostile batch
# (tests/test_sandbox_hostile.py). Without ENCDEC_QUEUE_ALL=1: one fixture per assignment and
# verdict kind; with it, every fixture.
ALL = os.environ.get("ENCDEC_QUEUE_ALL") == "1"
TABLE = (
    sorted(MANIFEST)
    if ALL
    else ["db_pass_all", "ts_bug_no_shift", "kv_bug_no_cache", "cheat_kv_forged_structure", "broken_os_exit"]
)
PAIRS = [
    pytest.param(e, b, id=f"{e}-{b}", marks=pytest.mark.matrix)
    for e in ("stock", "driver", "queue")
    for b in ("postgresql", "sqlite")
]


def _expected(names: list[str], assignment: str) -> dict[str, float]:
    return {n: float(MANIFEST[n]["expected_score"]) for n in names if MANIFEST[n]["assignment"] == assignment}


def _grade(course: Path, engine: str, assignments: list[str], url: str) -> str:
    """Grade every submission of `assignments` with `engine`; returns its logs."""
    if engine == "stock":  # one `nbgrader autograde` per assignment (a broken notebook makes its status 1)
        runs = [
            subprocess.run(
                [PY, "-m", "nbgrader", "autograde", a], cwd=course, capture_output=True, text=True, timeout=3600
            )
            for a in assignments
        ]
        return "".join(r.stderr[-2000:] for r in runs)
    if engine == "driver":
        run = subprocess.run(
            [PY, "-m", "autograder.driver", *assignments, "--workers", "2", "--json", "first.json"],
            cwd=course,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        return run.stdout[-3000:] + run.stderr[-3000:]
    for a in assignments:
        assert queue(course, url, "enqueue", a).returncode == 0
    workers = [worker(course, url, f"t{i}") for i in (1, 2)]
    try:
        return "".join(queue(course, url, "collect", a, "--wait", timeout=3600).stdout for a in assignments)
    finally:
        stop(*workers)


@pytest.mark.parametrize("engine,backend", PAIRS)
def test_the_fixture_table(services, course_dir, engine, backend):
    port, url = services
    assignments = sorted({MANIFEST[n]["assignment"] for n in TABLE})
    db_url = create_database(port, f"table_{engine}") if backend == "postgresql" else None
    course = scratch_course(course_dir, assignments, db_url)
    for name in TABLE:
        submit(course, name)
    logs = _grade(course, engine, assignments, url)
    assert coursedir(course).db_url.split(":")[0].startswith(backend)  # scores() reads that gradebook
    if backend == "postgresql":  # nothing went to a SQLite file (the driver's private ones aside)
        assert [p for p in course.rglob("gradebook.db") if ".driver" not in p.parts] == []
    for a in assignments:
        assert scores(course, a) == _expected(TABLE, a), (engine, backend, a, logs)
    if engine == "driver":  # resumable: a second run grades nothing again and changes no score
        again = subprocess.run(
            [PY, "-m", "autograder.driver", *assignments, "--json", "again.json"],
            cwd=course,
            capture_output=True,
            text=True,
            timeout=600,
        )
        first, second = (json.loads((course / f).read_text()) for f in ("first.json", "again.json"))
        assert {r["student"] for r in second if r["reason"] == "already graded"} == {
            r["student"] for r in first if r["status"] == "graded"
        }, again.stdout
        assert all(scores(course, a) == _expected(TABLE, a) for a in assignments)


def test_the_unit_stops_where_the_writer_starts():
    """The gradebook is written once, by the writer: the unit runs the course's autograde steps up to
    nbgrader's SaveAutoGrades (into a throwaway gradebook it only reads the assignment from), the
    writer runs the rest; none is left out or run twice."""
    from autograder import ROOT
    from autograder.taskqueue.course import FIRST_WRITER_STEP, autograde_steps, load_config

    config = load_config(ROOT)
    unit, writer = autograde_steps(config)
    assert unit + writer == list(config.Autograde.autograde_preprocessors)
    assert writer[0] == FIRST_WRITER_STEP and "autograder.preprocessors.GradedExecute" in unit
    assert {"autograder.preprocessors.FlagIntegrity", "nbgrader.preprocessors.AssignLatePenalties"} <= set(writer)
