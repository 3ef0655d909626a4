"""The grading unit as an RQ job (Redis as the broker): enqueue, the job itself, collect.

- `enqueue` reads each assignment's definition from the course gradebook once and puts one job
  per (assignment, student, submission fingerprint) on the `grading` queue, unless that key is
  already applied, queued, running or published. The job id is a digest of the key, so the same
  key is never queued twice by the enqueuer; a job that RQ delivers twice anyway (a retry after a
  worker died, an operator's requeue) publishes once (`unit.grade`).
- `grade_job` runs in an RQ worker (`rq worker grading` or `python -m autograder.taskqueue worker`) on
  any host that sees the course folders (the submissions store, the configured autograded folder)
  and has the sandbox; it never opens the course gradebook.
- `collect` is the single writer: it applies every published result to the course gradebook
  (`writer.apply`, idempotent), waiting for the queued ones when asked. It also runs RQ's own
  abandoned-job clean-up, so a job whose worker vanished is retried (each job carries
  `Retry(max=RETRIES)`) once its heartbeat lapses; a work-horse killed under a live worker is
  retried at once by that worker.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from rq import SimpleWorker, Worker

from .course import coursedir_for, fingerprint, load_config, students, submission_dir
from .seed import definition
from .unit import published
from .writer import Applied, Result, apply

QUEUE = "grading"
RETRIES = 2  # deliveries after the first, for a job whose worker died or raised
DEFAULT_URL = "redis://127.0.0.1:6379/0"


class GradingWorker(Worker):
    """RQ's forking worker; a job counts as abandoned `grace` seconds after a missed heartbeat
    (RQ's own margin is 60 s), so a lost worker's task can be retried sooner. Usable with RQ's
    command too: `rq worker -w autograder.taskqueue.jobs.GradingWorker grading`."""

    grace = 60

    def get_heartbeat_ttl(self, job) -> int:
        return int(self.job_monitoring_interval) + int(self.grace)


class GradingSimpleWorker(SimpleWorker):
    """RQ's non-forking worker: jobs run in the worker process itself, so the sandbox's fork server
    (torch imported once) serves every job, as in the driver. It sends no heartbeat while a job
    runs, so a lost worker's job is retried only after the job's whole budget (RQ's own rule)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _keep_sandbox[0] = True


_keep_sandbox = [False]  # True in a GradingSimpleWorker: its fork server serves the next job too


def job_id(course_id: str, root: str, assignment: str, student: str, fp: str) -> str:
    key = "\0".join([course_id, root, assignment, student, fp])
    return "grade-" + hashlib.sha256(key.encode()).hexdigest()[:32]


def grade_job(root: str, assignment: str, student: str, spec: dict, timeout: int | None = None) -> dict:
    """The RQ job: `unit.grade`, then stop a sandbox fork server this process started (an RQ
    work-horse exits without running atexit handlers); the one its worker started before forking
    serves the next job too, as does a simple worker's own."""
    from autograder.sandbox.kernel import Zygote

    from .unit import grade

    try:
        result = grade(root, assignment, student, spec, timeout)
    finally:
        if not _keep_sandbox[0]:
            Zygote.stop_all(started_here=True)
    return {
        "assignment": assignment,
        "student": student,
        "fingerprint": result["fingerprint"],
        "statuses": {nb: info["status"] for nb, info in result["notebooks"].items()},
    }


def connect(url: str):
    from redis import Redis

    return Redis.from_url(url)


def enqueue(
    root: Path,
    assignments: list[str],
    url: str,
    force: bool = False,
    timeout: int | None = None,
    only: list[str] | None = None,
) -> list[str]:
    """Queue every submission of `assignments` not graded yet; the ids of the jobs queued."""
    import shutil

    from rq import Queue, Retry
    from rq.exceptions import NoSuchJobError
    from rq.job import Job, JobStatus

    root = Path(root).resolve()
    config = load_config(root)
    cd = coursedir_for(config)
    conn = connect(url)
    queue = Queue(QUEUE, connection=conn)
    budget = (timeout or config.SandboxedExecute.get("notebook_timeout", 600)) + 120
    queued = []
    for assignment in assignments:
        spec = definition(cd.db_url, cd.course_id, assignment)
        applied = Applied(cd, assignment)
        for student in students(cd, assignment):
            if only and student not in only:
                continue
            fp = fingerprint(submission_dir(cd, assignment, student))
            done = published(cd, assignment, student, fp)
            if force and done is not None:
                shutil.rmtree(done)
                done = None
            if done is not None or (not force and applied.fingerprint(student) == fp):
                continue
            jid = job_id(cd.course_id, str(root), assignment, student, fp)
            try:
                status = Job.fetch(jid, connection=conn).get_status()
            except NoSuchJobError:
                status = None
            if status in (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.SCHEDULED, JobStatus.DEFERRED):
                continue
            queue.enqueue(
                grade_job,
                str(root),
                assignment,
                student,
                spec,
                timeout,
                job_id=jid,
                job_timeout=budget * len(spec["notebooks"]),
                result_ttl=24 * 3600,
                failure_ttl=7 * 24 * 3600,
                retry=Retry(max=RETRIES),
                description=f"grade {assignment} of {student}",
            )
            queued.append(jid)
    return queued


def collect(
    root: Path,
    assignments: list[str],
    url: str | None,
    wait: bool = False,
    poll: float = 1.0,
    only: list[str] | None = None,
    progress=None,
) -> list[Result]:
    """Apply every published result to the course gradebook (the single writer); with `wait`, until
    no job of these submissions is queued or running. One `Result` per notebook."""
    from rq import Queue
    from rq.exceptions import NoSuchJobError
    from rq.job import Job, JobStatus
    from rq.registry import StartedJobRegistry

    root = Path(root).resolve()
    config = load_config(root)
    cd = coursedir_for(config)
    conn = connect(url) if url else None
    todo = {}
    for assignment in assignments:
        for student in students(cd, assignment):
            if not only or student in only:
                todo[(assignment, student)] = fingerprint(submission_dir(cd, assignment, student))
    applied = {a: Applied(cd, a) for a in assignments}
    results: list[Result] = []
    while True:
        for (assignment, student), fp in list(todo.items()):
            if published(cd, assignment, student, fp) is not None:
                got = apply(config, assignment, student, fp, applied[assignment])
                results += got
                del todo[(assignment, student)]
                if progress:
                    progress(got)
                continue
            status = None
            if conn is not None:
                try:
                    job = Job.fetch(job_id(cd.course_id, str(root), assignment, student, fp), connection=conn)
                    status = job.get_status()
                except NoSuchJobError:
                    pass
            if published(cd, assignment, student, fp) is not None:
                continue  # it finished meanwhile: applied on the next round
            if status not in (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.SCHEDULED, JobStatus.DEFERRED) or not wait:
                why = "not queued" if status is None else f"no result (job {status.value})"
                results.append(Result(student, "*", "failed", reason=why, fingerprint=fp, assignment=assignment))
                del todo[(assignment, student)]
        if not todo or not (wait or any(published(cd, a, s, fp) for (a, s), fp in todo.items())):
            break
        if conn is not None:  # RQ's own abandoned-job handling: a lapsed heartbeat means a lost worker
            StartedJobRegistry(queue=Queue(QUEUE, connection=conn)).cleanup()
        time.sleep(poll)
    return results
