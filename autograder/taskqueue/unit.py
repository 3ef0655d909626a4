"""The grading unit: one student x one assignment, graded by stock nbgrader code without touching
the course gradebook.

`grade` copies the submission into a task-private work folder (a `.tmp-*` folder next to where its
result will be published), seeds a throwaway SQLite gradebook with the assignment (`seed.py`; in
memory, `/dev/shm`, where there is one: nothing of it is kept) that nbgrader's steps read the
assignment from, and runs nbgrader's own `Autograde` with the course's configuration up to the
first step that writes grades (`course.autograde_steps`: the sandbox and the trusted verdict apply;
the grades are written once, by the writer, from the autograded notebook), one notebook per
conversion so a notebook that cannot be graded costs only itself. It then publishes the autograded
notebooks and a `result.json` by renaming the work folder to `<results>/<fingerprint>/` in one step: a result is
either complete or absent, a worker killed mid-task leaves only a `.tmp-*` folder that nobody reads,
and a task delivered twice publishes once (the second rename finds the folder there and discards
its copy). The course gradebook is written by one process only, the writer (`writer.py`).
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from autograder import handed_in

from .course import (
    TMP_PREFIX,
    autograde_steps,
    coursedir_for,
    fingerprint,
    load_config,
    results_dir,
    seeds_dir,
    submission_dir,
    with_overrides,
)
from .seed import notebooks, seed

RESULT = "result.json"
MEMORY = "/dev/shm"  # where the throwaway gradebook goes when it can: its commits then wait for no disk
AUTOGRADED = "autograded"  # in a published result: the student's autograded assignment folder


def _seeded_gradebook(cd, spec: dict, dest: Path) -> None:
    """A new gradebook holding the assignment at `dest`: a copy of one seeded once per definition
    in the store (creating an nbgrader gradebook takes seconds, copying one milliseconds)."""
    digest = hashlib.sha256(json.dumps([cd.course_id, spec], sort_keys=True).encode()).hexdigest()[:16]
    template = seeds_dir(cd) / f"{spec['name']}-{digest}.db"
    if not template.is_file():
        template.parent.mkdir(parents=True, exist_ok=True)
        tmp = template.with_name(f"{TMP_PREFIX}{os.getpid()}-{template.name}")
        tmp.unlink(missing_ok=True)
        seed(f"sqlite:///{tmp}", cd.course_id, spec)
        os.replace(tmp, template)  # complete or absent, like a result
    shutil.copy(template, dest)


def published(cd, assignment: str, student: str, fp: str) -> Path | None:
    """The complete result of (assignment, student, fingerprint), or None."""
    final = results_dir(cd, assignment, student) / fp
    return final if (final / RESULT).is_file() else None


def grade(root: str, assignment: str, student: str, spec: dict, timeout: int | None = None) -> dict:
    """Grade one student's submission of one assignment; publish and return its result."""
    from autograder.sandbox.fork_server import _sweep
    from autograder.sandbox.mounts import folder_prefix

    root = str(Path(root).resolve())
    config = load_config(Path(root))
    cd = coursedir_for(config)
    store = results_dir(cd, assignment, student)
    store.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=store))
    try:
        sub = work / "submitted" / student / assignment
        shutil.copytree(submission_dir(cd, assignment, student), sub, symlinks=True)
        fp = fingerprint(sub)  # of the copy: what is graded is what the key names
        done = published(cd, assignment, student, fp)
        if done is not None:  # delivered twice: the first delivery's result stands
            return json.loads((done / RESULT).read_text())
        memory = MEMORY if os.access(MEMORY, os.W_OK) else work
        _sweep(memory)  # what units killed mid-task left there
        with tempfile.TemporaryDirectory(prefix=folder_prefix("g"), dir=memory) as private:  # 0700, as grading state
            result = _autograde(config, work, sub, assignment, student, spec, timeout, Path(private) / "gradebook.db")
        result["fingerprint"] = fp
        (work / RESULT).write_text(json.dumps(result, indent=1, sort_keys=True))
        for scratch in ("submitted", "graded", "feedback"):  # only the result is published
            path = work / scratch
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        try:
            os.rename(work, store / fp)  # the publication: atomic, all or nothing
        except OSError:
            if published(cd, assignment, student, fp) is None:
                raise
            return json.loads((store / fp / RESULT).read_text())  # a twin delivery published first
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _autograde(config, work: Path, sub: Path, assignment: str, student: str, spec: dict, timeout, db: Path) -> dict:
    from nbgrader.api import Gradebook, MissingEntry

    start = time.monotonic()
    db_url = f"sqlite:///{db}"
    cfg = with_overrides(
        config,
        submitted_directory=str(work / "submitted"),
        autograded_directory=str(work / "graded"),
        feedback_directory=str(work / "feedback"),
        db_url=db_url,
    )
    cfg.Autograde.autograde_preprocessors = autograde_steps(config)[0]  # the writer runs the rest, once
    if timeout:  # cells keep their own limit, capped by what is left of the notebook's
        cfg.SandboxedExecute.notebook_timeout = timeout
    _seeded_gradebook(coursedir_for(config), spec, db)
    course_id = coursedir_for(cfg).course_id
    out: dict = {"assignment": assignment, "student": student, "notebooks": {}, "timestamp": None}
    cd = coursedir_for(cfg)  # the notebooks the gradebook knows, their locked cells as the exporter reads them
    locked = handed_in.release_checksums(Path(cd.format_path(cd.source_directory, ".", ".")), assignment)
    expected = {nb: locked.get(nb, frozenset()) for nb in notebooks(spec)}
    for nb in notebooks(spec):
        # a notebook handed in under another name stands for the release's where that is unambiguous
        # (autograder/handed_in.py): nbgrader is pointed at that file, and grades it under the release's name
        renamed = (handed_in.stands_for(sub / f"{nb}.ipynb", expected) or [None])[0]
        if not os.path.lexists(sub / f"{nb}.ipynb") and renamed is None:
            out["notebooks"][nb] = {"status": "missing", "reason": "not submitted"}
            continue
        out["notebooks"][nb] = _autograde_notebook(
            cfg, assignment, student, nb, sub, glob.escape(renamed.stem) if renamed else nb
        )
    with Gradebook(db_url, course_id) as gb:
        try:
            submission = gb.find_submission(assignment, student)
            out["timestamp"] = submission.timestamp.isoformat() if submission.timestamp else None
        except MissingEntry:
            pass
    graded = work / "graded" / student / assignment
    if graded.is_dir():
        os.rename(graded, work / AUTOGRADED)
    out["seconds"] = time.monotonic() - start
    out["worker"] = f"{os.uname().nodename}:{os.getpid()}"
    return out


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _autograde_notebook(cfg, assignment: str, student: str, nb: str, sub: Path, pattern: str) -> dict:
    """nbgrader's own `Autograde` converter on one notebook (`pattern`: the file's name, a glob)."""
    from nbgrader.converters import Autograde

    start = time.monotonic()
    cd = coursedir_for(cfg, assignment_id=assignment, student_id=student, notebook_id=pattern)
    converter = Autograde(coursedir=cd, config=cfg, force=True, create_student=True)
    capture = _Capture()
    converter.log.addHandler(capture)
    error: BaseException | None = None
    try:
        converter.start()
    except Exception as exc:
        error = exc
    finally:
        converter.log.removeHandler(capture)
    graded = Path(cd.format_path(cd.autograded_directory, student, assignment)) / f"{nb}.ipynb"
    info = {"status": "graded" if error is None and graded.is_file() else "failed", "seconds": time.monotonic() - start}
    if info["status"] == "failed":
        info["reason"] = _reason(capture.messages, error)
        # The submission itself is broken (not a grading failure): it earns 0 (the writer says so).
        info["unreadable"] = not _readable(sub / f"{nb}.ipynb")
    return info


def _reason(messages: list[str], exc: BaseException | None) -> str:
    """The most telling line of what went wrong, for the summary table."""
    for msg in reversed(messages):
        for line in reversed(msg.strip().splitlines()):
            if "Error" in line or "Exception" in line:
                return line.strip()[:200]
    if exc is not None:
        return f"{type(exc).__name__}: {exc}"[:200]
    return (messages[-1].strip().splitlines() or ["failed"])[-1][:200] if messages else "failed"


def _readable(path: Path) -> bool:
    """A notebook the exporter reads (``handed_in.read_handed_in``: within the intake limits)."""
    try:
        handed_in.read_handed_in(path)
        return True
    except Exception:
        return False


def preload() -> None:
    """What grading a notebook imports in the grader, imported once: a forking worker (jobs.py) calls
    it before its first fork, so that each job inherits it instead of importing it again. The judges
    import torch and the model (about 2 s a job on this course's machine), the integrity scan
    IPython's input transformer, the gradebook SQLite's dialect."""
    from IPython.core.inputtransformer2 import TransformerManager  # noqa: F401 (imported before the fork: each job inherits it)
    from nbgrader.api import Gradebook

    from autograder import judge

    judge.checks()
    with Gradebook("sqlite:///:memory:"):
        pass
