"""Feedback at submission (autograder/ontime.py), the service's loop on a real inbound folder and a
real queue (Redis on 127.0.0.1, tests/redis_server.py; the worker RQ's own, run in this process):
the roster's inputs drawn ahead (judge/ahead.py); the hand-ins of autograder/fixtures/inbound.py's
``HAND_INS``, made one after the other with a limit
of one graded hand-in, each get the outcome their row names; the graded one's feedback is released
where ``nbgrader fetch_feedback`` looks for it and scores what stock ``nbgrader autograde`` gives the
same notebook (the session's stock batch); a hand-in past the limit gets a page that says so, even
after the student removed the graded one; a link or another user's folder is refused and gets
nothing.

Run as root (it gives the hand-ins to another user, ``nobody``; the service reads them as root, the
worst case)."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from grading_course import MANIFEST, ROOT, coursedir, scores, scratch_course
from nbgrader.utils import notebook_hash
from redis_server import redis_server
from test_sandbox_hostile import course_base

from autograder import assignments
from autograder.fixtures.inbound import HAND_INS
from autograder.fixtures.make import graded_notebook
from autograder.state import grading_state

pytestmark = [
    pytest.mark.grading,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="gives files to another user: needs root"),
]
FIRST = "wu_bug_mask_after_softmax"  # the graded hand-in: a known mistake, so the score is not the maximum
A = MANIFEST[FIRST]["assignment"]
STOCK_BATCH = [FIRST]  # graded in the session's stock batch (conftest.py)
STUDENT = "nobody"


def hand_in(folder: Path, uid: int, gid: int) -> str:
    """``folder`` as nbgrader's submit makes it (the notebook, the release's files, a secret), the
    student's; its secret."""
    shutil.copytree(ROOT / "exercises" / A / "reference", folder / "reference")
    shutil.copy(graded_notebook(FIRST), folder / f"{A}.ipynb")
    secret = secrets.token_hex(32)
    (folder / "submission_secret.txt").write_text(secret)
    (folder / "timestamp.txt").write_text("2020-01-01 00:00:00.000000 UTC")  # the student's: never read
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, uid, gid)
    return secret


def settle(service, url: str, name: str) -> None:
    """The service's polls until the hand-in ``name`` is settled, the queue's jobs run by a burst
    worker here (the service waits until a hand-in has been still for ontime.QUIET_S)."""
    from autograder.taskqueue.cli import worker

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        service.step()
        if name in service.record and not service.busy:
            return
        if service.busy:
            worker(url, burst=True, name=None, simple=True)
        else:
            time.sleep(0.2)
    raise AssertionError(f"not settled: {name}, in flight {service.busy}")


def test_hand_ins_are_graded_at_submission_within_the_limit(stock_batch, monkeypatch):
    from autograder import ontime
    from autograder.sandbox.kernel import Zygote

    course = scratch_course(Path(tempfile.mkdtemp(prefix="ontime-", dir=course_base())), [A])
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"c.Exchange.root = {str(course / 'exchange')!r}\n")
    inbound = course / "exchange" / "encdec" / "inbound"
    inbound.mkdir(parents=True)
    os.chmod(inbound, 0o3733)  # as the course's release makes it
    user = pwd.getpwnam(STUDENT)
    monkeypatch.chdir(course)  # the worker reads the course from where it runs
    names, keys = {}, {}
    try:
        # the roster's inputs drawn before anyone hands in (judge/ahead.py), as the service's main does
        from nbgrader.api import Gradebook

        from autograder.judge import ahead

        cd = coursedir(course)
        with Gradebook(cd.db_url, cd.course_id) as gb:
            gb.add_student(STUDENT)
        assert ontime.draw_ahead({A}).wait(300) == 0
        checks = set(assignments.checks(A).values())
        assert len(list(grading_state(course).root.joinpath(ahead.FOLDER).glob("*.pt"))) == len(checks)
        with redis_server() as url:
            service = ontime.Service(course, url, {A}, attempts=1)
            for i, row in enumerate(HAND_INS):
                name = f"{STUDENT}+{A}+2026-12-0{i + 1} 10:00:00.000000 UTC+{secrets.token_urlsafe(6)}"
                keys[row.name] = hand_in(inbound / name, user.pw_uid, user.pw_gid)
                row.make(inbound, name, user.pw_uid, user.pw_gid)
                names[row.name] = name
                settle(service, url, name)
        outcomes = {row.name: service.record[names[row.name]]["outcome"] for row in HAND_INS}
        assert outcomes == {row.name: row.outcome for row in HAND_INS}
        # released where fetch_feedback looks: one page per notebook of each hand-in not refused
        page = {row.name: f"{notebook_hash(secret=keys[row.name], notebook_id=A)}.html" for row in HAND_INS}
        feedback = course / "exchange" / "encdec" / "feedback"
        assert {p.name for p in feedback.iterdir()} == {page[r.name] for r in HAND_INS if r.outcome != "refused"}
        stock = stock_batch.rows[FIRST].actual
        assert stock == stock_batch.rows[FIRST].expected and scores(course, A) == {STUDENT: stock}
        first = (feedback / page["first"]).read_text()
        assert f"{A} (Score: {round(float(stock), 2)} / {assignments.max_scores()[A]})" in first
        for number, row in enumerate([r for r in HAND_INS if r.outcome == "over_limit"], start=2):
            said = (feedback / page[row.name]).read_text()
            assert "not graded" in said and f"number {number};" in said and "Score" not in said, said
    finally:
        Zygote.stop_all(started_here=True)
        shutil.rmtree(course, ignore_errors=True)
