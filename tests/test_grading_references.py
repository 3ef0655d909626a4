"""Generated grading files regenerate exactly: reference outputs, the student release, fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import assignments
from autograder.fixtures.make import built

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = assignments.names()


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _arrays(path: Path) -> dict:
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def test_make_references_regenerates_the_stored_files(tmp_path):
    """The same files, keys, metadata and integers; floats equal up to the last bits a CPU's own
    summation order changes (another CPU gives outputs 1e-6 apart, relative to their size, never a
    different answer: the readout scale that divides by a small gap is a power of two)."""
    import numpy as np

    subprocess.run([sys.executable, "autograder/make_references.py", "--out", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True)
    for a in ASSIGNMENTS:
        new = _files(tmp_path / "solutions" / a / "reference")
        old = _files(ROOT / "solutions" / a / "reference")
        assert new, f"no references written for {a}"
        assert sorted(new) == sorted(old), f"solutions/{a}/reference: other files than autograder/make_references.py makes"
        for name in new:
            fresh, stored = _arrays(tmp_path / "solutions" / a / "reference" / name), _arrays(ROOT / "solutions" / a / "reference" / name)
            assert sorted(fresh) == sorted(stored), f"{a}/{name}: other arrays"
            for key, x in fresh.items():
                y = stored[key]
                assert x.dtype == y.dtype and x.shape == y.shape, f"{a}/{name}:{key}"
                if x.dtype.kind == "f":
                    assert np.allclose(x, y, rtol=1e-5, atol=1e-5), f"{a}/{name}:{key} differs from a fresh run"
                else:
                    assert np.array_equal(x, y), f"{a}/{name}:{key} differs from a fresh run"


def test_the_fixture_submissions_are_reproducible_and_not_committed(tmp_path):
    """One command makes them from the table, the same bytes every time, into build/ (never git)."""
    subprocess.run([sys.executable, "-m", "autograder.fixtures.make", "--out", str(tmp_path)], cwd=ROOT,
                   check=True, capture_output=True)
    assert _files(tmp_path) == _files(built()) and len(_files(tmp_path)) > 90
    tracked = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, check=True, capture_output=True, text=True)
    assert not [p for p in tracked.stdout.split() if p.startswith("autograder/")], "a generated submission is committed"


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
