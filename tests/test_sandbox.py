"""The grading sandbox applies to stock nbgrader, and refuses to run when it cannot start.

The hostile batch (tests/test_sandbox_hostile.py) proves what the sandbox contains; these tests
prove the wiring: `nbgrader autograde` run from the course root goes through the sandbox, a
broken sandbox stops grading with a clear error instead of running student code unconfined, and
the committed hostile fixtures are exactly what their generator makes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.fixtures import table
from autograder.fixtures.make import BUILT
from autograder.state import grading_state

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = BUILT / "hostile"  # made from autograder/fixtures/table.py (conftest.py)
ASSIGNMENT = "decoder_block"
PY = sys.executable


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """A copy of the course with the assignment generated (its gradebook and release): each test
    takes a copy of it, so `nbgrader generate_assignment` runs once for the module."""
    from test_sandbox_hostile import make_course

    course = make_course(tmp_path_factory.mktemp("generated"))
    subprocess.run(
        [PY, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"],
        cwd=course,
        check=True,
        capture_output=True,
    )
    return course


def course_with(generated: Path, tmp_path: Path, students: list[str]) -> Path:
    """The generated course copied into `tmp_path` (its kernels' folder there too), with `students`' submissions."""
    course = shutil.copytree(generated, tmp_path, dirs_exist_ok=True, symlinks=True)
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text().replace(repr(str(generated / "tmp")), repr(str(course / "tmp"))))
    assert repr(str(course / "tmp")) in config.read_text()
    for s in students:
        shutil.copytree(HOSTILE / "submitted" / s, grading_state(course).submitted / s)
    return course


@pytest.mark.grading
# as a plain user the sandbox has no fork server: the zygote case would be the other one again. As
# root, `make test` runs this test once, as a plain user (tests/test_unprivileged.py, with a fresh
# bwrap per kernel); root's two cases are the matrix: stock nbgrader with the fork server grades
# the whole fixture table (tests/test_grading_fixtures.py), and these hostile students are graded
# through the fork server in the hostile batch (tests/test_sandbox_hostile.py).
@pytest.mark.parametrize(
    "prefork",
    [
        pytest.param("1", id="zygote", marks=pytest.mark.matrix),
        pytest.param("0", id="bwrap-per-kernel", marks=pytest.mark.matrix),
    ]
    if os.geteuid() == 0
    else [pytest.param("0", id="bwrap-per-kernel")],
)
def test_stock_nbgrader_autograde_runs_in_the_sandbox(generated, tmp_path, prefork):
    """Stock `nbgrader autograde` from the course root, with kernels forked from the zygote
    (the default) and with a fresh bwrap per kernel (ENCDEC_SANDBOX_PREFORK=0)."""
    from test_sandbox_hostile import Listener, check_reported, grades, sandbox_pids, solution_tail

    from autograder.fixtures import payloads

    students = [
        "read_hidden",
        "write_outside",
        "network",
        "os_exit",
        "fork_bomb",
        "deep_tree",
        "chmod_trap",
        "log_symlink",
        "fill_folder",
    ]
    course = course_with(generated, tmp_path, students)
    listener = Listener(payloads.LISTEN_PORTS)
    try:
        run = subprocess.run(
            [PY, "-m", "nbgrader", "autograde", ASSIGNMENT],
            cwd=course,
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ, ENCDEC_SANDBOX_PREFORK=prefork),
        )
    finally:
        listener.close()
    assert run.returncode == 0, run.stderr[-3000:]
    assert listener.connections == 0 and sandbox_pids(course) == []
    out = grading_state(course).autograded
    text = (out / "read_hidden" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    assert "unreadable" in text  # the attempts ran, and failed
    expected = table.hostile()
    for s in students:
        passed = sorted(n for n, (score, top) in grades(course, s).items() if score == top)
        assert passed == sorted(expected[s]["passed"]), s
        check_reported(course, s, expected[s])  # stolen.json, escape.json, fill_counts.json, ...
        assert {p.name for p in (out / s / ASSIGNMENT).iterdir()} == {
            f"{ASSIGNMENT}.ipynb",
            "reference",
            "nbgrader_config.py",
        }, s  # (the release's validation config)
    assert list((course / "tmp").iterdir()) == []  # scratch and socket folders removed, deep trees and all
    assert [line for line in solution_tail(course) if line in run.stderr] == []  # the linked log was not read
    assert "kernel.log is unreadable" in run.stderr


@pytest.mark.grading
def test_regrade_of_a_resubmission_is_not_frozen(generated, tmp_path):
    """timestamp_freeze writes a far-future timestamp.txt in its working folder. Nothing of that
    folder reaches nbgrader's, so a later, wrong resubmission is regraded by a plain
    `nbgrader autograde` (not skipped as older than the graded copy) and loses the marks."""
    from test_sandbox_hostile import grades, printed

    from autograder.fixtures import payloads

    student = "timestamp_freeze"
    course = course_with(generated, tmp_path, [student])
    sub = grading_state(course).submitted / student / ASSIGNMENT
    graded = grading_state(course).autograded / student / ASSIGNMENT
    expected = table.hostile()

    def autograde():
        run = subprocess.run(
            [PY, "-m", "nbgrader", "autograde", ASSIGNMENT], cwd=course, capture_output=True, text=True, timeout=600
        )
        assert run.returncode == 0, run.stderr[-3000:]
        return run.stdout + run.stderr

    (sub / "timestamp.txt").write_text("2024-01-01 10:00:00.000000 UTC\n")
    autograde()
    passed = sorted(n for n, (score, top) in grades(course, student).items() if score == top)
    assert passed == sorted(expected[student]["passed"])
    assert printed(course, student)["freeze.json"]["timestamp"] == payloads.FROZEN_TIMESTAMP  # it wrote one
    assert (graded / "timestamp.txt").read_text() == (sub / "timestamp.txt").read_text()  # nbgrader's copy
    assert not (graded / "many").exists() and not (graded / "big0.bin").exists()

    # A day later: a resubmission with the block wrong.
    shutil.copy(
        HOSTILE / "submitted" / "patched_checks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", sub / f"{ASSIGNMENT}.ipynb"
    )
    (sub / "timestamp.txt").write_text("2024-01-02 10:00:00.000000 UTC\n")
    log = autograde()
    assert "Skipping existing assignment" not in log and "Updating existing assignment" in log
    passed = sorted(n for n, (score, top) in grades(course, student).items() if score == top)
    assert passed == sorted(expected["patched_checks"]["passed"])
    assert list((course / "tmp").iterdir()) == []


@pytest.mark.grading
def test_broken_sandbox_stops_grading(generated, tmp_path):
    course = course_with(generated, tmp_path, ["pass_all"])
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(
        [PY, "-m", "nbgrader", "autograde", ASSIGNMENT],
        cwd=course,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode != 0
    assert "grading sandbox" in run.stderr and "Permission denied" in run.stderr
    assert not (grading_state(course).autograded / "pass_all" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists()
    driver = subprocess.run(
        [PY, "-m", "autograder.driver", ASSIGNMENT], cwd=course, capture_output=True, text=True, env=env, timeout=300
    )
    assert driver.returncode != 0 and "grading sandbox" in driver.stderr


@pytest.mark.grading
def test_killed_batch_is_consistent_and_resumes(generated, tmp_path):
    """SIGKILL the driver mid-batch: nothing keeps running, the gradebook is intact, and a
    re-run grades what is left without regrading what was recorded."""
    import signal
    import sqlite3
    import time

    from test_sandbox_hostile import grades, sandbox_pids

    students = ["pass_all", "stored_outputs", "patched_checks", "os_exit"]
    course = course_with(generated, tmp_path, students)
    state = grading_state(course).autograded / ".driver" / f"{ASSIGNMENT}.json"
    proc = subprocess.Popen(
        [PY, "-m", "autograder.driver", ASSIGNMENT, "--workers", "1"],
        cwd=course,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while not (state.is_file() and json.loads(state.read_text())) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # let it get into the next notebook
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    recorded = {s for s, nbs in json.loads(state.read_text()).items() if nbs}
    assert recorded and recorded != set(students)
    for _ in range(50):  # workers, kernels and the zygote die with the driver
        if not sandbox_pids(course):
            break
        time.sleep(0.2)
    assert sandbox_pids(course) == []
    db = sqlite3.connect(grading_state(course).gradebook)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()

    rerun = subprocess.run(
        [PY, "-m", "autograder.driver", ASSIGNMENT, "--workers", "2", "--json", "r.json"],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=600,
    )
    results = {r["student"]: r for r in json.loads((course / "r.json").read_text())}
    assert {s for s, r in results.items() if r["reason"] == "already graded"} == recorded, rerun.stdout
    # the killed grader's kernel folders (tmpfs mounts) were unmounted and removed by the next one
    assert [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(course) in line] == []
    assert list((course / "tmp").iterdir()) == []
    expected = table.hostile()
    for s in students:
        passed = sorted(n for n, (score, top) in grades(course, s).items() if score == top)
        assert passed == sorted(expected[s]["passed"]), s


@pytest.mark.grading
def test_one_broken_notebook_costs_only_itself(tmp_path):
    """An assignment of two notebooks: one unreadable, one fine. Stock nbgrader drops both
    (it removes the student's whole autograded assignment on an error); the driver grades the
    good one and scores the broken one 0."""
    from test_sandbox_hostile import make_course

    course = make_course(tmp_path)
    src = course / "solutions" / ASSIGNMENT
    shutil.copy(src / f"{ASSIGNMENT}.ipynb", src / "second.ipynb")
    subprocess.run(
        [PY, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"],
        cwd=course,
        check=True,
        capture_output=True,
    )
    sub = grading_state(course).submitted / "mixed" / ASSIGNMENT
    sub.mkdir(parents=True)
    shutil.copy(HOSTILE / "submitted" / "pass_all" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", sub / "second.ipynb")
    shutil.copy(
        HOSTILE / "submitted" / "invalid_json" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", sub / f"{ASSIGNMENT}.ipynb"
    )
    run = subprocess.run(
        [PY, "-m", "autograder.driver", ASSIGNMENT, "--json", "r.json"],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=600,
    )
    results = {r["notebook"]: r for r in json.loads((course / "r.json").read_text())}
    # the unreadable notebook is graded, as the release with no answers, and says so (autograder/handed_in.py)
    assert results[ASSIGNMENT]["status"] == "graded" and results[ASSIGNMENT]["score"] == 0, run.stdout
    graded = json.loads((grading_state(course).autograded / "mixed" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    assert [r["key"] for r in graded["metadata"]["encdec"]["repairs"]] == ["unreadable"]
    assert results["second"]["status"] == "graded" and results["second"]["score"] == 11
    assert (grading_state(course).autograded / "mixed" / ASSIGNMENT / "second.ipynb").is_file()
    assert run.returncode == 0 and "graded: 2" in run.stdout
