"""Private by default: what the course keeps back from students is unreadable by other users of
the machine, and grading refuses to start when it is not.

On a shared JupyterHub every student is a Linux user of the machine that holds the instructor's
checkout. The reference solutions and hidden tests (``solutions/``) and the grading state (the
gradebook, the course secret that seeds every student's hidden inputs, collected submissions,
autograded notebooks and feedback: ``autograder/state.py``) must be out of their reach. The set-up
(``make venv``) takes the bits of other users off ``solutions/``; the grading state is created
0700 (one made open by an earlier version is closed when it is the user's own: ``make_private``,
when nbgrader loads the configuration); and the execution step checks both before it starts a
kernel (``refuse_open``), so no notebook is graded while either is open, whichever command grades.

"Other users" are those that are neither the owner nor in the folder's group: a course may share
its folders with a group of teaching assistants (mode 0750); on Debian every user has a group of
their own. A folder is open when others have any bit on it and can reach it (every folder above
it lets them pass); a folder under a private one (a home of mode 0700) is private.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def open_to_others(path: Path) -> str | None:
    """Why other users can reach ``path`` (its mode gives them bits and every folder above it lets
    them pass), or None when it is private or absent."""
    path = Path(path)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None
    if not mode & 0o007:
        return None
    for folder in path.resolve().parents:
        if not folder.stat().st_mode & stat.S_IXOTH:
            return None  # others cannot pass this folder
    return f"{path} is open to other users (mode {mode:o}): run `chmod -R o-rwx {path}`"


def make_private(folder: Path) -> Path:
    """``folder`` created 0700; an existing one of this user's (a grading state made before it was
    private) closed to other users. One of another user's is left as it is: ``refuse_open``
    refuses to grade while it is open."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        st = folder.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o007:
            folder.chmod(stat.S_IMODE(st.st_mode) & ~0o007)
    return folder


class GradingStateOpen(Exception):
    """Grading refused: what the course keeps back is open to other users (the message says which
    folder and the command that closes it)."""


def refuse_open(folders: list[str]) -> None:
    """Raise ``GradingStateOpen`` while one of ``folders`` (the grading state and ``solutions/``:
    ``SandboxedExecute.private_folders``) is open to other users: checked by the execution step
    before it starts a kernel (``autograder/sandbox/execute.py``), so every way of grading
    (``nbgrader autograde``, the formgrader's button, the driver, the queue) refuses, and every
    other command runs."""
    reasons = [r for r in map(open_to_others, folders) if r]
    if reasons:
        raise GradingStateOpen(f"grading refused: {reasons[0]}")
