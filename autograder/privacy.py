"""Private by default: what the course keeps back from students is unreadable by other users of
the machine, and grading refuses to start when it is not.

On a shared JupyterHub every student is a Linux user of the machine that holds the instructor's
checkout. The reference solutions and hidden tests (``solutions/``) and the grading state (the
gradebook, the course secret that seeds every student's hidden inputs, collected submissions,
autograded notebooks and feedback: ``autograder/state.py``) must be out of their reach. The set-up
(``make venv``) takes the bits of other users off ``solutions/``; the grading state is created
0700 (one made open by an earlier version is closed when it is the user's own); and every nbgrader command of the course checks both when it loads the configuration
(``private_grading``): ``nbgrader autograde`` stops with one line, other commands warn and an
autograde started from them (the formgrader's button) fails, as when the sandbox is missing.

"Other users" are those that are neither the owner nor in the folder's group: a course may share
its folders with a group of teaching assistants (mode 0750); on Debian every user has a group of
their own. A folder is open when others have any bit on it and can reach it (every folder above
it lets them pass); a folder under a private one (a home of mode 0700) is private.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

UNAVAILABLE = "autograder.privacy.GRADING_STATE_OPEN_TO_OTHERS"  # an execution step that cannot be imported


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
    private) closed to other users. One of another user's is left as it is: ``private_grading``
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


def private_grading(c, grading_root: Path, solutions: Path, autograding: bool | None = None) -> None:
    """Create the grading state 0700 and check it and ``solutions`` (see the module docstring)."""
    if autograding is None:
        autograding = len(sys.argv) > 1 and sys.argv[1] == "autograde"
    make_private(grading_root)
    reasons = [r for r in (open_to_others(grading_root), open_to_others(solutions)) if r]
    if not reasons:
        return
    if autograding:
        raise SystemExit(f"nbgrader autograde: {reasons[0]}")
    print(f"warning: {reasons[0]}; autograding will refuse to run", file=sys.stderr)
    steps = c.Autograde.get("autograde_preprocessors")
    if isinstance(steps, list):
        c.Autograde.autograde_preprocessors = [UNAVAILABLE if "Execute" in str(p) else p for p in steps]
