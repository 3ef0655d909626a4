"""A scratch copy of the course for the grading tests that take fixture submissions
(built from autograder/fixtures/table.py): its folders come from nbgrader's loaded configuration, never typed here."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from autograder.fixtures import table
from autograder.fixtures.make import graded_notebook

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = table.grading()
PY = sys.executable


def scratch_course(dest: Path, assignments: list[str], db_url: str | None = None) -> Path:
    """A copy of the course's grading set-up in `dest` (optionally on another gradebook), with the
    assignments generated into its gradebook."""
    from test_sandbox_hostile import make_course

    course = make_course(dest)
    if db_url:
        with open(course / "nbgrader_config.py", "a") as f:
            f.write(f"c.CourseDirectory.db_url = {db_url!r}\n")
    for a in assignments:
        made = subprocess.run([PY, "-m", "nbgrader", "generate_assignment", a, "--force"], cwd=course,
                              capture_output=True, text=True)
        assert made.returncode == 0, made.stderr[-3000:]
    return course


def coursedir(course: Path):
    from autograder.taskqueue.course import coursedir_for, load_config

    return coursedir_for(load_config(course))


def submit(course: Path, fixture: str, student: str | None = None) -> None:
    """Hand in a fixture's notebook (with the release's reference files) as `student`."""
    from autograder.taskqueue.course import submission_dir

    a = MANIFEST[fixture]["assignment"]
    dest = submission_dir(coursedir(course), a, student or fixture)
    dest.mkdir(parents=True)
    shutil.copy(graded_notebook(fixture), dest / f"{a}.ipynb")
    shutil.copytree(ROOT / "exercises" / a / "reference", dest / "reference")


def scores(course: Path, assignment: str) -> dict[str, float]:
    """student -> score of `assignment`, from the course's gradebook."""
    from nbgrader.api import Gradebook

    cd = coursedir(course)
    with Gradebook(cd.db_url, cd.course_id) as gb:
        return {s.student.id: float(s.score) for s in gb.find_assignment(assignment).submissions}
