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

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.paths import ROOT

SOLUTIONS = ROOT / "solutions"


@dataclass(frozen=True)
class Assignment:
    name: str
    notebooks: tuple[Path, ...]  # the instructor notebooks that have nbgrader cells, by name
    points: dict[str, float]  # grade_id -> points of every graded cell, in notebook order

    @property
    def max_score(self) -> float:
        return sum(self.points.values())


def find(solutions: Path = SOLUTIONS) -> list[Assignment]:
    """Every assignment under `solutions`, by name."""
    folders = sorted(p for p in solutions.iterdir() if p.is_dir()) if solutions.is_dir() else []
    found = []
    for folder in folders:
        notebooks, points = [], {}
        for path in sorted(folder.glob("*.ipynb")):
            cells = nbgrader_cells(path)
            if cells:
                notebooks.append(path)
                points.update(
                    {m["grade_id"]: _number(m.get("points", 0)) for m in cells if m.get("grade") or m.get("task")}
                )
        if notebooks:
            found.append(Assignment(folder.name, tuple(notebooks), points))
    return found


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
