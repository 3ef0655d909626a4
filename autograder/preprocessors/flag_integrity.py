"""``FlagIntegrity`` (after ``SaveAutoGrades``): a notebook whose code reaches into the grader's
machinery is marked for manual review in the gradebook, its flags kept as records beside it
(``autograder/integrity/review.py``), never in a comment."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.integrity import review
from autograder.integrity.scan import is_test_cell, scan_notebook
from encdec.grading import language


class FlagIntegrity(NbGraderPreprocessor):
    """After SaveAutoGrades: a notebook whose code reaches into the grader awaits manual review."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        flags = scan_notebook(nb)
        ids = resources["nbgrader"]
        with Gradebook(ids["db_url"]) as gb:
            review.record(gb, ids, flags)  # a clean regrade clears what an earlier one recorded
            for grade_id in [c.metadata.nbgrader["grade_id"] for c in nb.cells if is_test_cell(c)] if flags else []:
                gb.find_grade(grade_id, ids["notebook"], ids["assignment"], ids["student"]).needs_manual_grade = True
            gb.db.commit()
        if flags:
            who = "/".join(ids[k] for k in ("student", "assignment", "notebook"))
            with language.speaking(language.DEFAULT):  # the instructor's words
                self.log.warning("integrity flag: %s: %s", who, "; ".join(f"{f.cell}: {f.reason}" for f in flags))
        return nb, resources
