"""Feedback at submission: a hub service that grades each new hand-in of the assignments named in
``ENCDEC_FEEDBACK_AT_SUBMISSION`` and releases its feedback, which the student's ``nbgrader
fetch_feedback`` then gets (issue 52; the hub guide, ``book/instructor_guide.md``, sets it up).

    python -m autograder.ontime --workers 2          # from the course root, as the grader's user

It runs as the instructor (a JupyterHub ``services`` entry, ``deploy/hub/jupyterhub_config.py``),
never as root, and adds no grading of its own: each poll lists the exchange's inbound folder (at
most ``LISTED`` names), and for each hand-in not seen before

- once nothing in it changed for ``QUIET_S`` (a submit writes the folder in steps), collects it as
  nbgrader's ``collect`` does (``collected.collect``: the student's own regular files,
  no link followed, within bounds, timed by the server's clock) into the course's submitted folder,
  one hand-in of a student and assignment at a time;
- queues one grading unit (``taskqueue.jobs.enqueue``: the key is the student, the assignment and the
  hand-in's fingerprint) for the queue's workers (``--workers`` starts simple workers beside it);
- before any of that, and every ``AHEAD_EVERY_S``, draws the roster's graded inputs ahead
  (``judge/ahead.py``, at a low priority): a kv_cache hand-in then waits for no drawing;
- once the unit is published, applies it to the gradebook with the queue's writer, then runs
  nbgrader's own ``generate_feedback`` and ``release_feedback`` for that student (``NbGraderAPI``).

So a hand-in graded here and the same folder collected and autograded by the instructor score the
same: the same copy, the same unit, the same writer. **Attempts**: at most ``ENCDEC_ATTEMPTS``
hand-ins of a student and assignment are graded, counted in the service's own record (a student
who removes an earlier hand-in from the inbound folder does not get it back). A hand-in past the
limit, or one whose grading failed, is not graded and its feedback is a short page that says so
(``PAGES``), at the name ``fetch_feedback`` looks for; a folder that is no hand-in of the student it
names (a link, another user's folder) is refused and logged, as ``collect`` refuses it.
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import logging
import os
import pwd
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import collected
from autograder.taskqueue.course import coursedir_for, fingerprint, load_config, state_dir, submission_dir

ASSIGNMENTS = "ENCDEC_FEEDBACK_AT_SUBMISSION"  # the assignments graded at submission, comma-separated
ATTEMPTS = "ENCDEC_ATTEMPTS"  # graded hand-ins per student and assignment
DEFAULT_ATTEMPTS = 5
STUDENTS_GROUP = "ENCDEC_STUDENTS_GROUP"  # the hub's students: their inputs are drawn before they hand in
AHEAD_EVERY_S = 600.0  # the roster looked at again (students added to the gradebook or the group)
LISTED = 10_000  # names of the inbound folder looked at per poll: a flood is taken in turns
QUIET_S = 2.0  # a hand-in is taken once nothing in it changed for this long (submit writes it in steps)
RECORD = "ontime.json"  # in the queue's state folder: every hand-in seen, its attempt and outcome
# the page a hand-in that is not graded gets instead of feedback (words last, from the record's data)
PAGES = {
    "over_limit": "{assignment}: this hand-in was not graded at submission. {limit} of your hand-ins are graded "
    "at submission and this is number {attempt}; the feedback of your last graded one stands. "
    "Your instructor grades your final submission.",
    "failed": "{assignment}: this hand-in could not be graded at submission. Your instructor grades your final "
    "submission.",
}
log = logging.getLogger("autograder.ontime")


@dataclass(frozen=True)
class HandIn:
    """A folder of the inbound, as its name and its status (``lstat``) give it."""

    name: str
    student: str
    assignment: str
    ctime_ns: int  # the server's clock: when it was last changed
    own: bool  # a folder owned by the student its name gives


def hand_ins(inbound_fd: int, assignments: set[str]) -> list[HandIn]:
    """The inbound folder's hand-ins of ``assignments`` (nbgrader's names, student+assignment+time[+key])."""
    with os.scandir(inbound_fd) as listing:
        entries = list(itertools.islice(listing, LISTED))
    out = []
    for entry in entries:
        parts = entry.name.rsplit("+", 3)
        if len(parts) < 3 or parts[1] not in assignments:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            uid = pwd.getpwnam(parts[0]).pw_uid
        except (KeyError, OSError):
            uid, info = None, None
        own = info is not None and stat.S_ISDIR(info.st_mode) and info.st_uid == uid
        out.append(HandIn(entry.name, parts[0], parts[1], info.st_ctime_ns if info else 0, own))
    return sorted(out, key=lambda h: (h.ctime_ns, h.name))


class Service:
    """The loop's state: the course, the record of hand-ins seen, the units in flight."""

    def __init__(self, root: Path, url: str, assignments: set[str], attempts: int) -> None:
        from nbgrader.apps.api import NbGraderAPI
        from nbgrader.exchange.default.exchange import Exchange

        self.root, self.url, self.assignments, self.attempts = Path(root).resolve(), url, assignments, attempts
        self.config = load_config(self.root)
        self.cd = coursedir_for(self.config)
        course = Path(Exchange(config=self.config).root) / self.cd.course_id
        self.inbound, self.outbound = course / "inbound", course / "feedback"
        self.record_path = state_dir(self.cd) / RECORD
        self.record_path.parent.mkdir(parents=True, exist_ok=True)
        self.record: dict[str, dict] = json.loads(self.record_path.read_text()) if self.record_path.is_file() else {}
        self.busy: dict[tuple[str, str], tuple[str, str]] = {}  # (student, assignment) -> (hand-in, fingerprint)
        self.redis = None
        self.api = NbGraderAPI(coursedir=self.cd, config=self.config)

    def step(self) -> int:
        """One poll: finish the units published, start the hand-ins waiting; how many moved."""
        moved = self._finish()
        try:
            fd = os.open(self.inbound, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return moved  # not released yet
        try:
            started = [h for h in hand_ins(fd, self.assignments) if h.name not in self.record and self._take(fd, h)]
        finally:
            os.close(fd)
        if started:
            from autograder.taskqueue.jobs import enqueue

            enqueue(
                self.root, sorted({h.assignment for h in started}), self.url, only=sorted({h.student for h in started})
            )
        return moved + len(started)

    def _take(self, fd: int, h: HandIn) -> bool:
        """Start ``h`` (True: a unit was queued) or settle it now (over the limit, refused), unless
        that student's previous hand-in of the assignment is still being graded."""
        from autograder.keep import replace_folder

        if (h.student, h.assignment) in self.busy or time.time_ns() - h.ctime_ns < QUIET_S * 1e9:
            return False
        entry = {"student": h.student, "assignment": h.assignment, "handed_in": h.ctime_ns / 1e9}
        attempt = 1 + sum(
            1
            for e in self.record.values()
            if e["outcome"] != "refused" and (e["student"], e["assignment"]) == (h.student, h.assignment)
        )  # removed ones count
        with tempfile.TemporaryDirectory(dir=self.record_path.parent) as scratch:
            dest = os.path.join(scratch, h.assignment)
            try:
                if not h.own:
                    raise PermissionError("not a folder of the student's own")
                when, _ = collected.collect(
                    fd,
                    h.name,
                    dest,
                    pwd.getpwnam(h.student).pw_uid,
                    ignore=tuple(self.cd.ignore),
                    include=tuple(self.cd.include),
                    release=self.cd.format_path(self.cd.release_directory, ".", h.assignment),
                )
            except (KeyError, OSError) as error:  # as collect refuses it: logged, never graded
                log.error("Not graded: %r is no folder of %s's own (%s)", h.name, h.student, type(error).__name__)
                self._settle(h.name, {**entry, "outcome": "refused"})
                return False
            if time.time() - when.timestamp() < QUIET_S:
                return False  # still being written: taken again at a later poll
            if attempt > self.attempts:
                self._page(Path(dest), "over_limit", h.assignment, attempt=attempt, limit=self.attempts)
                self._settle(h.name, {**entry, "attempt": attempt, "outcome": "over_limit"})
                return False
            submitted = submission_dir(self.cd, h.assignment, h.student)
            replace_folder(Path(dest), submitted)
        self.busy[(h.student, h.assignment)] = (h.name, fingerprint(submitted))
        self._settle(h.name, {**entry, "attempt": attempt, "outcome": "queued"})
        return True

    def _finish(self) -> int:
        from rq.exceptions import NoSuchJobError
        from rq.job import Job, JobStatus

        from autograder.taskqueue.jobs import connect, job_id
        from autograder.taskqueue.unit import published
        from autograder.taskqueue.writer import apply

        done = 0
        for (student, assignment), (name, fp) in list(self.busy.items()):
            if published(self.cd, assignment, student, fp) is not None:
                seen = time.time()  # the times say where a hand-in's wait went (bench_feedback_latency.py)
                results = apply(self.config, assignment, student, fp)
                applied = time.time()
                made = self.api.generate_feedback(assignment, student)
                released = self.api.release_feedback(assignment, student) if made["success"] else made
                if not released["success"]:
                    log.error("feedback of %r: %s", name, released.get("error") or released.get("log"))
                outcome = {
                    "outcome": "graded" if released["success"] else "failed",
                    "score": sum(r.score for r in results),
                    "published": seen,
                    "applied": applied,
                    "released": time.time(),
                }
            else:
                self.redis = self.redis or connect(self.url)  # one connection: a rush polls every unit in flight
                try:
                    status = Job.fetch(
                        job_id(self.cd.course_id, str(self.root), assignment, student, fp), connection=self.redis
                    ).get_status()
                except NoSuchJobError:
                    status = None
                if status not in (None, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED):
                    continue
                self._page(submission_dir(self.cd, assignment, student), "failed", assignment)
                outcome = {"outcome": "failed", "released": time.time()}
            self._settle(name, {**self.record[name], **outcome})
            del self.busy[(student, assignment)]
            done += 1
        return done

    def _page(self, folder: Path, key: str, assignment: str, **values) -> None:
        """``PAGES[key]`` released as the feedback of each notebook of the hand-in in ``folder``."""
        from nbgrader.utils import notebook_hash

        secret = folder / "submission_secret.txt"
        if not secret.is_file():
            return
        text = html.escape(PAGES[key].format(assignment=assignment, **values))
        page = f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body><p>{text}</p></body></html>\n'
        self.outbound.mkdir(mode=0o755, parents=True, exist_ok=True)
        for notebook in folder.glob("*.ipynb"):
            name = notebook_hash(secret=secret.read_text()[:1000], notebook_id=notebook.stem)
            tmp = self.outbound / f".{name}.tmp"
            tmp.write_text(page)
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.outbound / f"{name}.html")

    def _settle(self, name: str, entry: dict) -> None:
        self.record[name] = entry
        tmp = self.record_path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.record, indent=1, sort_keys=True))
        os.replace(tmp, self.record_path)


def draw_ahead(assignments: set[str], jobs: int = 1) -> subprocess.Popen:
    """The roster's graded inputs of ``assignments`` drawn before they hand in (``judge/ahead.py``:
    the gradebook's students and the hub's students group), in the background, at a low priority, in
    ``jobs`` processes (as many as the queue's workers, idle until the hand-ins come)."""
    group = os.environ.get(STUDENTS_GROUP)
    return subprocess.Popen(
        [sys.executable, "-m", "autograder.judge.ahead", *sorted(assignments), "--nice", "10", "--jobs", str(jobs)]
        + (["--group", group] if group else []),
        start_new_session=True,
    )


def main(argv: list[str] | None = None) -> int:
    from autograder.taskqueue.jobs import DEFAULT_URL

    parser = argparse.ArgumentParser(prog="python -m autograder.ontime", description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", default=os.environ.get("ENCDEC_REDIS_URL", DEFAULT_URL))
    parser.add_argument("--workers", type=int, default=0, help="simple queue workers to start beside it")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between looks at the inbound folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    wanted = {a.strip() for a in os.environ.get(ASSIGNMENTS, "").split(",") if a.strip()}
    if not wanted:
        log.info("no assignment is graded at submission (%s is empty)", ASSIGNMENTS)
    service = Service(Path.cwd(), args.redis, wanted, int(os.environ.get(ATTEMPTS) or DEFAULT_ATTEMPTS))
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "autograder.taskqueue",
                "--redis",
                args.redis,
                "worker",
                "--simple",
                "--name",
                f"ontime-{os.getpid()}-{i}",
            ],
            start_new_session=True,
        )
        for i in range(args.workers)
    ]
    ahead, ahead_at = None, 0.0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while wanted:
            if any(w.poll() is not None for w in workers):  # the hub starts the service (and them) again
                raise SystemExit("autograder.ontime: a queue worker stopped (its log is above)")
            if (ahead is None or ahead.poll() is not None) and time.monotonic() >= ahead_at:
                ahead, ahead_at = draw_ahead(wanted, max(1, args.workers)), time.monotonic() + AHEAD_EVERY_S
            if not service.step():
                time.sleep(args.poll)
        return 0
    finally:
        if ahead is not None and ahead.poll() is None:
            os.killpg(ahead.pid, signal.SIGTERM)
        for w in workers:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGTERM)
        for w in workers:
            w.wait(30)


if __name__ == "__main__":
    sys.exit(main())
