"""``TrustedGrading``: the grader's own settings (``c.TrustedGrading.*`` in ``nbgrader_config.py``)."""

from __future__ import annotations

from traitlets import Unicode
from traitlets.config import LoggingConfigurable

from autograder.state import grading_state


class TrustedGrading(LoggingConfigurable):
    """Where the course secret lives: outside the sandbox, never in the repository."""

    secret_file = Unicode(
        str(grading_state().secret),
        help="File holding the course secret that seeds the graded runs' inputs (made on first use). "
        "Keep it to regrade reproducibly; it must not be readable by students.",
    ).tag(config=True)
