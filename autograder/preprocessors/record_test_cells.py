"""``RecordTestCells`` (last in ``GenerateAssignment``): the release notebook records its test
cells (grade id, points, cell type) in its metadata, ``encdec.test_cells``, so the student's
``nbgrader validate`` can report one that was deleted or turned into another kind of cell
(``encdec/grading/validation.py``); nbgrader's checksums cover only the cells still there."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from encdec.grading import validation


class RecordTestCells(NbGraderPreprocessor):
    """In the student release: the notebook's test cells, in order, in its ``encdec`` metadata."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        meta = nb.metadata.setdefault("encdec", {})
        meta[validation.KEY] = validation.record(nb.cells)
        return nb, resources
