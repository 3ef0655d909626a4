"""A late-submission policy as nbgrader's late-penalty plugin (`AssignLatePenalties.plugin_class`).

A notebook handed in after its due date loses ``percent_per_day`` percent of its score for every
day or part of a day late, at most ``max_percent`` percent. ``grace_minutes`` are forgiven first.
Extensions come from nbgrader's own gradebook (`nbgrader db` / `Gradebook.grant_extension`, which
move the due date) and from ``extensions_file``, a CSV file the instructor keeps:

    student_id,assignment,days
    alice,decoder_block,2
    bob,*,1.5

(``*``: every assignment; a student's rows for one assignment add up). A malformed file stops
grading with an error naming the line and what was expected, before any penalty is given.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float, Unicode

DAY_S = 86400.0


class ExtensionsError(ValueError):
    """The extensions file is not what `LatePolicy.extensions_file` describes."""


def read_extensions(path: Path) -> dict[tuple[str, str], float]:
    """(student_id, assignment or '*') -> days of extension, from the CSV file at ``path``."""
    out: dict[tuple[str, str], float] = {}
    with open(path, newline="") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None or [h.strip() for h in header] != ["student_id", "assignment", "days"]:
            raise ExtensionsError(f"{path}: line 1 must be the header student_id,assignment,days (got {header})")
        for number, row in enumerate(rows, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != 3:
                raise ExtensionsError(f"{path}: line {number}: expected 3 fields student_id,assignment,days, got {row}")
            student, assignment, days = (cell.strip() for cell in row)
            try:
                value = float(days)
            except ValueError:
                raise ExtensionsError(f"{path}: line {number}: days must be a number, got {days!r}") from None
            if not student or not assignment or not math.isfinite(value) or value < 0:
                raise ExtensionsError(
                    f"{path}: line {number}: expected a student id, an assignment (or *) and days >= 0, got {row}"
                )
            out[student, assignment] = out.get((student, assignment), 0.0) + value
    return out


def penalty(score: float, seconds_late: float, percent_per_day: float, max_percent: float) -> float:
    """The points taken from ``score`` for ``seconds_late`` (a part of a day counts as a day)."""
    if seconds_late <= 0:
        return 0.0
    days = math.ceil(seconds_late / DAY_S)
    return score * min(max_percent, days * percent_per_day) / 100.0


class LatePolicy(LateSubmissionPlugin):
    """Per-day percentage, a cap, a grace period and an extensions file (see the module docstring)."""

    percent_per_day = Float(10.0, help="Percent of the score lost per day (or part of a day) late.").tag(config=True)
    max_percent = Float(50.0, help="At most this percent of the score is lost, however late.").tag(config=True)
    grace_minutes = Float(0.0, help="Minutes after the due date that are not late.").tag(config=True)
    extensions_file = Unicode(
        "", help="CSV file student_id,assignment,days of extensions (assignment * for all); empty: none."
    ).tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        assignment = getattr(self.parent, "assignment_id", None)  # AssignLatePenalties sets it first
        extensions = read_extensions(Path(self.extensions_file)) if self.extensions_file else {}
        days = extensions.get((student_id, "*"), 0.0) + extensions.get((student_id, str(assignment)), 0.0)
        late = total_seconds_late - days * DAY_S - self.grace_minutes * 60.0
        taken = penalty(score, late, self.percent_per_day, self.max_percent)
        if taken:
            self.log.info(
                "late policy: %s on %s is %.1f h late after %.2f days of extension: -%.2f points",
                student_id,
                assignment,
                late / 3600,
                days,
                taken,
            )
        return taken or None
