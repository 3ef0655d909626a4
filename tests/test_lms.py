"""Grades out: the late policy (autograder/lms/late_policy.py) and the Canvas export
(autograder/lms/canvas.py), alone on a gradebook made through nbgrader's API, and through stock
`nbgrader autograde` and `nbgrader export` with the course configuration."""

from __future__ import annotations

import csv
import datetime
import shutil

import pytest
from nbgrader.api import Gradebook
from traitlets.config import Configurable

from autograder.lms import canvas, late_policy
from autograder.state import grading_state

DAY = 86400


class Grading(Configurable):
    """Stands for nbgrader's AssignLatePenalties, which sets the assignment before it asks."""

    assignment_id = "decoder_block"


@pytest.fixture
def late(tmp_path):
    def make(extensions=None, **traits):
        if extensions is not None:
            (tmp_path / "ext.csv").write_text(extensions)
            traits["extensions_file"] = str(tmp_path / "ext.csv")
        return late_policy.LatePolicy(parent=Grading(), **traits)

    return make


def test_penalty_per_day_with_a_cap():
    assert late_policy.penalty(10.0, 0, 10, 50) == 0.0
    assert late_policy.penalty(10.0, 1, 10, 50) == 1.0  # a second late is a day late
    assert late_policy.penalty(10.0, DAY, 10, 50) == 1.0
    assert late_policy.penalty(10.0, DAY + 1, 10, 50) == 2.0
    assert late_policy.penalty(10.0, 30 * DAY, 10, 50) == 5.0  # the cap


def test_extensions_and_grace_come_off_first(late):
    plugin = late(
        "student_id,assignment,days\nalice,decoder_block,2\nalice,*,1\nbob,other,5\n",
        percent_per_day=20,
        max_percent=100,
        grace_minutes=30,
    )
    assert plugin.late_submission_penalty("alice", 10.0, 3 * DAY) is None  # 3 days of extension
    assert plugin.late_submission_penalty("alice", 10.0, 3 * DAY + 3600) == 2.0
    assert plugin.late_submission_penalty("bob", 10.0, 20 * 60) is None  # inside the grace period
    assert plugin.late_submission_penalty("bob", 10.0, DAY) == 2.0  # bob's extension is for another one


@pytest.mark.parametrize(
    "text, expected",
    [
        ("student,assignment,days\n", "line 1 must be the header"),
        ("student_id,assignment,days\nalice,decoder_block\n", "line 2: expected 3 fields"),
        ("student_id,assignment,days\nalice,decoder_block,two\n", "line 2: days must be a number"),
        ("student_id,assignment,days\n\nalice,decoder_block,-1\n", "line 3: expected a student id"),
    ],
)
def test_a_malformed_extensions_file_says_where_and_what(late, text, expected):
    with pytest.raises(late_policy.ExtensionsError, match=expected):
        late(text).late_submission_penalty("alice", 10.0, DAY)


@pytest.fixture(scope="module")
def class_gradebook(tmp_path_factory):
    """Two assignments, three students: alice late (penalty 1.5), bob on time, carol absent. Made
    once (a new nbgrader gradebook takes seconds to create); each test gets a copy: its sqlite URL."""
    made = tmp_path_factory.mktemp("lms") / "gradebook.db"
    _fill(f"sqlite:///{made}")

    def copy(tmp_path) -> str:
        shutil.copy(made, tmp_path / "gradebook.db")
        return f"sqlite:///{tmp_path / 'gradebook.db'}"

    return copy


def _fill(url: str) -> None:
    due = datetime.datetime(2026, 1, 1)
    with Gradebook(url) as gb:
        for name, points in (("decoder_block", 11), ("kv_cache", 7)):
            gb.add_assignment(name, duedate=due)
            gb.add_notebook(name, name)
            gb.add_grade_cell("item", name, name, max_score=points, cell_type="code")
        gb.add_student("alice", first_name="Ada", last_name="Lovelace")
        gb.add_student("bob")
        gb.add_student("carol", last_name='=HYPERLINK("x")')
        for student, score, penalty in (("alice", 9.0, 1.5), ("bob", 11.0, 0.0)):
            sub = gb.add_submission("decoder_block", student, timestamp=due)
            nb = sub.notebooks[0]
            nb.grades[0].auto_score = score
            nb.late_submission_penalty = penalty
        gb.db.commit()


def export(url, tmp_path, **traits) -> list[list[str]]:
    plugin = canvas.CanvasExport(to=str(tmp_path / "canvas.csv"), **traits)
    with Gradebook(url) as gb:
        plugin.export(gb)
    with open(tmp_path / "canvas.csv", newline="") as f:
        return list(csv.reader(f))


def test_canvas_export_layout_scores_and_points(class_gradebook, tmp_path):
    rows = export(class_gradebook(tmp_path), tmp_path, canvas_ids={"kv_cache": "4242"})
    assert rows[0] == canvas.FIXED + ["decoder_block", "kv_cache (4242)"]
    assert rows[1] == ["Points Possible", "", "", "", "", "11", "7"]
    by_login = {r[3]: r for r in rows[2:]}
    assert by_login["alice"][0] == "Lovelace, Ada" and by_login["alice"][5:] == ["7.5", "0"]  # 9 - 1.5
    assert by_login["bob"][5:] == ["11", "0"]
    assert by_login["carol"][0].startswith("'=") and by_login["carol"][5:] == ["0", "0"]  # no formula


def test_canvas_export_options(class_gradebook, tmp_path):
    rows = export(
        class_gradebook(tmp_path),
        tmp_path,
        id_column="SIS User ID",
        missing_as_zero=False,
        student=["carol"],
        assignment=["kv_cache"],
    )
    assert rows[0] == canvas.FIXED + ["kv_cache"]
    assert rows[2][2] == "carol" and rows[2][3] == "" and rows[2][5] == ""


@pytest.mark.grading
def test_late_policy_and_canvas_export_through_stock_nbgrader(tmp_path):
    """The course configuration as instructors run it: `nbgrader autograde` applies the late policy
    (nbgrader_config.py), `nbgrader export` writes the Canvas file."""
    import subprocess
    import tempfile
    from pathlib import Path

    from grading_course import coursedir
    from nbgrader.utils import parse_utc
    from test_sandbox_hostile import ASSIGNMENT, HOSTILE, PY, course_base, make_course

    course = make_course(Path(tempfile.mkdtemp(prefix="lms-", dir=course_base())))
    try:
        (course / "extensions.csv").write_text("student_id,assignment,days\nextended,decoder_block,3\n")
        with open(course / "nbgrader_config.py", "a") as f:
            f.write("c.LatePolicy.extensions_file = 'extensions.csv'\n")

        def nbgrader(*args):
            run = subprocess.run([PY, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True, timeout=600)
            assert run.returncode == 0, (args, run.stderr[-3000:])

        nbgrader("generate_assignment", ASSIGNMENT, "--force")
        stamps = {
            "on_time": "2026-01-10 11:00:00.000000 UTC",
            "late": "2026-01-12 13:00:00.000000 UTC",
            "extended": "2026-01-12 13:00:00.000000 UTC",
        }
        # what `nbgrader db assignment add --duedate` and `nbgrader db student add` write, through the
        # same public Gradebook API (one interpreter instead of one per command)
        with Gradebook(coursedir(course).db_url) as gb:
            gb.update_or_create_assignment(ASSIGNMENT, duedate=parse_utc("2026-01-10 12:00:00 UTC"))
            for student in stamps:
                gb.update_or_create_student(student)
        for student, stamp in stamps.items():
            folder = grading_state(course).submitted / student / ASSIGNMENT
            shutil.copytree(HOSTILE / "submitted" / "pass_all" / ASSIGNMENT, folder)
            (folder / "timestamp.txt").write_text(stamp + "\n")
        nbgrader("autograde", ASSIGNMENT)
        nbgrader("export", "--to", "canvas.csv")
        with open(course / "canvas.csv", newline="") as f:
            rows = list(csv.reader(f))
        assert rows[0] == canvas.FIXED + [ASSIGNMENT] and rows[1][5] == "11"
        scores = {r[3]: r[5] for r in rows[2:]}
        # 2 days and 1 hour late: 3 days at 10 % a day of 11 points; the extension covers 3 days
        assert scores == {"on_time": "11", "late": "7.7", "extended": "11"}
    finally:
        shutil.rmtree(course, ignore_errors=True)
