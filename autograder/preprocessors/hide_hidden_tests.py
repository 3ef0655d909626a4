"""``HideHiddenTests`` (in ``GenerateFeedback``): nbgrader's ``ClearHiddenTests``, with its own
delimiter settings, leaving a placeholder where each hidden region was, so the feedback says that
a hidden test ran there without showing its code.

The delimiters mean something in the release's test cells only (their source is the release's: the
grader puts it back); anywhere else, an answer cell that says ``### BEGIN HIDDEN TESTS`` included,
the text is the student's and is shown as written (nbgrader's own step raises on it and the student
gets no page). A test cell whose regions do not pair up shows the placeholder alone: hidden code is
never shown."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests
from traitlets import Unicode


class HideHiddenTests(ClearHiddenTests):
    """ClearHiddenTests on test cells only, leaving ``placeholder`` (indented as the region's first marker) behind."""

    placeholder = Unicode(
        "# (hidden test: its code is not shown)", help="The line left where a hidden test region was."
    ).tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except RuntimeError:  # nested or unclosed regions: nothing of the cell is shown
            cell.source = self.placeholder
            return cell, resources

    def _remove_hidden_test_region(self, cell: NotebookNode) -> bool:
        lines = []
        for line in cell.source.split("\n"):
            if self.begin_test_delimeter in line:
                lines.append(line[: len(line) - len(line.lstrip())] + self.placeholder)
            lines.append(line)
        original, cell.source = cell.source, "\n".join(lines)
        if not super()._remove_hidden_test_region(cell):
            cell.source = original  # no region: the cell as it was
            return False
        return True
