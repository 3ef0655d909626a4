"""No grade is lost by a failed run: the last good autograde and feedback of each submission are
kept, and a run that fails, crashes or is killed puts them back.

nbgrader removes a submission's autograded (or feedback) folder before it grades it again, and
removes what it wrote when the run fails (``BaseConverter.init_destination`` and
``convert_notebooks``' failure handler): a regrade that fails on an import error, a crash of the
grader, a kill or a timeout left the student with no graded notebook. Through nbgrader's own
extension points only:

- ``KeepLastGrade``, the first step of autograde's and of feedback's preprocessors, marks the
  submission as being regraded (a file naming this process) before anything is written; the
  end of its converter's ``convert_notebooks``, finished or failed, is seen where it happens
  (``_install``: the one wrapper of nbgrader's this module makes, at import);
- ``after``, nbgrader's ``post_convert_hook``, runs only when every notebook of the submission was
  converted: it keeps a copy of the new folder (and, for autograde, the submission's gradebook
  rows) and clears the mark;
- a mark still there when its converter has stopped, or whose process is dead (a kill), is a
  failed run: ``restore`` puts the kept folder back in place and the gradebook rows as they were.
  ``restore_unfinished`` runs on every load of the course configuration (``environment.prepare``) and in the driver and
  the queue, so a kill is undone by the next command.

A submission graded before anything was kept has nothing to put back: its failed regrade still
removes it, as stock nbgrader does (the log says so).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import threading
import weakref
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor

_KEPT = ".kept"  # under the grading state's root


def _kept_root(dest_root: Path) -> Path:
    return dest_root.parent / _KEPT


def _mark(dest_root: Path, kind: str, student: str, assignment: str) -> Path:
    return _kept_root(dest_root) / kind / student / f"{assignment}.running"


def _copy(dest_root: Path, kind: str, student: str, assignment: str) -> Path:
    return _kept_root(dest_root) / kind / student / assignment


def _rows(dest_root: Path, student: str, assignment: str) -> Path:
    return _kept_root(dest_root) / "autograded" / student / f"{assignment}.grades.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def replace_folder(src: Path, dest: Path) -> None:
    """A copy of ``src`` at ``dest``: copied beside it, then renamed over it (a reader never sees
    half a folder)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    new, old = dest.with_name(f".{dest.name}.new-{os.getpid()}"), dest.with_name(f".{dest.name}.old-{os.getpid()}")
    shutil.rmtree(new, ignore_errors=True)
    shutil.copytree(src, new)
    if dest.exists():
        os.rename(dest, old)
    os.rename(new, dest)
    shutil.rmtree(old, ignore_errors=True)


def gradebook_rows(db_url: str, course_id: str, student: str, assignment: str) -> dict:
    """The submission's rows a regrade can change: its timestamp, every grade and comment, its flags."""
    from nbgrader.api import Gradebook

    from autograder.integrity import review

    with Gradebook(db_url, course_id) as gb:
        sub = gb.find_submission(assignment, student)
        return {
            "timestamp": sub.timestamp.isoformat() if sub.timestamp else None,
            "grades": [
                [g.notebook.name, g.name, g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade]
                for nb in sub.notebooks
                for g in nb.grades
            ],
            "comments": [
                [c.notebook.name, c.name, c.auto_comment, c.manual_comment] for nb in sub.notebooks for c in nb.comments
            ],
            "flags": review.rows(gb, student, assignment),
        }


def put_rows_back(db_url: str, course_id: str, student: str, assignment: str, rows: dict) -> None:
    import datetime as dt

    from nbgrader.api import Gradebook

    from autograder.integrity import review

    with Gradebook(db_url, course_id) as gb:
        sub = gb.update_or_create_submission(assignment, student)
        sub.timestamp = dt.datetime.fromisoformat(rows["timestamp"]) if rows["timestamp"] else None
        for nb, cell, auto, manual, extra, needs in rows["grades"]:
            g = gb.find_grade(cell, nb, assignment, student)
            g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade = auto, manual, extra, needs
        for nb, cell, auto, manual in rows["comments"]:
            c = gb.find_comment(cell, nb, assignment, student)
            c.auto_comment, c.manual_comment = auto, manual
        review.put(gb, student, assignment, rows.get("flags", []))
        gb.db.commit()


def begin(dest_root: Path, kind: str, student: str, assignment: str) -> Path:
    """Mark the submission as being regraded by this process."""
    mark = _mark(dest_root, kind, student, assignment)
    mark.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    mark.write_text(json.dumps({"pid": os.getpid()}))
    return mark


# (student, assignment) -> (folder root, kind, the converter): the runs of this process under way
_RUNNING: dict[tuple[str, str], tuple[Path, str, weakref.ref]] = {}
_LOCK = threading.RLock()


def _ended(converter) -> None:
    """``converter.convert_notebooks`` has returned or raised: each run it marked and did not finish
    (``after`` unmarks a finished one) failed, and is put back."""
    with _LOCK:
        for key, (dest_root, kind, ref) in list(_RUNNING.items()):
            if ref() is converter or ref() is None:
                _finished(dest_root, kind, *key)


def failed(assignment: str, student: str, **_) -> None:
    """A submission's conversion failed: put back its last good run. nbgrader's ``failure_hook`` as
    the course proposes it upstream (``upstream/nbgrader-failure-hook.patch``)."""
    with _LOCK:
        run = _RUNNING.get((student, assignment))
    if run is not None:
        _finished(run[0], run[1], student, assignment)


def _install() -> None:
    """Wrap nbgrader's ``BaseConverter.convert_notebooks`` once per process, so that the end of every
    conversion, finished or failed, is known where it happens: on the command line, in the
    formgrader's server (its API converts in-process), in the driver and the queue. nbgrader 0.9 has
    a hook for a conversion that finished (``post_convert_hook``), none for one that failed: this
    shim stands in for the ``failure_hook`` proposed upstream (``failed`` is that hook), and goes
    when a release has it."""
    from nbgrader.converters.base import BaseConverter

    convert = BaseConverter.convert_notebooks
    if getattr(convert, "_keeps_last_grade", False):
        return

    def convert_notebooks(self) -> None:
        try:
            convert(self)
        finally:
            _ended(self)

    convert_notebooks._keeps_last_grade = True
    convert_notebooks.__doc__ = convert.__doc__
    BaseConverter.convert_notebooks = convert_notebooks


_install()


@atexit.register
def _at_exit() -> None:
    """A run still marked when the process exits (an exit inside a conversion): put back."""
    with _LOCK:
        for key, (dest_root, kind, _) in list(_RUNNING.items()):
            _finished(dest_root, kind, *key)


def after(notebooks: list[str], **_) -> None:
    """nbgrader's post_convert_hook: every notebook of a submission was converted (its notebooks'
    paths are <step>/<student>/<assignment>/<notebook>.ipynb). Keep a copy of what was written (and
    the gradebook rows, after autograde) and clear the mark."""
    for student, assignment in {(Path(p).parent.parent.name, Path(p).parent.name) for p in notebooks}:
        with _LOCK:
            if (student, assignment) not in _RUNNING:
                continue
            dest_root, kind, _ = _RUNNING.pop((student, assignment))
        mark = _mark(dest_root, kind, student, assignment)
        meta = json.loads(mark.read_text()) if mark.is_file() else {}
        if (dest_root / student / assignment).is_dir():
            replace_folder(dest_root / student / assignment, _copy(dest_root, kind, student, assignment))
        if kind == "autograded" and meta.get("db_url"):
            rows = gradebook_rows(meta["db_url"], meta["course_id"], student, assignment)
            _rows(dest_root, student, assignment).write_text(json.dumps(rows))
        mark.unlink(missing_ok=True)


def restore(dest_root: Path, kind: str, student: str, assignment: str) -> bool:
    """A failed run of (student, assignment): put back the kept folder and gradebook rows; clear the
    mark. Returns whether anything was kept to put back."""
    mark = _mark(dest_root, kind, student, assignment)
    meta = json.loads(mark.read_text()) if mark.is_file() else {}
    kept = _copy(dest_root, kind, student, assignment)
    found = kept.is_dir()
    if found:
        replace_folder(kept, dest_root / student / assignment)
    rows = _rows(dest_root, student, assignment)
    if kind == "autograded" and rows.is_file() and meta.get("db_url"):
        put_rows_back(meta["db_url"], meta["course_id"], student, assignment, json.loads(rows.read_text()))
    mark.unlink(missing_ok=True)
    return found


def restore_unfinished(grading_root: Path, only_pid: int | None = None) -> list[tuple[str, str, str]]:
    """Every marked run under ``grading_root`` whose process is gone (or, with ``only_pid``, every
    run of that process): restored. Returns (kind, student, assignment) of each. A grading root this
    user cannot read holds no run of theirs: another user's loading the course configuration (a
    teaching assistant, a grader pointed at its own folders) restores nothing and goes on."""
    done = []
    try:
        marks = sorted((grading_root / _KEPT).glob("*/*/*.running"))
    except PermissionError:
        return done
    for mark in marks:
        try:
            pid = int(json.loads(mark.read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if (pid != only_pid) if only_pid is not None else _alive(pid):
            continue
        kind, student, assignment = mark.parent.parent.name, mark.parent.name, mark.name[: -len(".running")]
        restore(grading_root / kind, kind, student, assignment)
        done.append((kind, student, assignment))
    return done


class KeepLastGrade(NbGraderPreprocessor):
    """The first step of a submission's autograde or feedback: mark it as being regraded (the
    folder nbgrader removed is put back if the run does not finish: module docstring). It lives
    here, not in ``autograder.preprocessors``, so that it imports nothing of the grading steps:
    a run that fails because those cannot be imported is still marked, and undone."""

    def preprocess(self, nb, resources):
        from nbgrader.converters import GenerateFeedback

        info = resources.get("nbgrader", {})
        converter = getattr(self.parent, "parent", None)  # preprocessor -> exporter -> converter
        cd = getattr(converter, "coursedir", None)
        if cd is None or not info.get("student") or (info["student"], info["assignment"]) in _RUNNING:
            return nb, resources  # not a submission's run, or already marked (the autograde pass after sanitizing)
        kind = "feedback" if isinstance(converter, GenerateFeedback) else "autograded"
        dest_root = Path(
            cd.format_path(cd.feedback_directory if kind == "feedback" else cd.autograded_directory, ".", ".")
        ).resolve()
        student, assignment = info["student"], info["assignment"]
        mark = begin(dest_root, kind, student, assignment)
        mark.write_text(json.dumps({"pid": os.getpid(), "db_url": cd.db_url, "course_id": cd.course_id}))
        with _LOCK:
            _RUNNING[(student, assignment)] = (dest_root, kind, weakref.ref(converter))
        return nb, resources


def _finished(dest_root: Path, kind: str, student: str, assignment: str) -> None:
    """The converter has stopped: a mark still there means its run failed."""
    _RUNNING.pop((student, assignment), None)
    if _mark(dest_root, kind, student, assignment).is_file():
        kept = restore(dest_root, kind, student, assignment)
        sys.stderr.write(
            f"[keep] the {kind} run of {student}/{assignment} did not finish: "
            + ("its last good one is back in place\n" if kept else "nothing was kept to put back\n")
        )
