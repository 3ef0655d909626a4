"""``RecordRepairs`` (after ``SaveAutoGrades``): the repairs made to a mangled notebook
(``autograder/repairs.py``) go into the gradebook too, as a line of the first answer cell's automatic
comment, so the instructor reads them with the grades; the student reads them at the top of the
feedback, where this line is not repeated (``HideIntegrityFlags``)."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.repairs import repairs
from encdec.grading import language

PREFIX = "Repaired before grading: "  # starts the line of the comment (the feedback drops it)


class RecordRepairs(NbGraderPreprocessor):
    """After SaveAutoGrades: a repaired notebook's repairs, in words, in the gradebook."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        records = repairs(nb)
        if not records:
            return nb, resources
        ids = resources["nbgrader"]
        student, assignment, notebook = ids["student"], ids["assignment"], ids["notebook"]
        with language.speaking(language.DEFAULT):  # the instructor's words
            line = PREFIX + "; ".join(
                language.text(f"repair_{r['key']}", **{k: v for k, v in r.items() if k != "key"}) for r in records
            )
        with Gradebook(ids["db_url"]) as gb:
            answers = [c.metadata.nbgrader["grade_id"] for c in nb.cells if utils.is_solution(c)]
            first = (
                answers[0] if answers else min(c.name for c in gb.find_notebook(notebook, assignment).solution_cells)
            )
            comment = gb.find_comment(first, notebook, assignment, student)
            kept = [x for x in (comment.auto_comment or "").splitlines() if not x.startswith(PREFIX)]
            comment.auto_comment = "\n".join([line, *kept])
            gb.db.commit()
        return nb, resources
