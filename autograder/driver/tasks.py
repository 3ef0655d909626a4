"""What a batch grades and what it graded: one `Task` per student, one `Result` per notebook, the
resumable `State` (fingerprints of what was graded) and the plan drawn from the gradebook."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .gradebook import STATE_DIR, coursedir_for


@dataclass
class Result:
    student: str
    notebook: str
    status: str  # graded | failed | missing | killed
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    reason: str = ""
    fingerprint: str = ""
    assignment: str = ""


@dataclass
class Task:
    assignment: str
    student: str
    notebooks: list[str]
    fingerprints: dict[str, str] = field(default_factory=dict)


def fingerprint(path: Path) -> str:
    h = hashlib.sha256(path.read_bytes())
    stamp = path.parent / "timestamp.txt"
    if stamp.is_file():
        h.update(stamp.read_bytes())
    return h.hexdigest()[:16]


class State:
    """What has been graded, written atomically after every notebook."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict = json.loads(path.read_text()) if path.is_file() else {}

    def done(self, student: str, notebook: str, fp: str, graded_file: Path) -> bool:
        entry = self.data.get(student, {}).get(notebook)
        return bool(entry) and entry.get("fingerprint") == fp and graded_file.is_file()

    def record(self, result: Result) -> None:
        if result.status == "graded":
            self.data.setdefault(result.student, {})[result.notebook] = {
                "fingerprint": result.fingerprint, "score": result.score}
        else:
            self.data.get(result.student, {}).pop(result.notebook, None)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def plan(config, assignment: str, force: bool, students: list[str] | None):
    from nbgrader.api import Gradebook, MissingEntry

    cd = coursedir_for(config)
    with Gradebook(cd.db_url, cd.course_id) as gb:
        try:
            notebooks = sorted(nb.name for nb in gb.find_assignment(assignment).notebooks)
        except MissingEntry:
            raise SystemExit(f"assignment {assignment!r} is not in the gradebook: run "
                             f"`nbgrader generate_assignment {assignment}` first") from None
    submitted = Path(cd.format_path(cd.submitted_directory, "*", assignment)).parent.parent
    all_students = sorted(p.parent.name for p in submitted.glob(f"*/{assignment}") if p.is_dir())
    if students:
        all_students = [s for s in all_students if s in students]
    state_dir = Path(cd.format_path(cd.autograded_directory, STATE_DIR, "."))
    state_dir.mkdir(parents=True, exist_ok=True)
    state = State(state_dir / f"{assignment}.json")
    tasks, skipped, missing = [], [], []
    for student in all_students:
        sub = Path(cd.format_path(cd.submitted_directory, student, assignment))
        out = Path(cd.format_path(cd.autograded_directory, student, assignment))
        todo, fps = [], {}
        for nb in notebooks:
            path = sub / f"{nb}.ipynb"
            if not path.is_file():
                missing.append((student, nb))
                continue
            fps[nb] = fingerprint(path)
            if not force and state.done(student, nb, fps[nb], out / f"{nb}.ipynb"):
                skipped.append((student, nb))
            else:
                todo.append(nb)
        if todo:
            tasks.append(Task(assignment, student, todo, fps))
    return notebooks, tasks, skipped, missing, state


def record_missing(config, assignment: str, missing) -> list[Result]:
    """A notebook that was not submitted scores 0 (as nbgrader does for the ones it grades)."""
    from nbgrader.api import Gradebook

    cd = coursedir_for(config)
    out = []
    with Gradebook(cd.db_url, cd.course_id) as gb:
        for student, nb in missing:
            gb.update_or_create_student(student)
            gb.update_or_create_submission(assignment, student)
            sub = gb.find_submission_notebook(nb, assignment, student)
            for grade in sub.grades:
                if grade.manual_score is None:
                    grade.auto_score = 0
                    grade.needs_manual_grade = False
            gb.db.commit()
            out.append(Result(student, nb, "missing", 0.0, float(sub.max_score), reason="not submitted",
                              assignment=assignment))
    return out


def previous_results(config, assignment: str, skipped) -> list[Result]:
    from nbgrader.api import Gradebook

    cd = coursedir_for(config)
    with Gradebook(cd.db_url, cd.course_id) as gb:
        return [Result(s, nb, "graded", float(n.score), float(n.max_score), reason="already graded",
                       assignment=assignment)
                for s, nb in skipped for n in [gb.find_submission_notebook(nb, assignment, s)]]
