"""A student's name in the gradebook, from the Linux account of the same id.

On a hub each student is an account, and nbgrader creates a student at autograde with no name,
which the formgrader lists as "None, None". Here the name is the account's full name (the first
field of its GECOS, what ``useradd -c`` or ``chfn -f`` set), split at its last space into first
and last name. A name already in the gradebook (a roster the instructor imported with ``nbgrader
db student import``) is kept, and an id that is no account gets no name.

A name is text the formgrader writes into its pages unescaped (its formgrade template), and a
user may be allowed to change their own full name (``chfn``, ``CHFN_RESTRICT`` in
``/etc/login.defs``). So a full name is taken only when every character is a letter, a combining
mark, a space, a hyphen, a period or an apostrophe, and it has at most 128 characters (the
gradebook's column); any other is left out and the student keeps no name.
"""

from __future__ import annotations

import pwd
import unicodedata

MAX_CHARS = 128  # nbgrader's Student.first_name and last_name: String(128)
_PUNCTUATION = frozenset(" -.'\u2019")


def plain(name: str) -> bool:
    """Whether ``name`` holds only letters, marks, spaces, hyphens, periods and apostrophes."""
    return 0 < len(name) <= MAX_CHARS and all(
        unicodedata.category(ch)[0] in "LM" or ch in _PUNCTUATION for ch in name)


def account_name(student_id: str) -> tuple[str, str] | None:
    """(first name, last name) of the account ``student_id``, or None: no such account, no full
    name, or one that is not plain. A single word is a last name."""
    try:
        full = pwd.getpwnam(student_id).pw_gecos.split(",", 1)[0]
    except (KeyError, ValueError):  # no such account; a NUL in the id
        return None
    full = " ".join(word for word in full.split(" ") if word)  # runs of spaces are one
    if not plain(full):
        return None
    first, _, last = full.rpartition(" ")
    return first, last


def fill(gb, student_id: str) -> None:
    """Create the student in the open gradebook ``gb`` if absent, and give them their account's
    name when the gradebook holds none."""
    student = gb.update_or_create_student(student_id)
    if student.first_name or student.last_name:
        return
    names = account_name(student_id)
    if names:
        gb.update_or_create_student(student_id, first_name=names[0], last_name=names[1])


def names_hook(course, then=None):
    """An ``Autograde.pre_convert_hook`` that fills the student's name before nbgrader grades the
    submission (nbgrader's own step creates the student with none), after ``then``, the hook it
    wraps. ``course``: the configuration's ``CourseDirectory`` section, read at each call (a local
    configuration read after this line may still set the gradebook and the course id)."""
    def hook(assignment: str, student: str, notebooks: list[str]) -> None:
        try:
            if then is not None:
                then(assignment=assignment, student=student, notebooks=notebooks)
        finally:
            from nbgrader.api import Gradebook

            with Gradebook(course.db_url, course.course_id) as gb:
                fill(gb, student)
    return hook
