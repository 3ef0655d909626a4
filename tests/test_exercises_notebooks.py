"""Students' view: the stub fails its visible tests with "not implemented", the solution passes,
and `nbgrader validate` flags a tampered notebook."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import assignments
from autograder.fixtures.make import graded_notebook

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = assignments.names()
pytestmark = pytest.mark.grading


def validate(notebook: Path, tmp_path: Path) -> str:
    """Run `nbgrader validate` on a copy (with the assignment's reference files) in tmp_path."""
    work = tmp_path / notebook.parent.name
    shutil.copytree(notebook.parent, work, ignore=shutil.ignore_patterns(".grading", "*.ipynb"))
    shutil.copy(notebook, work / notebook.name.split("__")[-1])
    out = subprocess.run([sys.executable, "-m", "nbgrader", "validate", notebook.name.split("__")[-1]], cwd=work,
                         capture_output=True, text=True)
    return out.stdout + out.stderr


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_passes_and_stub_says_not_implemented(assignment, tmp_path):
    solution = validate(ROOT / "solutions" / assignment / f"{assignment}.ipynb", tmp_path / "sol")
    assert "Success! Your notebook passes all the tests." in solution
    stub = validate(ROOT / "exercises" / assignment / f"{assignment}.ipynb", tmp_path / "stub")
    assert "VALIDATION FAILED" in stub
    assert "not implemented yet" in stub
    assert "NameError" not in stub  # fails in its own tests, not by a crash elsewhere


def test_validate_flags_edited_test_cells(tmp_path):
    tampered = graded_notebook("tamper_assert_true")
    out = validate(tampered, tmp_path)
    assert "THE CONTENTS OF" in out and "TEST CELL(S) HAVE CHANGED" in out
