"""``HideIntegrityFlags`` (in ``GenerateFeedback``, after ``GetGrades``): the automatic flag is for
the instructor, not the student; the repairs' line is the instructor's too (the feedback states the
repairs at its top)."""
from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.integrity.rules import PREFIX

from .record_repairs import PREFIX as REPAIRED

from .flag_integrity import _other_lines


class HideIntegrityFlags(NbGraderPreprocessor):
    """For feedback, after GetGrades: the automatic flag is for the instructor, not the student."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        meta = cell.metadata.get("nbgrader", {})
        if isinstance(meta.get("comment"), str) and meta["comment"].startswith((PREFIX, REPAIRED)):
            lines = [x for x in _other_lines(meta["comment"]) if not x.startswith(REPAIRED)]
            meta["comment"] = "\n".join(lines) or None
        return cell, resources
