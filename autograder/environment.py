"""The grader process's environment, prepared by the root nbgrader_config.py (`prepare(c, grading_root)`)."""

import os
import sys
from pathlib import Path

from autograder.privacy import make_private

SQLITE = "sqlite:///"  # then the database's path


def prepare(c, grading_root: Path) -> None:
    """What nbgrader needs around the configuration `c`, whether or not the venv is activated.

    - the grading state `grading_root` created 0700, or closed if an earlier version left it open
      (`autograder/privacy.py`), before anything below is made inside it;
    - the interpreter's own bin folder first on PATH: nbgrader runs `alembic` from PATH when it
      creates a gradebook, and the venv's must be found without activating it;
    - one OMP thread unless told otherwise: the models are tiny, one thread is fastest, and
      parallel graders do not oversubscribe the CPUs;
    - the folders of the SQLite gradebook (`c.CourseDirectory.db_url`) and of the exporters'
      files (`c.ExportPlugin.to`, `c.CsvExportPlugin.to`), which nbgrader does not create;
    - the runs a killed grader left marked put back (`autograder/keep.py`), before any command
      reads or regrades them.
    """
    make_private(grading_root)
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + path
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    files = [section.get("to") for section in (c.ExportPlugin, c.CsvExportPlugin)]
    db_url = c.CourseDirectory.get("db_url")
    if isinstance(db_url, str) and db_url.startswith(SQLITE):
        files.append(db_url[len(SQLITE) :])
    for file in files:
        if isinstance(file, str) and file:
            Path(file).parent.mkdir(parents=True, exist_ok=True)
    from autograder.keep import restore_unfinished

    restore_unfinished(grading_root)
