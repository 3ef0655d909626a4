"""A Canvas-importable gradebook CSV as an nbgrader export plugin (`ExportApp.plugin_class`).

    nbgrader export --exporter=autograder.lms.canvas.CanvasExport --to canvas.csv

Canvas's gradebook import reads the columns `Student`, `ID`, `SIS User ID`, `SIS Login ID`,
`Section`, then one column per assignment; the row under the header, `Points Possible`, gives
each assignment's points (it makes a new assignment for a column it does not know, or matches
`name (canvas id)` to an existing one: `canvas_ids`). Each student is identified by the column
``id_column`` holding their nbgrader id (a Canvas login, or SIS user id). Scores are after the
late penalty (late_policy.py), rounded to ``digits``; a student with no submission gets 0 (or an
empty cell, which Canvas leaves unchanged: ``missing_as_zero`` False). Names, ids and section
text are written as CSV fields, never as formulas (a leading `=`, `+`, `-` or `@` is quoted off).
"""

from __future__ import annotations

import csv

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Bool, Dict, Enum, Integer

FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def safe_text(text: object) -> str:
    """A cell a spreadsheet will not run: text starting like a formula gets a leading quote."""
    value = "" if text is None else str(text)
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


class CanvasExport(ExportPlugin):
    """One row per student, one column per assignment, Canvas's import layout."""

    id_column = Enum(
        ["SIS Login ID", "SIS User ID", "ID"],
        default_value="SIS Login ID",
        help="The Canvas column that holds the nbgrader student id.",
    ).tag(config=True)
    canvas_ids = Dict(
        help="nbgrader assignment -> Canvas assignment id, to update existing Canvas "
        "assignments instead of making new ones."
    ).tag(config=True)
    missing_as_zero = Bool(True, help="No submission: 0 (True) or an empty cell, left as it is in Canvas.").tag(
        config=True
    )
    digits = Integer(2, help="Decimal places of the exported scores.").tag(config=True)

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "canvas_grades.csv"
        assignments = [a for a in gradebook.assignments if not self.assignment or a.name in self.assignment]
        students = [s for s in gradebook.students if not self.student or s.id in self.student]
        columns = [
            f"{a.name} ({self.canvas_ids[a.name]})" if a.name in self.canvas_ids else a.name for a in assignments
        ]
        self.log.info("Exporting %d students x %d assignments for Canvas to %s", len(students), len(assignments), dest)
        with open(dest, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(FIXED + columns)
            out.writerow(["Points Possible", "", "", "", ""] + [self._number(a.max_score) for a in assignments])
            for student in students:
                row = dict.fromkeys(FIXED, "")
                name = ", ".join(p for p in (student.last_name, student.first_name) if p)
                row["Student"] = safe_text(name or student.id)
                row[self.id_column] = safe_text(student.id)
                out.writerow(
                    [row[k] for k in FIXED] + [self._score(gradebook, a.name, student.id) for a in assignments]
                )

    def _score(self, gradebook: Gradebook, assignment: str, student: str) -> str:
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            return "0" if self.missing_as_zero else ""
        return self._number(max(0.0, submission.score - (submission.late_submission_penalty or 0.0)))

    def _number(self, value: float) -> str:
        text = f"{value:.{self.digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
