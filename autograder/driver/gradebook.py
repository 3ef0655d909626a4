"""The course configuration and the one gradebook every process of a batch shares: an exclusive
file lock around each gradebook session, one pooled engine per gradebook (SQLite in WAL mode)."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

STATE_DIR = ".driver"  # under the autograded folder; nbgrader's student globs skip dot-folders


def load_config(root: Path):
    """The course's nbgrader configuration, as `nbgrader` run from `root` would load it."""
    from traitlets.config.loader import PyFileConfigLoader

    if not (root / "nbgrader_config.py").is_file():
        raise SystemExit(f"no nbgrader_config.py in {root}: run the driver from the repository root")
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
