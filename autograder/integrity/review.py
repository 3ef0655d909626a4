"""The instructor's review list: every flagged submission in a gradebook, and the course's own
gradebook URL."""

from __future__ import annotations

from nbgrader.api import Comment, Gradebook

from autograder.paths import ROOT

from .rules import PREFIX

FIELDS = ["assignment", "student", "notebook", "reasons", "needs_manual_grade"]


def flagged_submissions(db_url: str) -> list[dict]:
    """One row per flagged submitted notebook: assignment, student, notebook, reasons, and whether
    it still needs manual grading (False once an instructor has scored every flagged cell)."""
    rows: dict[tuple[str, str, str], dict] = {}
    with Gradebook(db_url) as gb:
        for comment in gb.db.query(Comment).filter(Comment.auto_comment.like(PREFIX + "%")):
            lines = [line[len(PREFIX) :] for line in comment.auto_comment.splitlines() if line.startswith(PREFIX)]
            if not lines:
                continue  # LIKE ignores case
            sub = comment.notebook
            key = (sub.assignment.name, sub.student.id, sub.name)
            row = rows.setdefault(
                key, dict(zip(FIELDS, key), reasons=[], needs_manual_grade=bool(sub.needs_manual_grade))
            )
            row["reasons"] += lines
    for row in rows.values():
        row["reasons"] = "; ".join(row["reasons"])
    return [rows[key] for key in sorted(rows)]


def course_db_url() -> str:
    """The gradebook URL of the course configuration, read the way nbgrader reads it."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    return CourseDirectory(config=config).db_url
