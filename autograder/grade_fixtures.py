"""Grade the fixture submissions with stock ``nbgrader autograde`` and compare with the manifest.

    python autograder/grade_fixtures.py [--work DIR] [--timeout SECONDS] [--only NAME ...]

Runs from the repository root with every nbgrader folder and the gradebook redirected into
``--work`` (a temporary folder by default, laid out as the course's ``grading/``:
``autograder/state.py``), so the course's own grading state is untouched: ``generate_assignment`` (to register the assignments in that gradebook), then one
``autograde`` per assignment for all fixture "students" at once, then ``generate_feedback``.
Prints a table (fixture, expected, actual, label recorded) and exits non-zero on a mismatch.
``tests/test_grading_fixtures.py`` calls ``grade`` and asserts on its rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import ROOT
from autograder import assignments as course
from autograder.state import ENV as GRADING_DIR_ENV
from autograder.state import GradingState


@dataclass
class Row:
    name: str
    assignment: str
    expected: float
    actual: float | None
    max_score: float
    label: str | None  # a key the grader must record (None: none needed)
    label_found: bool
    feedback_html: Path | None
    flag: str | None = None  # expected substring of the integrity flag (None: must not be flagged)
    flags: str = ""  # the integrity flags the gradebook holds for this submission
    labels: tuple[str, ...] = ()  # the keys of the failed verdicts the grader recorded, in cell order

    @property
    def flag_ok(self) -> bool:
        return (self.flag in self.flags) if self.flag else not self.flags


def course_args(work: Path) -> list[str]:
    """Command-line options that point every nbgrader folder and the gradebook into ``work``."""
    state = GradingState(work)
    return [
        f"--CourseDirectory.db_url={state.db_url}",
        f"--CourseDirectory.submitted_directory={state.submitted}",
        f"--CourseDirectory.autograded_directory={state.autograded}",
        f"--CourseDirectory.feedback_directory={state.feedback}",
        f"--CourseDirectory.release_directory={work / 'release'}",
        f"--TrustedGrading.secret_file={state.secret}",  # never the course's own secret
    ]


def nbgrader(*args: str, log: Path, work: Path) -> int:
    """Run ``nbgrader`` from the repository root with the venv's interpreter; append to ``log``. The
    course configuration's grading state is ``work`` too (``ENCDEC_GRADING_DIR``): it never opens the
    course's own ``grading/``, which may be another user's (the instructor's, closed to others)."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    env = dict(os.environ, **{GRADING_DIR_ENV: str(work)})
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        return subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT).returncode


# seconds a cell may run: the wrong structures of the kv_cache cost runs (the cheats that re-run the
# prefix) take up to about 10 s of CPU in the kernel, more on a busy machine; the course's own is 60
TIMEOUT = 30


def grade(work: Path, timeout: int = TIMEOUT, only: list[str] | None = None) -> list[Row]:
    """Grade the fixtures of the table (``fixtures/table.py``) inside ``work``; return one row per fixture."""
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.fixtures import table  # not in the Gradescope bundle, which has no fixtures
    from autograder.fixtures.make import handed_in_files

    manifest = table.grading()
    names = [n for n in sorted(manifest) if not only or n in only]
    work.mkdir(parents=True, exist_ok=True)
    log = work / "nbgrader.log"
    state = GradingState(work)
    for name in names:
        a = manifest[name]["assignment"]
        dest = state.submitted / name / a
        dest.mkdir(parents=True, exist_ok=True)
        for path in handed_in_files(name):  # under the names it was handed in under
            shutil.copy(path, dest / path.name)
        # what `nbgrader collect` brings along: the release's stored visible references
        shutil.copytree(ROOT / "exercises" / a / "reference", dest / "reference", dirs_exist_ok=True)
    args = course_args(work)
    max_scores = course.max_scores()  # the solutions' own points
    assignments = [a for a in max_scores if any(manifest[n]["assignment"] == a for n in names)]
    for a in assignments:
        if nbgrader("generate_assignment", a, "--force", *args, log=log, work=work) != 0:
            raise RuntimeError(f"nbgrader generate_assignment {a} failed; see {log}")
    for a in assignments:
        # a broken submission makes nbgrader exit 1 after grading every other student
        nbgrader("autograde", a, f"--Execute.timeout={timeout}", *args, log=log, work=work)
        nbgrader("generate_feedback", a, *args, log=log, work=work)
    from autograder.integrity import flagged_submissions

    flagged: dict[str, str] = {}
    for f in flagged_submissions(state.db_url):
        flagged[f["student"]] = flagged.get(f["student"], "") + " " + str(f["reasons"])
    rows = []
    with Gradebook(state.db_url) as gb:
        for name in names:
            spec = manifest[name]
            a = spec["assignment"]
            try:
                actual = gb.find_submission(a, name).score
            except MissingEntry:
                actual = None
            html = state.feedback / name / a / f"{a}.html"
            recorded = recorded_labels(state.autograded / name / a / f"{a}.ipynb")
            rows.append(
                Row(
                    name,
                    a,
                    spec["expected_score"],
                    actual,
                    max_scores[a],
                    spec["label"],
                    spec["label"] is None or spec["label"] in recorded,
                    html if html.exists() else None,
                    spec.get("flag"),
                    flagged.get(name, "").strip(),
                    recorded,
                )
            )
    return rows


def recorded_labels(path: Path) -> tuple[str, ...]:
    """The labels of the failed verdicts ``TrustedVerdict`` recorded in a graded notebook's cells."""
    from autograder.preprocessors import recorded_verdicts

    if not path.exists():
        return ()
    out = []
    for cell in json.loads(path.read_text()).get("cells", []):
        for v in recorded_verdicts(cell) or []:
            if not v.get("ok") and str(v.get("label")) not in out:
                out.append(str(v.get("label")))
    return tuple(out)


def _graded_text(path: Path) -> str:
    """All outputs of the graded test cells of an autograded notebook (empty if none)."""
    if not path.exists():
        return ""
    nb = json.loads(path.read_text())
    parts = []
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
            for out in cell.get("outputs", []):
                parts.append(out.get("text", "") if isinstance(out.get("text", ""), str) else "".join(out["text"]))
                parts.extend(out.get("traceback", []))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, help="folder for the nbgrader state (default: a temporary one)")
    p.add_argument("--timeout", type=int, default=TIMEOUT, help="seconds per cell (nbgrader's Execute.timeout)")
    p.add_argument("--only", nargs="*", help="fixture names (default: all)")
    args = p.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="encdec-grading-"))
    t0 = time.time()
    rows = grade(work, args.timeout, args.only)
    bad = 0
    print(f"{'fixture':30s} {'expected':>8s} {'actual':>8s}  label")
    for r in rows:
        ok = r.actual == r.expected and r.label_found and r.flag_ok
        bad += not ok
        print(
            f"{r.name:30s} {r.expected:8.1f} {(r.actual if r.actual is not None else float('nan')):8.1f}  "
            f"{(r.label or '-')[:40]:40s} {(r.flags or '-')[:40]:40s} {'ok' if ok else 'MISMATCH'}  "
            f"{' '.join(r.labels)}"
        )
    print(f"{len(rows)} fixtures graded in {time.time() - t0:.0f} s; state in {work}")
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
