"""The patches the course proposes upstream (``upstream/``) apply to the installed host, and do what
they say: nbgrader's ``failure_hook`` (``nbgrader-failure-hook.patch``), which would replace
``autograder/keep.py``'s wrapper of ``BaseConverter.convert_notebooks``, is called with the
assignment, the student and the notebooks of a submission whose conversion failed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbgrader

ROOT = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent(
    """
    import json, tempfile
    import nbgrader
    from nbgrader.converters.base import BaseConverter
    from nbgrader.coursedir import CourseDirectory

    calls = []

    class Failing(BaseConverter):  # a converter whose every notebook fails, as a crashed kernel's does
        def _format_source(self, assignment_id, student_id, escape=False):
            return self.coursedir.format_path(self.coursedir.submitted_directory, student_id, assignment_id, escape=escape)

        def _format_dest(self, assignment_id, student_id, escape=False):
            return self.coursedir.format_path(self.coursedir.autograded_directory, student_id, assignment_id, escape=escape)

        def init_destination(self, assignment_id, student_id):
            return True

        def init_assignment(self, assignment_id, student_id):
            pass

        def convert_single_notebook(self, notebook_filename):
            raise RuntimeError("a failed conversion")

    cd = CourseDirectory(root=tempfile.mkdtemp())
    converter = Failing(coursedir=cd, failure_hook="autograder.keep.failed")
    converter.failure_hook = lambda **kw: calls.append(kw)
    converter.assignments = {cd.format_path(cd.submitted_directory, "alice", "ps1"): ["ps1.ipynb"]}
    try:
        converter.convert_notebooks()
    except Exception as err:
        raised = type(err).__name__
    print(json.dumps({"file": nbgrader.__file__, "calls": calls, "raised": raised}))
    """
)


def test_nbgraders_failure_hook_applies_and_is_called_on_a_failed_submission(tmp_path):
    shutil.copytree(Path(nbgrader.__file__).parent, tmp_path / "nbgrader", ignore=shutil.ignore_patterns("__pycache__"))
    patch = ROOT / "upstream" / "nbgrader-failure-hook.patch"
    applied = subprocess.run(["git", "apply", str(patch)], cwd=tmp_path, capture_output=True, text=True)
    assert applied.returncode == 0, (
        f"{patch.name} no longer applies to nbgrader {nbgrader.__version__}: {applied.stderr}"
    )
    run = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["file"] == str(tmp_path / "nbgrader" / "__init__.py")  # the patched copy
    assert got["calls"] == [{"assignment": "ps1", "student": "alice", "notebooks": ["ps1.ipynb"]}]
    assert got["raised"] == "NbGraderException"  # the batch still says it failed


def test_keeps_failure_hook_puts_the_last_good_run_back(tmp_path):
    """What ``keep.failed`` does when the patched nbgrader calls it: the submission's run under way in
    this process (marked by ``KeepLastGrade``, its folder removed by nbgrader) is ended, its kept folder
    put back whole, and its mark cleared; a submission with no run under way is left alone."""
    import weakref

    from autograder import keep

    dest_root = tmp_path / "grading" / "autograded"
    kept = keep._copy(dest_root, "autograded", "alice", "ps1")
    kept.mkdir(parents=True)
    (kept / "ps1.ipynb").write_text("the last good run")
    mark = keep.begin(dest_root, "autograded", "alice", "ps1")

    class Converter:
        pass

    converter = Converter()
    keep._RUNNING[("alice", "ps1")] = (dest_root, "autograded", weakref.ref(converter))
    try:
        keep.failed(assignment="ps1", student="bob", notebooks=["ps1.ipynb"])  # another student's: nothing
        assert mark.is_file() and not (dest_root / "alice" / "ps1").exists()
        keep.failed(assignment="ps1", student="alice", notebooks=["ps1.ipynb"])
    finally:
        keep._RUNNING.pop(("alice", "ps1"), None)
    assert (dest_root / "alice" / "ps1" / "ps1.ipynb").read_text() == "the last good run"
    assert not mark.exists() and ("alice", "ps1") not in keep._RUNNING
