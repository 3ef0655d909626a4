"""The parent of a batch: plans the tasks, hands them to N worker processes, enforces each task's
wall-clock budget (a stuck worker is killed and replaced), records every result and sums up."""
from __future__ import annotations

import multiprocessing as mp
import queue
import time
from pathlib import Path

from .gradebook import install_gradebook_lock, load_config, lock_path_for, reuse_gradebook_engines
from .tasks import Result, Task, plan, previous_results, record_missing
from .worker import worker_main


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
