"""The parent of a batch: plans the tasks (one per student and assignment), hands them to the
pool, and is the single writer of the gradebook: it applies each published result as it comes
(`autograder.taskqueue.writer.apply`), then sums up."""

from __future__ import annotations

import concurrent.futures as cf
import shutil
from pathlib import Path

from autograder.taskqueue.course import coursedir_for, fingerprint, load_config, state_dir, students, submission_dir
from autograder.taskqueue.seed import definition, notebooks
from autograder.taskqueue.unit import published
from autograder.taskqueue.writer import Applied, Result, already, apply, graded_on_disk, summary

from . import pool as workers_pool

__all__ = ["run", "summary"]


def run(
    assignments: list[str] | str,
    workers: int = 2,
    timeout: int | None = None,
    force: bool = False,
    students_only: list[str] | None = None,
    root: Path | None = None,
    progress: bool = True,
) -> list[Result]:
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
    cd = coursedir_for(config)
    results: list[Result] = []
    tasks = []  # (assignment, student, spec)
    applied = {}
    for assignment in assignments:
        spec = definition(cd.db_url, cd.course_id, assignment)
        applied[assignment] = Applied(cd, assignment)
        for student in students(cd, assignment):
            if students_only and student not in students_only:
                continue
            fp = fingerprint(submission_dir(cd, assignment, student))
            if (
                not force
                and applied[assignment].fingerprint(student) == fp
                and graded_on_disk(cd, assignment, student, applied[assignment])
            ):
                results += already(cd, assignment, student, applied[assignment])
            elif not force and published(cd, assignment, student, fp) is not None:
                results += apply(config, assignment, student, fp, applied[assignment])  # graded, not applied
            else:
                if published(cd, assignment, student, fp) is not None:  # --force: graded again
                    shutil.rmtree(published(cd, assignment, student, fp))
                tasks.append((assignment, student, spec))
    if students_only:
        found = {r.student for r in results} | {t[1] for t in tasks}
        unknown = sorted(set(students_only) - found)
        if unknown:
            raise SystemExit(f"no submission of {', '.join(assignments)} for: {', '.join(unknown)}")
    results += _grade(config, root, tasks, workers, timeout, applied, progress)
    results.sort(key=lambda r: (r.assignment, r.student, r.notebook))
    return results


def _grade(config, root: Path, tasks, workers: int, timeout: int | None, applied, progress: bool) -> list[Result]:
    from pebble import ProcessExpired
    from tqdm import tqdm

    if not tasks:
        return []
    cd = coursedir_for(config)
    per_notebook = (timeout or config.SandboxedExecute.get("notebook_timeout", 600)) + 120
    log_file = state_dir(cd) / f"{tasks[0][0]}.log"  # kernels' and nbgrader's output, worker by worker
    log_file.parent.mkdir(parents=True, exist_ok=True)
    total = sum(len(notebooks(spec)) for _, _, spec in tasks)
    bar = tqdm(total=total, desc="grading " + ", ".join(sorted({t[0] for t in tasks})), unit="nb", disable=not progress)
    out: list[Result] = []
    p = workers_pool.pool(root, max(1, min(workers, len(tasks))), log_file)
    try:
        futures = {}
        for assignment, student, spec in tasks:
            budget = per_notebook * len(notebooks(spec))
            futures[workers_pool.schedule(p, root, assignment, student, spec, timeout, budget)] = (
                assignment,
                student,
                spec,
                budget,
            )
        for future in cf.as_completed(futures):
            assignment, student, spec, budget = futures[future]
            try:
                fp = future.result()
                got = apply(config, assignment, student, fp, applied[assignment])  # the single writer
            except Exception as err:
                killed = isinstance(err, (cf.TimeoutError, ProcessExpired))
                why = (
                    f"grading exceeded {budget:g} s; worker killed"
                    if isinstance(err, cf.TimeoutError)
                    else "its grading process died"
                    if killed
                    else f"{type(err).__name__}: {err}"[:200]
                )
                got = [
                    Result(student, nb, "killed" if killed else "failed", reason=why, assignment=assignment)
                    for nb in notebooks(spec)
                ]
                _score_from_gradebook(cd, got)
            out += got
            for r in got:
                bar.update(1)
                bar.set_postfix_str(f"{r.student}/{r.notebook}: {r.status}")
    finally:
        p.stop()  # every task is done (or the batch was interrupted): stop the workers
        p.join()
        bar.close()
        workers_pool.sweep(config)
    return out


def _score_from_gradebook(cd, results: list[Result]) -> None:
    """A task that produced nothing keeps what the gradebook already held (a previous grade)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(cd.db_url, cd.course_id) as gb:
        for r in results:
            try:
                scored = gb.find_submission_notebook(r.notebook, r.assignment, r.student)
                r.score, r.max_score = float(scored.score), float(scored.max_score)
            except MissingEntry:
                pass
