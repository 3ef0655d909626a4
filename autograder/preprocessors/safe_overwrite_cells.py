"""``SafeOverwriteCells`` (nbgrader's ``OverwriteCells``, in the sanitizing step): puts deleted test
cells back even when the cell before them was deleted too (nbgrader's own version stops the
notebook with a KeyError then)."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import OverwriteCells


class SafeOverwriteCells(OverwriteCells):
    """OverwriteCells whose re-added grade cells go after the nearest earlier cell still present."""

    def add_missing_grade_cells(self, nb: NotebookNode, resources: dict):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        source_ids = [cell.name for cell in source_nb.source_cells]
        source_by_id = {cell.name: cell for cell in source_nb.source_cells}
        solution_ids = {cell.name for cell in source_nb.solution_cells}
        for grade_cell in source_nb.grade_cells:
            present = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
            if grade_cell.name in present:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", grade_cell.name)
            new = self.missing_cell_transform(
                source_by_id[grade_cell.name], grade_cell.max_score, is_solution=grade_cell.name in solution_ids
            )
            earlier = source_ids[: source_ids.index(grade_cell.name)]
            at = max((present.index(g) + 1 for g in earlier if g in present), default=0)
            nb.cells.insert(at, new)
        return nb, resources
