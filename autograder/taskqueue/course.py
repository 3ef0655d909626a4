"""The course as a grading job sees it: nbgrader's configuration loaded from the course root, the
folders it names (never typed here), the results store and the fingerprint of a submission."""

from __future__ import annotations

import copy
import functools
import hashlib
import os
from pathlib import Path

STATE_DIR = ".driver"  # under the configured autograded folder; nbgrader's student globs skip dot-folders
RESULTS = "results"  # STATE_DIR/results/<assignment>/<student>/<fingerprint>/: published grading results
TMP_PREFIX = ".tmp-"  # a result being written; never read, removed by the next attempt
FIRST_WRITER_STEP = "nbgrader.preprocessors.SaveAutoGrades"  # the first autograde step that writes the gradebook


def load_config(root: Path):
    """The course's nbgrader configuration, as `nbgrader` run from `root` would load it (loaded once
    per process: a worker pays for its imports once, an RQ work-horse inherits them)."""
    return _load_config(str(Path(root).resolve()))


@functools.lru_cache(maxsize=4)
def _load_config(root: str):
    from traitlets.config.loader import PyFileConfigLoader

    if not (Path(root) / "nbgrader_config.py").is_file():
        raise SystemExit(f"no nbgrader_config.py in {root}: run from the course root (the repository root)")
    return PyFileConfigLoader("nbgrader_config.py", path=root).load_config()


def autograde_steps(config) -> tuple[list[str], list[str]]:
    """The course's autograde preprocessors, split where the gradebook is first written: the unit's
    (before nbgrader's `SaveAutoGrades`: the sandboxed run, the verdict) and the writer's (from it on:
    no student code runs), so that the gradebook is written once, by the writer."""
    names = list(config.Autograde.get("autograde_preprocessors", [FIRST_WRITER_STEP]))
    names = [n if isinstance(n, str) else f"{n.__module__}.{n.__name__}" for n in names]
    at = names.index(FIRST_WRITER_STEP) if FIRST_WRITER_STEP in names else len(names)
    return names[:at], names[at:] or [FIRST_WRITER_STEP]


def coursedir_for(config, **traits):
    """nbgrader's `CourseDirectory` for `config`, with some traits set (ids, folders, db_url)."""
    from nbgrader.coursedir import CourseDirectory

    cd = CourseDirectory(config=config)
    for key, value in traits.items():
        setattr(cd, key, value)
    return cd


def with_overrides(config, **course_directory):
    """A copy of `config` whose CourseDirectory traits are replaced (a task's private folders)."""
    cfg = copy.deepcopy(config)
    for key, value in course_directory.items():
        setattr(cfg.CourseDirectory, key, value)
    return cfg


def state_dir(cd) -> Path:
    """The driver's and the queue's own state: a dot-folder inside the configured autograded folder."""
    return Path(cd.format_path(cd.autograded_directory, STATE_DIR, "."))


def seeds_dir(cd) -> Path:
    """Seeded throwaway gradebooks, one per assignment definition, shared by the workers."""
    return state_dir(cd) / "seeds"


def submission_dir(cd, assignment: str, student: str) -> Path:
    return Path(cd.format_path(cd.submitted_directory, student, assignment))


def autograded_dir(cd, assignment: str, student: str) -> Path:
    return Path(cd.format_path(cd.autograded_directory, student, assignment))


def results_dir(cd, assignment: str, student: str) -> Path:
    """Where the results of (assignment, student) are published, one folder per fingerprint."""
    return state_dir(cd) / RESULTS / assignment / student


def students(cd, assignment: str) -> list[str]:
    """Every student with a submission of `assignment` in the configured submitted folder."""
    top = submission_dir(cd, assignment, "*").parent.parent
    return sorted(
        p.parent.name for p in top.glob(f"*/{assignment}") if p.is_dir() and not p.parent.name.startswith(".")
    )


def fingerprint(folder: Path) -> str:
    """A digest of every file of a submission folder (names and bytes, nbgrader's timestamp.txt
    included): a resubmission gets a new one, a redelivered task the same."""
    h = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        h.update(str(path.relative_to(folder)).encode() + b"\0")
        if path.is_symlink():  # never followed (a link to /dev/zero must not hang the grader)
            h.update(b"link\0" + os.readlink(path).encode())
        elif path.is_file():
            with open(path, "rb") as f:  # in chunks: a file handed in may be large
                h.update(hashlib.file_digest(f, "sha256").digest())
    return h.hexdigest()[:16]
