"""A worker process of the batch: grades one student's notebooks at a time with nbgrader's own
`Autograde` converter, reports each notebook to the parent, dies with the parent."""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import time
import warnings
from dataclasses import asdict
from pathlib import Path

from .gradebook import coursedir_for, install_gradebook_lock, load_config, lock_path_for, reuse_gradebook_engines
from .tasks import Result, Task


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _reason(messages: list[str], exc: BaseException | None) -> str:
    """The most telling line of what went wrong, for the summary table."""
    for msg in reversed(messages):
        for line in reversed(msg.strip().splitlines()):
            if "Error" in line or "Exception" in line:
                return line.strip()[:200]
    if exc is not None:
        return f"{type(exc).__name__}: {exc}"[:200]
    return (messages[-1].strip().splitlines() or ["failed"])[-1][:200] if messages else "failed"


def grade_notebook(config, root: Path, assignment: str, student: str, notebook: str,
                   logger: logging.Logger) -> Result:
    """Autograde one notebook of one student with nbgrader's own converter."""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.converters import Autograde

    start = time.monotonic()
    cd = coursedir_for(config, assignment_id=assignment, student_id=student, notebook_id=notebook)
    converter = Autograde(coursedir=cd, config=config, force=True, create_student=True)
    capture = _Capture()
    converter.log.addHandler(capture)
    error: BaseException | None = None
    try:
        converter.start()
    except Exception as exc:  # noqa: BLE001 - NbGraderException and friends: this notebook fails
        error = exc
    finally:
        converter.log.removeHandler(capture)
    graded = Path(cd.format_path(cd.autograded_directory, student, assignment)) / f"{notebook}.ipynb"
    result = Result(student, notebook, "graded" if error is None and graded.is_file() else "failed",
                    seconds=time.monotonic() - start, assignment=assignment)
    unreadable = False
    if result.status == "failed":
        result.reason = _reason(capture.messages, error)
        logger.warning("%s/%s failed: %s", student, notebook, result.reason)
        unreadable = not _readable(Path(cd.format_path(cd.submitted_directory, student, assignment))
                                   / f"{notebook}.ipynb")
    with Gradebook(cd.db_url, cd.course_id) as gb:
        try:
            nb = gb.find_submission_notebook(notebook, assignment, student)
            if unreadable:
                # The submission itself is broken (not a grading failure, which is retried on
                # the next run and keeps its scores): nbgrader leaves it unscored; it earns 0.
                for grade in nb.grades:
                    grade.auto_score = 0
                    grade.needs_manual_grade = False
                gb.db.commit()
            result.score, result.max_score = float(nb.score), float(nb.max_score)
        except MissingEntry:
            result.status, result.reason = "failed", result.reason or "no submission in the gradebook"
    return result


def _readable(path: Path) -> bool:
    import nbformat

    try:
        nbformat.read(path, as_version=4)
        return True
    except Exception:  # noqa: BLE001 - any reason it cannot be read is the submission's
        return False


def worker_main(root: str, tasks, results, timeout: int | None, log_file: str) -> None:
    _die_with_parent()
    os.chdir(root)
    # Kernels and nbgrader write to this process's stdout/stderr: keep them in the log file.
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    warnings.filterwarnings("ignore", module="nbgrader")
    warnings.filterwarnings("ignore", message=".*not in session.*")
    logging.basicConfig(filename=log_file, level=logging.INFO,
                        format=f"%(asctime)s [{os.getpid()}] %(name)s %(levelname)s %(message)s")
    logger = logging.getLogger("autograder.driver")
    config = load_config(Path(root))
    if timeout:  # cells keep their own limit, capped by what is left of the notebook's
        config.SandboxedExecute.notebook_timeout = timeout
    install_gradebook_lock(lock_path_for(config, Path(root)))
    reuse_gradebook_engines()
    try:
        while True:
            task = tasks.get()
            if task is None:
                return
            _grade_task(config, root, task, results, logger)
    finally:  # multiprocessing skips atexit in its children: stop this worker's fork server here
        from autograder.sandbox.kernel import Zygote

        Zygote.stop_all()


def _grade_task(config, root: str, task: Task, results, logger: logging.Logger) -> None:
    """Grade one student's notebooks one after the other, reporting each to the parent."""
    for notebook in task.notebooks:
        try:
            result = grade_notebook(config, Path(root), task.assignment, task.student, notebook, logger)
        except Exception as exc:  # noqa: BLE001 - report and carry on with the next one
            logger.exception("grading %s/%s", task.student, notebook)
            result = Result(task.student, notebook, "failed", reason=f"{type(exc).__name__}: {exc}"[:200],
                            assignment=task.assignment)
        result.fingerprint = task.fingerprints.get(notebook, "")
        results.put(("done", asdict(result)))
    results.put(("idle", (task.assignment, task.student)))
