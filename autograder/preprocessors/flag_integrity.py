"""``FlagIntegrity`` (after ``SaveAutoGrades``): a notebook whose code reaches into the grader's
machinery is marked for manual review in the gradebook, with its reasons (``autograder.integrity``)."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.integrity.rules import PREFIX
from autograder.integrity.scan import is_test_cell, scan_notebook


class FlagIntegrity(NbGraderPreprocessor):
    """After SaveAutoGrades: a notebook whose code reaches into the grader awaits manual review."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        flags = scan_notebook(nb)
        if not flags:
            return nb, resources
        ids = resources["nbgrader"]
        student, assignment, notebook = ids["student"], ids["assignment"], ids["notebook"]
        tests = [c.metadata.nbgrader["grade_id"] for c in nb.cells if is_test_cell(c)]
        solutions = [c.metadata.nbgrader["grade_id"] for c in nb.cells if utils.is_solution(c)]
        with Gradebook(ids["db_url"]) as gb:
            if not solutions:  # all deleted: their comments are still in the gradebook
                solutions = sorted(c.name for c in gb.find_notebook(notebook, assignment).solution_cells)
            for grade_id in tests:
                gb.find_grade(grade_id, notebook, assignment, student).needs_manual_grade = True
            notes: dict[str, list[str]] = {}
            for flag in flags:
                if flag.cell in solutions:
                    notes.setdefault(flag.cell, []).append(flag.reason)
                elif solutions:
                    notes.setdefault(solutions[0], []).append(f"{flag.cell}: {flag.reason}")
            for grade_id, reasons in notes.items():
                comment = gb.find_comment(grade_id, notebook, assignment, student)
                comment.auto_comment = "\n".join([PREFIX + "; ".join(reasons), *_other_lines(comment.auto_comment)])
            gb.db.commit()
        self.log.warning(
            "integrity flag: %s/%s/%s: %s",
            student,
            assignment,
            notebook,
            "; ".join(f"{f.cell}: {f.reason}" for f in flags),
        )
        return nb, resources


def _other_lines(comment: str | None) -> list[str]:
    return [line for line in (comment or "").splitlines() if not line.startswith(PREFIX)]
