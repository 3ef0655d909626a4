"""Generated grading files regenerate exactly: reference outputs, the student release, fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = ("decoder_block", "target_slicing", "kv_cache")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_make_references_regenerates_the_stored_files_byte_for_byte(tmp_path):
    subprocess.run([sys.executable, "autograder/make_references.py", "--out", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True)
    for a in ASSIGNMENTS:
        new = _files(tmp_path / "solutions" / a / "reference")
        old = _files(ROOT / "solutions" / a / "reference")
        assert new, f"no references written for {a}"
        assert new == old, f"solutions/{a}/reference differs from what autograder/make_references.py makes"


def test_make_fixtures_regenerates_the_committed_fixtures(tmp_path):
    subprocess.run([sys.executable, "autograder/fixtures/make_fixtures.py", "--out", str(tmp_path)], cwd=ROOT,
                   check=True, capture_output=True)
    committed = {k: v for k, v in _files(ROOT / "autograder" / "fixtures").items() if not k.endswith(".py")
                 and "__pycache__" not in k}
    assert _files(tmp_path) == committed


def _normalise(nb_bytes: bytes) -> dict:
    nb = json.loads(nb_bytes)
    nb.get("metadata", {}).pop("language_info", None)
    return nb


@pytest.mark.grading
def test_generate_assignment_reproduces_the_committed_exercises(tmp_path):
    """`nbgrader generate_assignment --force` from the repo root rewrites exercises/ identically."""
    release = tmp_path / "release"
    for a in ASSIGNMENTS:
        subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", a, "--force",
                        f"--CourseDirectory.release_directory={release}",
                        f"--CourseDirectory.db_url=sqlite:///{tmp_path / 'gradebook.db'}"],
                       cwd=ROOT, check=True, capture_output=True)
        new, old = _files(release / a), _files(ROOT / "exercises" / a)
        assert sorted(new) == sorted(old), f"exercises/{a}: files differ"
        for name in new:
            if name.endswith(".ipynb"):
                assert _normalise(new[name]) == _normalise(old[name]), f"exercises/{a}/{name} is stale"
            else:
                assert new[name] == old[name], f"exercises/{a}/{name} is stale"


@pytest.mark.grading
def test_release_hides_solutions_and_hidden_tests():
    for a in ASSIGNMENTS:
        text = (ROOT / "exercises" / a / f"{a}.ipynb").read_text()
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
        nb = json.loads(text)
        sources = "\n".join("".join(c["source"]) for c in nb["cells"])
        assert 'checks.run("' in sources and "_hidden\"" not in sources
        assert "raise NotImplementedError()" in sources
