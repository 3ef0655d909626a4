"""The driver's workers: a maintained process pool (pebble's `ProcessPool`: a per-task timeout
kills the task's worker and starts a new one, a worker that dies is replaced) running the grading
unit (`autograder.taskqueue.unit.grade`). Workers never open the course gradebook."""

from __future__ import annotations

import ctypes
import logging
import multiprocessing as mp
import os
import signal
import tempfile
import warnings
from pathlib import Path


def _init_worker(root: str, log_file: str) -> None:
    """In each worker: die with the parent (and the sandbox's fork server with the worker), keep
    kernels' and nbgrader's output in the log file, work from the course root."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    os.chdir(root)
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    warnings.filterwarnings("ignore", module="nbgrader")
    warnings.filterwarnings("ignore", message=".*not in session.*")
    logging.basicConfig(
        filename=log_file, level=logging.INFO, format=f"%(asctime)s [{os.getpid()}] %(name)s %(levelname)s %(message)s"
    )


def _grade(root: str, assignment: str, student: str, spec: dict, timeout: int | None) -> str:
    """One task in a worker: the unit; returns the fingerprint of what it published."""
    from autograder.taskqueue.unit import grade

    log = logging.getLogger("autograder.driver")
    log.info("grading %s of %s", assignment, student)
    result = grade(root, assignment, student, spec, timeout)
    for nb, info in result["notebooks"].items():
        if info["status"] == "failed":
            log.warning("%s/%s failed: %s", student, nb, info.get("reason", ""))
    return result["fingerprint"]


def pool(root: Path, workers: int, log_file: Path):
    from pebble import ProcessPool

    return ProcessPool(
        max_workers=workers,
        initializer=_init_worker,
        initargs=(str(root), str(log_file)),
        context=mp.get_context("spawn"),
    )


def schedule(p, root: Path, assignment: str, student: str, spec: dict, timeout: int | None, budget: float):
    return p.schedule(_grade, args=(str(root), assignment, student, spec, timeout), timeout=budget)


def sweep(config) -> None:
    """After the pool: the sandbox folders of workers that are gone (a worker stopped by the pool
    or killed on timeout skips its clean-up), as each grader does for its predecessors."""
    from autograder.sandbox import mounts, safefs
    from autograder.sandbox.sandbox import privileged

    base = config.SandboxKernelManager.get("temp_dir") or tempfile.gettempdir()
    tops = mounts.sweep_stale() if privileged() else []
    for folder in [*tops, *mounts.stale_folders(base)]:
        try:
            safefs.remove_tree(folder)
        except OSError:
            pass
