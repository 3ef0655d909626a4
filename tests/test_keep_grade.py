"""No grade is lost by a failed run (autograder/keep.py): a regrade or a feedback run that fails,
or is killed, leaves the last autograded notebook, feedback and gradebook rows as they were,
through stock `nbgrader`'s command line and its formgrader's API (the driver and the queue grade
into a folder of their own and rename it over the course's only when done)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from grading_course import coursedir, scores, scratch_course, submit

pytestmark = [pytest.mark.grading, pytest.mark.slow]
A = "decoder_block"
HONEST = "db_pass_all"
# A grading step that cannot be imported: what the formgrader met when a checkout folder named
# `encdec` hid the package ("cannot import name 'wire' from 'encdec.grading'").
BROKEN = '--Autograde.autograde_preprocessors=["autograder.preprocessors.GradedExecute","autograder.no_such.Step"]'


def _nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True, timeout=600
    )
    assert not check or out.returncode == 0, out.stderr[-3000:]
    return out


def _state(course: Path, student: str) -> dict:
    """What a failed run must not change: the graded notebook's and the feedback's bytes, the score."""
    cd = coursedir(course)
    graded = Path(cd.format_path(cd.autograded_directory, student, A)) / f"{A}.ipynb"
    feedback = Path(cd.format_path(cd.feedback_directory, student, A)) / f"{A}.html"
    return {
        "graded": graded.read_bytes() if graded.is_file() else None,
        "feedback": feedback.read_bytes() if feedback.is_file() else None,
        "score": scores(course, A).get(student),
    }


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """One student graded and given feedback, on the course's configuration."""
    course = scratch_course(tmp_path_factory.mktemp("keep"), [A])
    submit(course, HONEST, "alice")
    _nbgrader(course, "autograde", A)
    _nbgrader(course, "generate_feedback", A)
    before = _state(course, "alice")
    assert before["graded"] and before["feedback"] and before["score"] == 11
    return course


def test_a_failed_regrade_leaves_the_last_grade(course):
    before = _state(course, "alice")
    out = _nbgrader(course, "autograde", A, "--force", BROKEN, check=False)
    assert out.returncode != 0 and "Removing failed assignment" in out.stderr  # nbgrader took it away...
    assert _state(course, "alice") == before  # ... and it is back, with the gradebook's rows
    assert "its last good one is back in place" in out.stderr


def test_a_failed_feedback_run_leaves_the_last_feedback(course):
    before = _state(course, "alice")
    broken = '--GenerateFeedback.preprocessors=["autograder.keep.KeepLastGrade","autograder.no_such.Step"]'
    out = _nbgrader(course, "generate_feedback", A, "--force", broken, check=False)
    assert out.returncode != 0
    assert _state(course, "alice") == before


def test_a_killed_regrade_is_undone_by_the_next_command(course):
    """SIGKILL while the submission is regraded (nbgrader has replaced its graded notebook with an
    ungraded copy by then): no hook of the killed process runs; the next nbgrader command, which loads the course configuration,
    puts the last grade back."""
    before = _state(course, "alice")
    marks = course / "grading" / ".kept" / "autograded" / "alice"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbgrader", "autograde", A, "--force"],
        cwd=course,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not (marks / f"{A}.running").is_file() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (marks / f"{A}.running").is_file(), "the regrade never marked the submission"
    time.sleep(1.0)  # into the kernel's run: the graded folder is gone by now
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert _state(course, "alice")["graded"] != before["graded"]  # what nbgrader left: an ungraded copy
    _nbgrader(course, "db", "student", "list")  # any command of the course
    assert _state(course, "alice") == before
    assert not (marks / f"{A}.running").exists()


def test_the_formgraders_failed_autograde_leaves_the_last_grade(course):
    """The formgrader's Autograde button calls nbgrader's API in the server's own process; the
    grade is back by the time the call returns (no waiting), while the server goes on."""
    before = _state(course, "alice")
    code = f"""
import json, sys
from nbgrader.apps import NbGrader
from nbgrader.apps.api import NbGraderAPI
app = NbGrader()
app.initialize([{BROKEN!r}])  # the course configuration, as the formgrader loads it
api = NbGraderAPI(coursedir=app.coursedir, parent=app)
result = api.autograde({A!r}, "alice")
graded = app.coursedir.format_path(app.coursedir.autograded_directory, "alice", {A!r}) + "/{A}.ipynb"
import os
print(json.dumps({{"success": result["success"], "graded": os.path.isfile(graded)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=course, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"success": False, "graded": True}, seen
    assert _state(course, "alice") == before


def test_the_drivers_failed_regrade_leaves_the_last_grade(course):
    """The driver (and the queue's workers, which run the same unit) grade into a folder of their
    own and publish it only when done; a notebook that fails leaves the course's as it was. The
    broken step comes from the course's untracked local configuration, as an instructor's would."""
    before = _state(course, "alice")
    local = course / "nbgrader_config.local.py"
    local.write_text(
        'c.Autograde.autograde_preprocessors = ["autograder.preprocessors.GradedExecute", "autograder.no_such.Step"]\n'
    )
    try:
        out = subprocess.run(
            [sys.executable, "-m", "autograder.driver", A, "--force", "--workers", "1"],
            cwd=course,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        local.unlink()
    assert out.returncode == 1 and "failed" in out.stdout, (out.stdout[-2000:], out.stderr[-2000:])
    assert _state(course, "alice") == before
