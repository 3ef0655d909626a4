"""autograder/assignments.py: the list of assignments and their points come from the solutions'
own nbgrader metadata, and agree with what nbgrader itself records and releases."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder import assignments

ROOT = Path(__file__).resolve().parents[1]


def cell(kind: str, grade_id: str, points: float | None = None):
    """A code cell with nbgrader metadata: "solution", "test" (a grade cell) or "task"."""
    meta = {
        "grade": kind == "test",
        "solution": kind == "solution",
        "task": kind == "task",
        "locked": kind != "solution",
        "grade_id": grade_id,
        "schema_version": 3,
    }
    if points is not None:
        meta["points"] = points
    c = new_markdown_cell("a task") if kind == "task" else new_code_cell("pass")
    c.metadata["nbgrader"] = meta
    return c


def write(path: Path, cells) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(new_notebook(cells=cells), path)


def test_names_and_points_come_from_the_notebooks_metadata(tmp_path):
    rng = random.Random(11)
    expected = {}
    for name in ("zeta", "alpha", "mid"):
        cells, points = [cell("solution", f"{name}_sol")], {}
        for k in range(rng.randint(1, 5)):
            points[f"{name}_t{k}"] = rng.choice([0.5, 1, 2, 3])
            cells.append(cell("test", f"{name}_t{k}", points[f"{name}_t{k}"]))
        points[f"{name}_task"] = rng.choice([1, 4])
        cells.append(cell("task", f"{name}_task", points[f"{name}_task"]))
        write(tmp_path / name / f"{name}.ipynb", cells)
        expected[name] = points
    write(tmp_path / "only_solutions" / "only_solutions.ipynb", [cell("solution", "s")])
    expected["only_solutions"] = {}
    write(tmp_path / "notes" / "notes.ipynb", [new_code_cell("1 + 1")])  # no nbgrader cell: not an assignment
    (tmp_path / "empty").mkdir()
    (tmp_path / "README.md").write_text("not a folder")

    found = assignments.find(tmp_path)
    assert [a.name for a in found] == sorted(expected) == assignments.names(tmp_path)
    for a in found:
        assert a.points == expected[a.name]
        assert a.notebooks == (tmp_path / a.name / f"{a.name}.ipynb",)
    assert assignments.max_scores(tmp_path) == {n: sum(p.values()) for n, p in expected.items()}
    assert assignments.find(tmp_path / "missing") == []


def test_points_of_several_notebooks_add_up(tmp_path):
    write(tmp_path / "two" / "a.ipynb", [cell("test", "a1", 2)])
    write(tmp_path / "two" / "b.ipynb", [cell("test", "b1", 3), cell("test", "b2")])  # no points: 0
    (only,) = assignments.find(tmp_path)
    assert only.points == {"a1": 2, "b1": 3, "b2": 0} and only.max_score == 5
    assert [p.name for p in only.notebooks] == ["a.ipynb", "b.ipynb"]


def test_a_test_cells_check_is_the_releases_record_by_its_grade_id():
    """The grader reads a test cell's check from the release's record, by the cell's grade id: a
    hidden cell edited to call the visible check still runs its own (fixture `swapped_check_ids`)."""
    from autograder import judge
    from autograder.preprocessors._shared import check_ids

    record = assignments.checks("decoder_block")
    assert record["block_output_hidden"] == "decoder_block.output_hidden" and len(record) == 9
    assert {c for a in assignments.names() for c in assignments.checks(a).values()} <= set(judge.checks())
    swapped = new_code_cell('checks.run("decoder_block.output", DecoderBlock)')
    swapped.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "block_output_hidden"}
    assert check_ids(swapped, {"nbgrader": {"assignment": "decoder_block"}}) == ["decoder_block.output_hidden"]
    assert check_ids(swapped, {"nbgrader": {"assignment": "no_such_assignment"}}) == []


def test_the_course_assignments_are_the_released_ones():
    released = sorted(p.name for p in (ROOT / "exercises").iterdir() if (p / f"{p.name}.ipynb").is_file())
    assert assignments.names() == released and released


def test_max_scores_are_what_nbgrader_records(tmp_path, monkeypatch):
    """nbgrader's own bookkeeping (the cells SaveCells stores in a gradebook) gives the same maximum
    score and the same graded cells as the metadata this module reads."""
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import ClearSolutions, ComputeChecksums, SaveCells

    # a new gradebook runs `alembic` from PATH: the venv's
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    found = assignments.find()
    assert found
    with Gradebook(db_url) as gb:
        for a in found:
            gb.add_assignment(a.name)
    for a in found:
        for path in a.notebooks:
            nb = nbformat.read(path, as_version=4)
            resources = {"nbgrader": {"db_url": db_url, "assignment": a.name, "notebook": path.stem}}
            for step in (ClearSolutions(), ComputeChecksums(), SaveCells()):
                nb, resources = step.preprocess(nb, resources)
    with Gradebook(db_url) as gb:
        for a in found:
            recorded = gb.find_assignment(a.name)
            assert recorded.max_score == pytest.approx(a.max_score)
            assert {c.name: c.max_score for n in recorded.notebooks for c in n.grade_cells} == pytest.approx(a.points)


def test_importing_the_grader_does_no_work():
    """`import autograder.judge` (and the preprocessors) reads no notebook and imports no judge
    module: the check table is made on first use."""
    import subprocess
    import sys

    probe = (
        "import sys, autograder.assignments as A\n"
        "A.nbgrader_cells = lambda p: sys.exit(f'read {p} at import')\n"
        "import autograder.judge, autograder.preprocessors\n"
        "assert not {'autograder.judge.decoder_block', 'autograder.judge.target_slicing',\n"
        "            'autograder.judge.kv_cache', 'autograder.judge.warmup'} & set(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
