"""Where grading's mutable state lives: one folder outside the sources, ignored by git.

Submissions, autograded notebooks, feedback, the gradebook, exports and the course secret all
live under ``grading/`` at the course root, or under ``$ENCDEC_GRADING_DIR``
(relative to the course root, or absolute). ``nbgrader_config.py`` points nbgrader's folders
there (its ``GRADING``); tools, tests and scratch runs (``grade_fixtures.py``, whose scratch
folder has the same layout) take the names from here, so no folder is typed twice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from autograder import ROOT as COURSE

ENV = "ENCDEC_GRADING_DIR"
DEFAULT = "grading"
# In a collected submission folder, written by collect only (a student's is never copied): what
# it left behind (autograder/collected.py); nbgrader ignores it (CourseDirectory.ignore).
LEFT_BEHIND = ".left-behind.json"


@dataclass(frozen=True)
class GradingState:
    """The folders and files of one grading state, all under `root`."""

    root: Path

    @property
    def submitted(self) -> Path:  # nbgrader's submitted folder: <student>/<assignment>/
        return self.root / "submitted"

    @property
    def autograded(self) -> Path:  # graded notebooks (and the batch driver's .driver/ state)
        return self.root / "autograded"

    @property
    def feedback(self) -> Path:  # feedback HTML: <student>/<assignment>/
        return self.root / "feedback"

    @property
    def export(self) -> Path:  # exported grades and the class report
        return self.root / "export"

    @property
    def gradebook(self) -> Path:  # the SQLite gradebook
        return self.root / "gradebook.db"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.gradebook}"

    @property
    def secret(self) -> Path:  # seeds the graded inputs: keep it, never commit it
        return self.root / ".course-secret"


def grading_state(course: Path = COURSE) -> GradingState:
    """The grading state of the course rooted at `course`: ``$ENCDEC_GRADING_DIR`` or ``grading/``."""
    return GradingState(Path(course) / (os.environ.get(ENV) or DEFAULT))
