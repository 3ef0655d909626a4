"""Grade a whole batch of submissions in parallel, in the sandbox, resumably, on one host.

    python -m autograder.driver <assignment> [<assignment> ...] [--workers N] [--timeout S] [--force]

Run it from the repository root (it reads `nbgrader_config.py` there, like `nbgrader`). Every
student with a submission in the configured submitted folder is one task of the grading unit
(`autograder.taskqueue.unit`: stock nbgrader's `Autograde` with the course's preprocessors, so the
sandbox and the trusted verdict apply, into a private folder and a throwaway gradebook; one
notebook per conversion, so a notebook that cannot be graded costs only itself). The same unit
runs on a job queue across hosts (`python -m autograder.taskqueue`).

Design:
- A maintained pool (pebble's `ProcessPool`, spawn): N workers started once (the imports and the
  sandbox's fork server are paid once per worker), a wall-clock budget per task (a worker that
  overruns it is killed and replaced; its task is reported as killed), a dead worker replaced.
- One writer: the parent applies each published result to the gradebook, SQLite or PostgreSQL,
  through nbgrader's public API (`autograder.taskqueue.writer`); workers never open it, and no
  nbgrader internal is replaced.
- Resumable and idempotent: what was applied is recorded with the submission's fingerprint
  (written atomically after the gradebook commit); a re-run skips an unchanged submission, applies
  a result that was published but not applied, and grades the rest; `--force` regrades.
- Workers die with the parent (PR_SET_PDEATHSIG), their kernels die with them.

One module per part: `pool.py` (the workers), `batch.py` (the parent: `run`), `cli.py`.
Exit status: 0 when every notebook was graded (or is missing), 1 when some failed.
"""

from autograder.taskqueue.writer import Result, summary

from .batch import run
from .cli import main

__all__ = ["Result", "main", "run", "summary"]
