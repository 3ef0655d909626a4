"""The course's assignments and their points, read from the instructor notebooks' own nbgrader
metadata: nothing else types them.

An assignment is a folder ``solutions/<name>/`` holding a notebook with nbgrader cells (the
course has one per assignment, ``<name>.ipynb``); its points are the points of its graded cells
(grade cells and tasks), which is what nbgrader records as its maximum score. Adding a folder
there adds an assignment to ``make exercises``, the fixtures' grading, the tests and the
benchmarks that read this module.

    python -m autograder.assignments        # one line per assignment: name, max score
"""

from __future__ import annotations

import ast
import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder import ROOT

SOLUTIONS = ROOT / "solutions"


@dataclass(frozen=True)
class Assignment:
    name: str
    notebooks: tuple[Path, ...]  # the instructor notebooks that have nbgrader cells, by name
    points: dict[str, float]  # grade_id -> points of every graded cell, in notebook order
    checks: dict[str, str]  # grade_id -> the check its test cell runs (its one `checks.run("<id>", ...)`)

    @property
    def max_score(self) -> float:
        return sum(self.points.values())


def find(solutions: Path = SOLUTIONS) -> list[Assignment]:
    """Every assignment under `solutions`, by name."""
    folders = sorted(p for p in solutions.iterdir() if p.is_dir()) if solutions.is_dir() else []
    found = []
    for folder in folders:
        notebooks, points, checks = [], {}, {}
        for path in sorted(folder.glob("*.ipynb")):
            cells = json.loads(path.read_text()).get("cells", [])
            graded = [(c, c.get("metadata", {}).get("nbgrader")) for c in cells]
            graded = [(c, m) for c, m in graded if isinstance(m, dict) and (m.get("grade") or m.get("task"))]
            if nbgrader_cells(path):
                notebooks.append(path)
            points.update({m["grade_id"]: _number(m.get("points", 0)) for _, m in graded})
            checks.update({m["grade_id"]: check_run(c) for c, m in graded if check_run(c)})
        if notebooks:
            found.append(Assignment(folder.name, tuple(notebooks), points, checks))
    return found


@functools.cache
def checks(assignment: str) -> dict[str, str]:
    """The release's record of an assignment's test cells: grade_id -> the check each runs (``{}``
    for a name that is no assignment). The grader reads the check of a test cell from here, by the
    cell's grade_id, never from the text of the cell it runs."""
    return next((a.checks for a in find() if a.name == assignment), {})


def check_run(cell: dict) -> str | None:
    """The check a test cell of the instructor's notebook runs: the id its `checks.run` call names."""
    if cell.get("cell_type") != "code" or cell["metadata"]["nbgrader"].get("solution"):
        return None
    calls = [n for n in ast.walk(ast.parse("".join(cell.get("source", "")))) if isinstance(n, ast.Call)]
    for node in calls:
        first = node.args[0] if node.args else None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "run" and isinstance(first, ast.Constant):
            return str(first.value)
    return None


def nbgrader_cells(notebook: Path) -> list[dict]:
    """The nbgrader metadata of the notebook's grade, solution and task cells, in order."""
    cells = json.loads(notebook.read_text()).get("cells", [])
    meta = [c.get("metadata", {}).get("nbgrader") for c in cells]
    return [m for m in meta if isinstance(m, dict) and (m.get("grade") or m.get("solution") or m.get("task"))]


def _number(points) -> float:
    """Points as a number; whole ones stay ints, so files that record them read `11`, not `11.0`."""
    value = float(points)
    return int(value) if value.is_integer() else value


def names(solutions: Path = SOLUTIONS) -> list[str]:
    """The assignments' names, sorted."""
    return [a.name for a in find(solutions)]


def max_scores(solutions: Path = SOLUTIONS) -> dict[str, float]:
    """Assignment -> the points of all its graded cells."""
    return {a.name: a.max_score for a in find(solutions)}


if __name__ == "__main__":
    for a in find(Path(sys.argv[1]) if len(sys.argv) > 1 else SOLUTIONS):
        print(f"{a.name}\t{a.max_score:g}")
