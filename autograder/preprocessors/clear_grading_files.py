"""``ClearGradingFiles`` (before execution): no ``.grading/`` or ``.grading-in/`` that a submission
carried in is ever mistaken for the grader's files."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.sandbox import safefs
from encdec.grading import wire

from ._shared import INPUTS_KEY, OUTPUTS_KEY, workdir


class ClearGradingFiles(NbGraderPreprocessor):
    """Before execution: no ``.grading/`` or ``.grading-in/`` left from the submission."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        for name in (wire.OUTPUTS_DIR, wire.INPUTS_DIR):  # rm -rf, whatever the submission put there
            safefs.remove_tree(workdir(resources) / name)
        resources.setdefault("nbgrader", {})[INPUTS_KEY] = {}
        resources["nbgrader"][OUTPUTS_KEY] = {}
        return nb, resources
