"""``HideIntegrityFlags`` (in ``GenerateFeedback``, after ``GetGrades``): a cell's comment in the
feedback is the instructor's, or else nbgrader's own automatic one ("No response." for an answer
left as released); the notes the course adds to the automatic comment for the instructor (an
integrity flag, the repairs: the feedback states those at its top) never reach the student. Which
comment is shown is read from the gradebook's fields, never from the comment's text, so nothing a
note quotes (a cell id, a file name) decides what is hidden."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

NO_RESPONSE = "No response."  # nbgrader's SaveAutoGrades: an answer cell left as released


class HideIntegrityFlags(NbGraderPreprocessor):
    """For feedback, after GetGrades: the instructor's comment, else nbgrader's own automatic one."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        ids = resources["nbgrader"]
        with Gradebook(ids["db_url"]) as gb:
            manual = {
                c.name: c.manual_comment
                for c in gb.find_submission_notebook(ids["notebook"], ids["assignment"], ids["student"]).comments
            }
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if "comment" in meta:
                own = (
                    NO_RESPONSE
                    if (not utils.is_task(cell) and meta.get("checksum") == utils.compute_checksum(cell))
                    else None
                )
                mine = manual.get(meta.get("grade_id"))
                meta["comment"] = own if mine is None else mine  # as nbgrader's Comment.comment
        return nb, resources
