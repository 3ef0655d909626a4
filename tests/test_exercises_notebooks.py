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
    out = subprocess.run(
        [sys.executable, "-m", "nbgrader", "validate", notebook.name.split("__")[-1]],
        cwd=work,
        capture_output=True,
        text=True,
    )
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


def _mangled(assignment: str, edit, tmp_path: Path, lang: str = "") -> Path:
    """The solved release notebook after ``edit`` (a function of the notebook), in a copy of its
    release folder (reference files, the folder's nbgrader config)."""
    import nbformat

    prefix = {"decoder_block": "db", "target_slicing": "ts", "kv_cache": "kv", "warmup": "wu"}[assignment]
    nb = nbformat.read(graded_notebook(f"{prefix}_pass_all"), as_version=4)
    if lang:
        nb.metadata.setdefault("encdec", {})["language"] = lang
    folder = tmp_path / "release" / assignment
    shutil.copytree(ROOT / "exercises" / lang / assignment, folder)
    nbformat.write(edit(nb), folder / f"{assignment}.ipynb")
    return folder / f"{assignment}.ipynb"


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _without(*grade_ids):
    def edit(nb):
        nb.cells = [c for c in nb.cells if _grade_id(c) not in grade_ids]
        return nb

    return edit


def _retyped(keep_metadata: bool):
    def edit(nb):
        cell = next(c for c in nb.cells if _grade_id(c) == "one_token_test")
        cell.cell_type = "markdown"
        del cell["outputs"], cell["execution_count"]
        if not keep_metadata:
            cell.metadata = {}
        return nb

    return edit


def _duplicated(nb):
    i = next(i for i, c in enumerate(nb.cells) if _grade_id(c) == "one_token_test")
    copy = nb.cells[i].copy()
    copy.id = "a-copy"
    nb.cells.insert(i + 1, copy)
    return nb


def _said(out: str) -> str:
    return " ".join(out.replace('"', " ").replace("\\n", " ").split())


def test_validate_reports_a_deleted_test_cell(tmp_path):
    out = _said(validate(_mangled("kv_cache", _without("structure_hidden"), tmp_path), tmp_path / "v"))
    assert "Success" not in out and "VALIDATION FAILED ON 1 CELL(S)" in out
    assert "The test cell structure_hidden (1 point(s)) is missing from this notebook" in out


def test_validate_reports_a_deleted_test_cell_in_the_release_language(tmp_path):
    out = validate(_mangled("kv_cache", _without("tokens_test"), tmp_path, lang="zh"), tmp_path / "v")
    assert "Success" not in out and "测试单元 tokens_test（2 分）不在这个 notebook 中了" in out


def test_validate_reports_a_retyped_test_cell(tmp_path):
    kept = _said(validate(_mangled("kv_cache", _retyped(keep_metadata=True), tmp_path / "a"), tmp_path / "va"))
    assert "Success" not in kept and "THE TYPES OF 1 CELL(S) HAVE CHANGED" in kept  # nbgrader's own report
    lost = _said(validate(_mangled("kv_cache", _retyped(keep_metadata=False), tmp_path / "b"), tmp_path / "vb"))
    assert "Success" not in lost and "The test cell one_token_test (1 point(s)) is missing" in lost


def test_validate_reports_a_duplicated_test_cell(tmp_path):
    out = validate(_mangled("kv_cache", _duplicated, tmp_path), tmp_path / "v")
    assert "Success" not in out and "Duplicate grade id: one_token_test" in out  # nbgrader's own report


def test_validate_names_the_function_of_a_deleted_solution_cell(tmp_path):
    out = _said(validate(_mangled("kv_cache", _without("decode_solution"), tmp_path), tmp_path / "v"))
    assert "Success" not in out
    assert "greedy_decode_cached is not defined in the notebook: the cell that defines it is missing" in out


def test_validate_of_an_intact_notebook_still_passes(tmp_path):
    out = validate(_mangled("target_slicing", lambda nb: nb, tmp_path), tmp_path / "v")
    assert "Success! Your notebook passes all the tests." in out
