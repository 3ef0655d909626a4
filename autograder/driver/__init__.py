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

One module per part: `gradebook.py` (the configuration, the gradebook lock, pooled engines),
`tasks.py` (what to grade, what was graded, the resumable state), `worker.py` (a worker process),
`batch.py` (the parent: `run`, `summary`), `cli.py` (the command line).

Exit status: 0 when every notebook was graded (or is missing), 1 when some failed.
"""
from .batch import run, summary
from .cli import main
from .gradebook import (STATE_DIR, coursedir_for, install_gradebook_lock, load_config, lock_path_for,
                        reuse_gradebook_engines)
from .tasks import Result, State, Task, fingerprint, plan, previous_results, record_missing
from .worker import grade_notebook, worker_main

__all__ = ["STATE_DIR", "Result", "State", "Task", "coursedir_for", "fingerprint", "grade_notebook",
           "install_gradebook_lock", "load_config", "lock_path_for", "main", "plan", "previous_results",
           "record_missing", "reuse_gradebook_engines", "run", "summary", "worker_main"]
