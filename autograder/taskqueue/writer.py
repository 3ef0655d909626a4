"""The single writer of the course gradebook: applies published results, through nbgrader's
public API only, idempotently.

For a result of (assignment, student, fingerprint) it creates the student and the submission
(with the submission's timestamp) with `Gradebook`, puts the autograded notebooks in the course's
autograded folder (copied beside it, then renamed over it), and runs on each notebook the
gradebook-writing tail of the course's own `Autograde.autograde_preprocessors`, from nbgrader's
`SaveAutoGrades` on (the integrity flags, the late penalty), which the unit left to it
(`course.autograde_steps`): the same stock code that `nbgrader autograde` runs, on the same
notebook, once, so the scores are the ones it would write. None of those
steps runs student code. A notebook not handed in, or one that cannot be read, scores 0 (as
stock nbgrader scores a missing one); one whose grading failed keeps its last graded copy and
scores, and a result that graded nothing changes nothing (no grade is lost by a failed run).

Scores are set, never added, and every applied key is recorded (`Applied`, written atomically
after the gradebook commit): applying a result twice, or a task delivered twice, changes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import roster
from autograder.keep import replace_folder

from .course import TMP_PREFIX, autograde_steps, autograded_dir, coursedir_for, results_dir, state_dir
from .unit import AUTOGRADED, RESULT

STALE_TMP_S = 24 * 3600  # a `.tmp-*` work folder this old belongs to a killed worker


@dataclass
class Result:
    """One notebook of one student, as the batch reports it."""

    student: str
    notebook: str
    status: str  # graded | failed | missing | killed
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    reason: str = ""
    fingerprint: str = ""
    assignment: str = ""


class Applied:
    """What the writer has applied: {student: {notebook: {"fingerprint", "score"}}} per assignment,
    in `<state>/<assignment>.json`, replaced atomically after each student."""

    def __init__(self, cd, assignment: str) -> None:
        self.path = state_dir(cd) / f"{assignment}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.data: dict = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def fingerprint(self, student: str) -> str | None:
        fps = {e.get("fingerprint") for e in self.data.get(student, {}).values()}
        return fps.pop() if len(fps) == 1 else None

    def record(self, student: str, results: list[Result]) -> None:
        self.data[student] = {
            r.notebook: {"fingerprint": r.fingerprint, "score": r.score} for r in results if r.status == "graded"
        }
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def writer_steps(config) -> list:
    """The course's autograde preprocessors from SaveAutoGrades on, instantiated with its config."""
    from traitlets.utils.importstring import import_item

    return [import_item(n)(config=config) for n in autograde_steps(config)[1]]


def apply(config, assignment: str, student: str, fp: str, applied: Applied | None = None) -> list[Result]:
    """Write the published result (assignment, student, fp) into the course gradebook."""
    import nbformat
    from nbgrader.api import Gradebook

    cd = coursedir_for(config)
    applied = applied or Applied(cd, assignment)
    final = results_dir(cd, assignment, student) / fp
    result = json.loads((final / RESULT).read_text())
    if applied.fingerprint(student) == fp and _on_disk(cd, assignment, student, result):
        return _recorded(cd, assignment, student, fp, result, "already graded")
    failed = {
        nb
        for nb, info in result["notebooks"].items()
        if info["status"] in ("failed", "killed") and not info.get("unreadable")
    }
    if failed != set(result["notebooks"]):  # a run that graded nothing changes nothing (autograder/keep.py)
        with Gradebook(cd.db_url, cd.course_id) as gb:
            gb.update_or_create_student(student)
            roster.fill(gb, [student])  # the account's name where the gradebook has none
            stamp = result.get("timestamp")
            if stamp:
                gb.update_or_create_submission(assignment, student, timestamp=dt.datetime.fromisoformat(stamp))
            else:
                gb.update_or_create_submission(assignment, student)
    if (final / AUTOGRADED).is_dir():
        _keep_failed(final / AUTOGRADED, autograded_dir(cd, assignment, student), failed)
        replace_folder(final / AUTOGRADED, autograded_dir(cd, assignment, student))
    steps = writer_steps(config)
    out = []
    for nb, info in result["notebooks"].items():
        r = Result(
            student,
            nb,
            info["status"],
            seconds=info.get("seconds", 0.0),
            reason=info.get("reason", ""),
            fingerprint=fp,
            assignment=assignment,
        )
        if info["status"] == "graded":
            path = autograded_dir(cd, assignment, student) / f"{nb}.ipynb"
            notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
            resources = {
                "nbgrader": {
                    "db_url": cd.db_url,
                    "course_id": cd.course_id,
                    "assignment": assignment,
                    "notebook": nb,
                    "student": student,
                }
            }
            for step in steps:
                notebook, resources = step.preprocess(notebook, resources)
        elif info["status"] == "missing" or info.get("unreadable"):
            _zero(cd, assignment, student, nb)  # not handed in, or not a notebook: 0
        out.append(r)
    with Gradebook(cd.db_url, cd.course_id) as gb:
        for r in out:
            scored = gb.find_submission_notebook(r.notebook, assignment, student)
            r.score, r.max_score = float(scored.score), float(scored.max_score)
    applied.record(student, out)
    _tidy(final.parent, keep=fp)
    if any(r.status == "failed" and not result["notebooks"][r.notebook].get("unreadable") for r in out):
        shutil.rmtree(final, ignore_errors=True)  # a grading failure may pass next time: regrade then
    return out


def already(cd, assignment: str, student: str, applied: Applied) -> list[Result]:
    """The recorded notebooks of a student whose submission is unchanged since it was applied."""
    from nbgrader.api import Gradebook

    out = []
    with Gradebook(cd.db_url, cd.course_id) as gb:
        for nb, entry in sorted(applied.data.get(student, {}).items()):
            scored = gb.find_submission_notebook(nb, assignment, student)
            out.append(
                Result(
                    student,
                    nb,
                    "graded",
                    float(scored.score),
                    float(scored.max_score),
                    reason="already graded",
                    fingerprint=entry["fingerprint"],
                    assignment=assignment,
                )
            )
    return out


def graded_on_disk(cd, assignment: str, student: str, applied: Applied) -> bool:
    folder = autograded_dir(cd, assignment, student)
    return all((folder / f"{nb}.ipynb").is_file() for nb in applied.data.get(student, {}))


def _zero(cd, assignment: str, student: str, nb: str) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(cd.db_url, cd.course_id) as gb:
        for grade in gb.find_submission_notebook(nb, assignment, student).grades:
            if grade.manual_score is None:
                grade.auto_score = 0
                grade.needs_manual_grade = False
        gb.db.commit()


def _on_disk(cd, assignment: str, student: str, result: dict) -> bool:
    folder = autograded_dir(cd, assignment, student)
    return all(
        (folder / f"{nb}.ipynb").is_file() for nb, info in result["notebooks"].items() if info["status"] == "graded"
    )


def _recorded(cd, assignment: str, student: str, fp: str, result: dict, reason: str) -> list[Result]:
    from nbgrader.api import Gradebook

    out = []
    with Gradebook(cd.db_url, cd.course_id) as gb:
        for nb, info in result["notebooks"].items():
            scored = gb.find_submission_notebook(nb, assignment, student)
            out.append(
                Result(
                    student,
                    nb,
                    info["status"],
                    float(scored.score),
                    float(scored.max_score),
                    reason=reason if info["status"] == "graded" else info.get("reason", ""),
                    fingerprint=fp,
                    assignment=assignment,
                )
            )
    return out


def _keep_failed(new: Path, old: Path, failed: set[str]) -> None:
    """A notebook whose grading failed keeps its last graded copy: put it in the folder that will
    replace the course's (nbgrader removed it from the new one)."""
    for nb in failed:
        last = old / f"{nb}.ipynb"
        if last.is_file() and not (new / f"{nb}.ipynb").exists():
            shutil.copy2(last, new / f"{nb}.ipynb")


def _tidy(folder: Path, keep: str) -> None:
    """Remove the results of older submissions and the work folders killed workers left."""
    now = time.time()
    for path in folder.iterdir():
        if path.name == keep:
            continue
        if path.name.startswith(TMP_PREFIX):
            if now - path.stat().st_mtime > STALE_TMP_S:
                shutil.rmtree(path, ignore_errors=True)
        else:
            shutil.rmtree(path, ignore_errors=True)


def summary(results: list[Result]) -> str:
    """A plain-text table: one row per notebook, then the counts."""
    rows = [("assignment", "student", "notebook", "status", "score", "seconds", "reason")]
    for r in results:
        rows.append(
            (
                r.assignment,
                r.student,
                r.notebook,
                r.status,
                f"{r.score:g}/{r.max_score:g}",
                f"{r.seconds:.1f}" if r.seconds else "",
                r.reason,
            )
        )
    widths = [max(len(row[k]) for row in rows) for k in range(6)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:6], widths)) + "  " + row[6] for row in rows]
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    lines.append("")
    lines.append(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "nothing to grade")
    return "\n".join(lines)
