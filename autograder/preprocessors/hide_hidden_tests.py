"""``HideHiddenTests`` (in ``GenerateFeedback``): what nbgrader's ``ClearHiddenTests`` does to a
release, done to feedback with the same markers, leaving a placeholder where each hidden region
was, so the feedback says that a hidden test ran there without showing its code.

The delimiters mean something in the release's test cells only (their source is the release's: the
grader puts it back); anywhere else, an answer cell that says ``### BEGIN HIDDEN TESTS`` included,
the text is the student's and is shown as written (nbgrader's own step raises on it and the student
gets no page). A test cell whose regions do not pair up shows the placeholder alone: hidden code is
never shown."""

from __future__ import annotations

from functools import cached_property

from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from traitlets import Unicode


class HideHiddenTests(NbGraderPreprocessor):
    """Each hidden region of a test cell replaced by ``placeholder``, indented as its first marker;
    the markers are ``ClearHiddenTests``' as configured (those ``generate_assignment`` cleared)."""

    placeholder = Unicode(
        "# (hidden test: its code is not shown)", help="The line left where a hidden test region was."
    ).tag(config=True)

    @cached_property
    def _markers(self) -> tuple[str, str]:
        """The hidden-test markers, read once from ``ClearHiddenTests``' configuration."""
        stock = ClearHiddenTests(config=self.config)
        return stock.begin_test_delimeter, stock.end_test_delimeter

    def preprocess(self, nb: NotebookNode, resources: dict):
        nb.metadata.pop("celltoolbar", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
            return cell, resources
        begin, end = self._markers
        lines, inside, hidden, paired = [], False, False, True
        for line in cell.source.split("\n"):
            if begin in line:
                paired = paired and not inside  # a region in a region
                inside = hidden = True
                lines.append(line[: len(line) - len(line.lstrip())] + self.placeholder)
            elif end in line:
                inside = False
            elif not inside:
                lines.append(line)
        if not paired or inside:  # nested or unclosed: nothing of the cell is shown
            cell.source = self.placeholder
        elif hidden:
            cell.source = "\n".join(lines)
        return cell, resources
