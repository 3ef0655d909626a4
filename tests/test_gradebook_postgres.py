"""The gradebook on a real PostgreSQL server (tests/pg_server.py starts one on 127.0.0.1): stock
`nbgrader autograde` and the batch driver (`python -m autograder.driver`: a process pool, the
parent the single writer) grade honest, wrong and broken submissions into it, in the sandbox, with
the scores the fixture table (autograder/hostile/expected.json) gives for SQLite. The queue's
workers on PostgreSQL: tests/test_grading_queue.py."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from grading_course import coursedir
from pg_server import create_database, postgres_server
from test_sandbox_hostile import ASSIGNMENT, HOSTILE, PY, course_base, make_course

pytestmark = pytest.mark.grading
STUDENTS = ["pass_all", "h_honest_wrong", "os_exit", "invalid_json"]
EXPECTED = json.loads((HOSTILE / "expected.json").read_text())


@pytest.fixture(scope="module")
def server():
    with postgres_server() as port:
        yield port


def course_on(url: str) -> Path:
    from autograder.taskqueue.course import submission_dir

    course = make_course(Path(tempfile.mkdtemp(prefix="pg-", dir=course_base())))
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"c.CourseDirectory.db_url = {url!r}\n")
    made = subprocess.run([PY, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"], cwd=course,
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-3000:]
    cd = coursedir(course)
    for s in STUDENTS:
        shutil.copytree(HOSTILE / "submitted" / s / ASSIGNMENT, submission_dir(cd, ASSIGNMENT, s))
    return course


def passed_items(url: str) -> dict[str, list[str] | None]:
    """student -> the graded items at full marks (None: no graded notebook), from the database."""
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(url, "encdec") as gb:
        for s in STUDENTS:
            try:
                nb = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, s)
            except MissingEntry:
                out[s] = None
                continue
            out[s] = sorted(g.name for g in nb.grades if g.score == g.max_score)
    return out


def check(url: str, course: Path) -> None:
    for s, got in passed_items(url).items():
        want = sorted(EXPECTED[s]["passed"])
        assert got == want or (not want and got is None), (s, got, EXPECTED[s]["why"])
    shutil.rmtree(course, ignore_errors=True)


def sqlite_files(course: Path) -> list[Path]:
    return [p for p in course.rglob("gradebook.db") if ".driver" not in p.parts]


def test_stock_nbgrader_autograde_into_postgresql(server):
    url = create_database(server, "stock")
    course = course_on(url)
    run = subprocess.run([PY, "-m", "nbgrader", "autograde", ASSIGNMENT], cwd=course, capture_output=True,
                         text=True, timeout=900)
    assert sqlite_files(course) == []  # nothing went to SQLite
    assert "pass_all" in run.stderr, run.stderr[-3000:]  # (the broken submission makes the exit status 1)
    check(url, course)


def test_batch_driver_into_postgresql(server):
    url = create_database(server, "driver")
    course = course_on(url)
    run = subprocess.run([PY, "-m", "autograder.driver", ASSIGNMENT, "--workers", "2", "--json", "r.json"],
                         cwd=course, capture_output=True, text=True, timeout=900)
    assert sqlite_files(course) == []
    results = {r["student"]: r for r in json.loads((course / "r.json").read_text())}
    assert {s: r["status"] for s, r in results.items()} == {s: EXPECTED[s]["status"] for s in STUDENTS}, run.stdout
    again = subprocess.run([PY, "-m", "autograder.driver", ASSIGNMENT, "--json", "again.json"], cwd=course,
                           capture_output=True, text=True, timeout=600)
    assert {r["student"] for r in json.loads((course / "again.json").read_text())
            if r["reason"] == "already graded"} == {s for s in STUDENTS if EXPECTED[s]["status"] == "graded"}, \
        again.stdout
    check(url, course)
