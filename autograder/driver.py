"""Grade a whole batch of submissions in parallel, in the sandbox, resumably.

    python -m autograder.driver <assignment> [<assignment> ...] [--workers N] [--timeout S] [--force]

Run it from the repository root (it reads `nbgrader_config.py` there, like `nbgrader`).
Every notebook of every student in `autograder/submitted/*/<assignment>/` is graded by stock
nbgrader code (`Autograde` with the course's preprocessors, so the sandbox and the trusted
verdict apply) one notebook per conversion, so a notebook that cannot be graded (invalid JSON,
a stuck kernel) costs only itself, not the student's other notebooks.

Design (autograder/sandbox/README.md, "Batch grading"):
- N worker processes, started once (the imports are paid once per worker); a task is one
  student, whose notebooks are graded one after the other (they share a working folder).
- One gradebook, written safely: every gradebook session of every process holds an exclusive
  file lock for its (short) duration, so SQLite sees a single writer at a time; each write is an
  SQLite transaction, so a killed run leaves the gradebook consistent.
- Resumable and idempotent: after each notebook the parent records it (with a fingerprint of the
  submitted file) in a state file written atomically; a re-run skips what is recorded and still
  matches, `--force` regrades everything.
- Workers die with the parent (PR_SET_PDEATHSIG), their kernels die with them; a task that
  overruns its wall-clock budget has its worker killed and replaced.
- Each worker forks its kernels from its own sandboxed zygote (torch imported once) and keeps
  one pooled gradebook engine (SQLite in WAL mode).

Exit status: 0 when every notebook was graded (or is missing), 1 when some failed.
"""
from __future__ import annotations

import argparse
import ctypes
import fcntl
import hashlib
import json
import logging
import multiprocessing as mp
import os
import queue
import signal
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_DIR = ".driver"  # under the autograded folder; nbgrader's student globs skip dot-folders


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


# --------------------------------------------------------------------------------------------
# Configuration and the gradebook lock


def load_config(root: Path):
    """The course's nbgrader configuration, as `nbgrader` run from `root` would load it."""
    from traitlets.config.loader import PyFileConfigLoader

    if not (root / "nbgrader_config.py").is_file():
        raise SystemExit(f"no nbgrader_config.py in {root}: run the driver from the repository root")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


def coursedir_for(config, **ids):
    from nbgrader.coursedir import CourseDirectory

    cd = CourseDirectory(config=config)
    for key, value in ids.items():
        setattr(cd, key, value)
    return cd


_lock_path: str | None = None
_lock_depth = 0
_lock_fd: int | None = None


def install_gradebook_lock(lock_path: Path) -> None:
    """Make every nbgrader `Gradebook` session in this process hold an exclusive file lock.

    nbgrader opens a `Gradebook`, does a few queries and commits, and closes it (in the
    converter and in `SaveAutoGrades`, `OverwriteCells`, `AssignLatePenalties`); none of those
    sessions spans a kernel run. Locking from open to close makes the processes of the batch
    take turns, so SQLite never sees two writers (and never answers "database is locked").
    """
    global _lock_path
    from nbgrader import api

    _lock_path = str(lock_path)
    if getattr(api.Gradebook, "_encdec_locked", False):
        return
    original_init, original_close = api.Gradebook.__init__, api.Gradebook.close

    def __init__(self, *args, **kwargs):
        _acquire()
        try:
            original_init(self, *args, **kwargs)
        except BaseException:
            _release()
            raise
        self._encdec_holds = True

    def close(self):
        try:
            original_close(self)
        finally:
            if getattr(self, "_encdec_holds", False):
                self._encdec_holds = False
                _release()

    api.Gradebook.__init__, api.Gradebook.close = __init__, close
    api.Gradebook._encdec_locked = True


def reuse_gradebook_engines() -> None:
    """One SQLAlchemy engine per gradebook URL per process, SQLite in WAL mode.

    nbgrader builds a new engine (and inspects the schema) for every `Gradebook` it opens, about
    ten per notebook, and commits once per graded cell; with a pooled engine and WAL journaling
    (`synchronous=NORMAL`: safe when a process is killed, the last commits can be lost only on a
    power cut) the gradebook work of a notebook takes a fraction of the time. The database file
    stays an ordinary SQLite gradebook that stock nbgrader and the formgrader open as before.
    """
    from nbgrader import api
    from sqlalchemy import event

    if getattr(api, "_encdec_engines", None) is not None:
        return
    engines: dict = {}
    original = api.create_engine

    def create_engine(url, **kwargs):
        key = str(url)
        if key not in engines:
            engine = engines[key] = original(url, **kwargs)
            if key.startswith("sqlite"):
                @event.listens_for(engine, "connect")
                def _pragmas(dbapi_connection, _record):
                    cursor = dbapi_connection.cursor()
                    cursor.execute("PRAGMA journal_mode=WAL")
                    cursor.execute("PRAGMA synchronous=NORMAL")
                    cursor.close()
        return engines[key]

    api.create_engine = create_engine
    api._encdec_engines = engines


def _acquire() -> None:
    global _lock_depth, _lock_fd
    if _lock_depth == 0:
        _lock_fd = os.open(_lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(_lock_fd, fcntl.LOCK_EX)
    _lock_depth += 1


def _release() -> None:
    global _lock_depth, _lock_fd
    _lock_depth -= 1
    if _lock_depth == 0 and _lock_fd is not None:
        fcntl.flock(_lock_fd, fcntl.LOCK_UN)
        os.close(_lock_fd)
        _lock_fd = None


def lock_path_for(config, root: Path) -> Path:
    cd = coursedir_for(config)
    url = cd.db_url
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///"):] + ".lock")
    return Path(cd.format_path(cd.autograded_directory, STATE_DIR, ".")) / "gradebook.lock"


# --------------------------------------------------------------------------------------------
# Worker side


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


# --------------------------------------------------------------------------------------------
# Parent side


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


def run(assignments: list[str] | str, workers: int = 2, timeout: int | None = None, force: bool = False,
        students: list[str] | None = None, root: Path | None = None, progress: bool = True) -> list[Result]:
    """Grade the batch; returns one `Result` per (assignment, student, notebook)."""
    from autograder.sandbox.sandbox import SandboxUnavailable, check_available

    if isinstance(assignments, str):
        assignments = [assignments]
    root = (root or Path.cwd()).resolve()
    config = load_config(root)
    try:
        check_available()
    except SandboxUnavailable as err:
        raise SystemExit(f"autograder.driver: {err}") from None
    install_gradebook_lock(lock_path_for(config, root))
    reuse_gradebook_engines()
    tasks, results, states, order = [], [], {}, {}
    for assignment in assignments:
        notebooks, todo, skipped, missing, states[assignment] = plan(config, assignment, force, students)
        order.update({(assignment, nb): k for k, nb in enumerate(notebooks)})
        tasks += todo
        results += previous_results(config, assignment, skipped) + record_missing(config, assignment, missing)
    if students:
        graded = {r.student for r in results} | {t.student for t in tasks}
        unknown = sorted(set(students) - graded)
        if unknown:
            raise SystemExit(f"no submission of {', '.join(assignments)} for: {', '.join(unknown)}")
    total = sum(len(t.notebooks) for t in tasks)
    per_notebook = (timeout or config.SandboxedExecute.get("notebook_timeout", 600)) + 120
    log_file = states[assignments[0]].path.with_suffix(".log")

    ctx = mp.get_context("spawn")
    result_q = ctx.Queue()

    def spawn(q):
        p = ctx.Process(target=worker_main, args=(str(root), q, result_q, timeout, str(log_file)), daemon=True)
        p.start()
        return p

    # One private task queue per worker, so the parent knows which task a killed worker held.
    n = max(1, min(workers, len(tasks)))
    queues = [ctx.Queue() for _ in range(n)] if tasks else []
    procs = [spawn(q) for q in queues]
    busy: dict[int, tuple[Task, float, set]] = {}
    owner: dict[tuple[str, str], int] = {}  # (assignment, student) -> worker index
    pending = list(tasks)

    from tqdm import tqdm

    bar = tqdm(total=total, desc="grading " + ", ".join(assignments), unit="nb",
               disable=not progress or total == 0)

    def dispatch(i: int) -> None:
        if pending:
            task = pending.pop(0)
            busy[i] = (task, time.monotonic(), set())
            owner[(task.assignment, task.student)] = i
            queues[i].put(task)

    def finish(r: Result) -> None:
        results.append(r)
        states[r.assignment].record(r)
        bar.update(1)
        bar.set_postfix_str(f"{r.student}/{r.notebook}: {r.status}")

    for i in range(n):
        dispatch(i)
    try:
        while busy:
            try:
                msg = result_q.get(timeout=1.0)
            except queue.Empty:
                msg = None
            if msg is not None and msg[0] == "done":
                r = Result(**msg[1])
                i = owner.get((r.assignment, r.student))
                if i is not None and i in busy:
                    busy[i][2].add(r.notebook)
                    finish(r)
            elif msg is not None and msg[0] == "idle":
                i = owner.pop(tuple(msg[1]), None)
                if i is not None:
                    busy.pop(i, None)
                    dispatch(i)
            # Hard wall-clock budget of a task, on top of the sandbox's own limits.
            for i, (task, started, done) in list(busy.items()):
                budget = per_notebook * len(task.notebooks)
                if procs[i].is_alive() and time.monotonic() - started <= budget:
                    continue
                why = ("its grading process died" if not procs[i].is_alive()
                       else f"grading exceeded {budget} s; worker killed")
                if procs[i].is_alive():
                    procs[i].kill()
                procs[i].join()
                for nb in task.notebooks:
                    if nb not in done:
                        finish(Result(task.student, nb, "killed", reason=why, assignment=task.assignment,
                                      fingerprint=task.fingerprints.get(nb, "")))
                owner.pop((task.assignment, task.student), None)
                busy.pop(i)
                queues[i] = ctx.Queue()
                procs[i] = spawn(queues[i])
                dispatch(i)
    finally:
        for q in queues:
            q.put(None)
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
        bar.close()
    results.sort(key=lambda r: (r.assignment, r.student, order.get((r.assignment, r.notebook), 0)))
    return results


def summary(results: list[Result]) -> str:
    """A plain-text table: one row per notebook, then the counts."""
    rows = [("assignment", "student", "notebook", "status", "score", "seconds", "reason")]
    for r in results:
        rows.append((r.assignment, r.student, r.notebook, r.status, f"{r.score:g}/{r.max_score:g}",
                     f"{r.seconds:.1f}" if r.seconds else "", r.reason))
    widths = [max(len(row[k]) for row in rows) for k in range(6)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:6], widths)) + "  " + row[6] for row in rows]
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    lines.append("")
    lines.append(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "nothing to grade")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.driver", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment", nargs="+", help="one or more assignments, graded in one batch")
    parser.add_argument("--workers", type=int, default=max(1, os.cpu_count() or 1),
                        help="notebooks graded at the same time (default: one per CPU)")
    parser.add_argument("--timeout", type=int, default=None,
                        help="wall-clock seconds per notebook (default: SandboxedExecute.notebook_timeout)")
    parser.add_argument("--force", action="store_true", help="regrade notebooks already graded")
    parser.add_argument("--student", action="append", help="grade only this student (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    results = run(args.assignment, args.workers, args.timeout, args.force, args.student)
    print(summary(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    bad = [r for r in results if r.status in ("failed", "killed")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
