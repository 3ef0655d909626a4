"""Generated grading files regenerate exactly: reference outputs, the student release, fixtures."""

from __future__ import annotations

import json
import os
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
    """The same files, keys, metadata and arrays, to the bit, on whatever CPU regenerates them: the
    inputs are drawn from integers and the references computed in float64 (autograder/judge/draws.py)."""
    import numpy as np

    subprocess.run(
        [sys.executable, "autograder/make_references.py", "--out", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    for a in ASSIGNMENTS:
        new = _files(tmp_path / "solutions" / a / "reference")
        old = _files(ROOT / "solutions" / a / "reference")
        assert new, f"no references written for {a}"
        assert sorted(new) == sorted(old), (
            f"solutions/{a}/reference: other files than autograder/make_references.py makes"
        )
        for name in new:
            fresh, stored = (
                _arrays(tmp_path / "solutions" / a / "reference" / name),
                _arrays(ROOT / "solutions" / a / "reference" / name),
            )
            assert sorted(fresh) == sorted(stored), f"{a}/{name}: other arrays"
            for key, x in fresh.items():
                y = stored[key]
                assert x.dtype == y.dtype and x.shape == y.shape, f"{a}/{name}:{key}"
                assert np.array_equal(x, y), f"{a}/{name}:{key} differs from a fresh run"


def _fingerprints(capability: str | None, threads: int) -> dict:
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability} if capability else dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-m", "autograder.judge.fingerprint", "--seeds", "11", "12", "--threads", str(threads)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def test_inputs_and_references_are_the_same_bits_under_every_kernel_choice():
    """Invariant: same seed, same inputs, same references, on any machine. torch picks its CPU
    kernels by instruction set at run time (``ATEN_CPU_CAPABILITY`` forces a choice) and sums in
    an order that follows the thread count; every visible check and two hidden seeds of every
    hidden check are built under several choices and hashed (autograder/judge/fingerprint.py).
    Before the draws were made of integers, ``default`` drew other normals than ``avx2``, and the
    kv_cache readout's EOS row moved by 2e-4 between two CPUs."""
    base = _fingerprints(None, 2)
    assert len(base) > 30
    for capability, threads in (("default", 1), ("avx2", 2)):
        other = _fingerprints(capability, threads)
        assert other.keys() == base.keys()
        differ = sorted(k for k in base if base[k] != other[k])
        assert not differ, (
            f"under ATEN_CPU_CAPABILITY={capability}, {threads} threads, other inputs or references: {differ}"
        )


def test_the_fixture_submissions_are_reproducible_and_not_committed(tmp_path):
    """One command makes them from the table, the same bytes every time, into build/ (never git)."""
    subprocess.run(
        [sys.executable, "-m", "autograder.fixtures.make", "--out", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
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
        subprocess.run(
            [
                sys.executable,
                "-m",
                "nbgrader",
                "generate_assignment",
                a,
                "--force",
                f"--CourseDirectory.release_directory={release}",
                f"--CourseDirectory.db_url=sqlite:///{tmp_path / 'gradebook.db'}",
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
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
        assert 'checks.run("' in sources and '_hidden"' not in sources
        assert "raise NotImplementedError()" in sources
