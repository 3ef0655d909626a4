"""Read what ``nbgrader autograde`` left (the autograded notebooks) into one outcome per student
and graded item, and the notebooks that could not be read.

The graded items come from the source notebooks (``solutions/<assignment>/*.ipynb``: grade id,
points, the checks the cell runs). For each student's autograded copy, an item's outcome is what
``autograder.preprocessors.TrustedVerdict`` recorded in the cell's metadata (the labels of
``autograder.judge.labels``), its score as nbgrader computes it from the cell's outputs, and the
text the student read. A notebook graded before the labels were recorded is ``unlabelled``. Nothing here trusts the notebook: an unreadable one is a ``Problem``, never an exception.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from nbformat import NotebookNode, from_dict
from nbgrader import utils

from autograder.assignments import check_run
from autograder.judge.labels import PASSED
from autograder.preprocessors import recorded_verdicts
from autograder.repairs import NO_ANSWERS, repairs

MAX_TEXT = 4000  # characters of a cell's outputs kept as an example


@dataclass
class Item:
    """One graded test cell of an assignment's source notebook."""

    assignment: str
    notebook: str
    grade_id: str
    points: float
    checks: list[str]


@dataclass
class Outcome:
    """What one student got on one item."""

    student: str
    label: str
    score: float | None
    text: str


@dataclass
class Problem:
    """A submission the report could not read (it is listed, and the report goes on)."""

    assignment: str
    student: str
    what: str


@dataclass
class Assignment:
    name: str
    items: list[Item]
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)  # grade id -> one per student
    problems: list[Problem] = field(default_factory=list)
    students: list[str] = field(default_factory=list)


def source_items(source_dir: Path, assignment: str) -> list[Item]:
    """The graded test cells of ``source_dir/<assignment>/*.ipynb``, in notebook order."""
    folder = source_dir / assignment
    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(
            f"{assignment}: expected its source notebook in {folder}/ (nbgrader's source folder); found no .ipynb there"
        )
    items = []
    for path in notebooks:
        nb = json.loads(path.read_text())
        for cell in nb.get("cells", []):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.get("cell_type") == "code" and meta.get("grade") and not meta.get("solution"):
                items.append(
                    Item(
                        assignment,
                        path.stem,
                        meta["grade_id"],
                        float(meta.get("points", 0)),
                        [check] if (check := check_run(cell)) else [],
                    )
                )
    return items


def _students(folder: Path, assignment: str) -> set[str]:
    if not folder.is_dir():
        return set()
    return {p.name for p in folder.iterdir() if (p / assignment).is_dir()}


def collect(assignment: str, source_dir: Path, autograded_dir: Path, submitted_dir: Path | None) -> Assignment:
    """Every student's outcome on every item of ``assignment``; unreadable notebooks as problems."""
    result = Assignment(assignment, source_items(source_dir, assignment))
    result.outcomes = {item.grade_id: [] for item in result.items}
    graded = _students(autograded_dir, assignment)
    submitted = _students(submitted_dir, assignment) if submitted_dir else set()
    result.students = sorted(graded | submitted)
    for student in result.students:
        for notebook in sorted({item.notebook for item in result.items}):
            path = autograded_dir / student / assignment / f"{notebook}.ipynb"
            if not path.exists():
                result.problems.append(
                    Problem(
                        assignment,
                        student,
                        f"{notebook}.ipynb was submitted but has no autograded "
                        "copy: `nbgrader autograde` failed on it (see its log)",
                    )
                )
                continue
            try:
                nb = _read(path)
            except Exception as exc:
                result.problems.append(
                    Problem(
                        assignment,
                        student,
                        f"the autograded {notebook}.ipynb could not be read ({type(exc).__name__}: {str(exc)[:200]})",
                    )
                )
                continue
            if any(r["key"] in NO_ANSWERS for r in repairs(nb)):  # graded as the release with no answers
                result.problems.append(
                    Problem(
                        assignment,
                        student,
                        f"the submitted {notebook}.ipynb could not be read "
                        "(or was past the intake limits): graded as the "
                        "release with no answers",
                    )
                )
                continue
            cells = _grade_cells(nb)
            for item in (i for i in result.items if i.notebook == notebook):
                result.outcomes[item.grade_id].append(_outcome(student, cells.get(item.grade_id)))
    return result


def _read(path: Path) -> NotebookNode:
    nb = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("not a notebook: no list of cells")
    return from_dict(nb)


def _grade_cells(nb: NotebookNode) -> dict[str, NotebookNode]:
    """Graded test cells by grade id (the first one when a submission duplicated an id)."""
    cells: dict[str, NotebookNode] = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if (
            isinstance(meta, dict)
            and meta.get("grade")
            and not meta.get("solution")
            and cell.get("cell_type") == "code"
        ):
            cells.setdefault(str(meta.get("grade_id")), cell)
    return cells


def _outcome(student: str, cell: NotebookNode | None) -> Outcome:
    if cell is None:
        return Outcome(student, "deleted", 0.0, "the test cell is missing from the autograded notebook")
    text = cell_text(cell)
    try:
        score = utils.determine_grade(cell)[0]
    except Exception:
        score = None
    return Outcome(student, _label(cell, text, score), score, text[:MAX_TEXT])


def _label(cell: NotebookNode, text: str, score: float | None) -> str:
    """The first failed check's label the grader recorded, or ``passed``; ``unlabelled`` when the
    notebook was graded before labels were recorded (its text is never read for one)."""
    recorded = recorded_verdicts(cell)
    if recorded is not None:
        failed = [str(v.get("label")) for v in recorded if not v.get("ok")]
        return failed[0] if failed else PASSED
    if text.startswith("passed") and score is not None and score > 0:
        return PASSED
    return "unlabelled"


def cell_text(cell: NotebookNode) -> str:
    """A cell's outputs as plain text: streams, results and error tracebacks (terminal colours removed)."""
    parts = []
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            parts.append(_joined(out.get("text", "")))
        elif kind in ("execute_result", "display_data"):
            parts.append(_joined(out.get("data", {}).get("text/plain", "")))
        elif kind == "error":
            parts.append("\n".join(_joined(line) for line in out.get("traceback", [])))
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(p.rstrip("\n") for p in parts))


def _joined(text) -> str:
    return "".join(str(t) for t in text) if isinstance(text, list) else str(text)


def anonymous_names(students) -> dict[str, str]:
    """Student id -> "student k": numbered in the order of a hash of the id, so neither the
    names nor their alphabetical order can be read back from the numbers."""
    order = sorted(set(students), key=lambda s: (hashlib.sha256(s.encode()).hexdigest(), s))
    return {s: f"student {k}" for k, s in enumerate(order, start=1)}


def anonymise(text: str, names: dict[str, str]) -> str:
    """``text`` with every student id replaced by its anonymous name, in one pass (longest ids
    first, so no id is found inside a longer one or inside a name already put in)."""
    if not names:
        return text
    ids = "|".join(re.escape(s) for s in sorted(names, key=len, reverse=True))
    return re.sub(rf"(?<![\w-])(?:{ids})(?![\w-])", lambda m: names[m.group(0)], text)
