"""``HideHiddenTests`` (in ``GenerateFeedback``): nbgrader's ``ClearHiddenTests``, with its own
delimiter settings, leaving a placeholder where each hidden region was, so the feedback says that
a hidden test ran there without showing its code."""
from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests
from traitlets import Unicode


class HideHiddenTests(ClearHiddenTests):
    """ClearHiddenTests that leaves ``placeholder`` (indented as the region's first marker) behind."""

    placeholder = Unicode("# (hidden test: its code is not shown)",
                          help="The line left where a hidden test region was.").tag(config=True)

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
