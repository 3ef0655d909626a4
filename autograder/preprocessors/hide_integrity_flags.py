"""``HideIntegrityFlags`` (in ``GenerateFeedback``, after ``GetGrades``): the automatic flag is for
the instructor, not the student."""
from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.integrity.rules import PREFIX

from .flag_integrity import _other_lines


class HideIntegrityFlags(NbGraderPreprocessor):
    """For feedback, after GetGrades: the automatic flag is for the instructor, not the student."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        meta = cell.metadata.get("nbgrader", {})
        if isinstance(meta.get("comment"), str) and meta["comment"].startswith(PREFIX):
            meta["comment"] = "\n".join(_other_lines(meta["comment"])) or None
        return cell, resources
