"""A student's name in the gradebook, from the Linux account of the same id.

On a hub each student is an account, and nbgrader creates a student at autograde with no name,
which the formgrader lists as "None, None". Here the name is the account's full name (the first
field of its GECOS, what ``useradd -c`` or ``chfn -f`` set), split at its last space into first
and last name. Only students already in the gradebook get a name, and only where it holds none (a
roster the instructor imported with ``nbgrader db student import`` is kept): nothing here creates
a student, so no export gains a row.

A name is text the formgrader writes into its pages unescaped, a spreadsheet may read a leading
``-``, ``+``, ``=`` or ``@`` in an export as a formula, and a user may be allowed to change their
own full name (``chfn``). So a full name is taken only when it starts with a letter and every
character is a letter, a combining mark, a space, a hyphen, a period or an apostrophe, within 128
characters (the gradebook's column); any other leaves the student without a name.
"""

from __future__ import annotations

import pwd
import unicodedata

from nbgrader.preprocessors import NbGraderPreprocessor

MAX_CHARS = 128  # nbgrader's Student.first_name and last_name: String(128)
_PUNCTUATION = frozenset(" -.'\u2019")


def plain(name: str) -> bool:
    """Whether ``name`` starts with a letter and holds only letters, marks, spaces, hyphens, periods and apostrophes."""
    return (
        0 < len(name) <= MAX_CHARS
        and unicodedata.category(name[0])[0] == "L"
        and all(unicodedata.category(ch)[0] in "LM" or ch in _PUNCTUATION for ch in name)
    )


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


def fill(gb, student_ids) -> None:
    """Give each of ``student_ids`` that the open gradebook ``gb`` holds without a name its account's name."""
    from nbgrader.api import MissingEntry

    for student_id in student_ids:
        try:
            student = gb.find_student(student_id)
        except MissingEntry:  # never created here
            continue
        names = None if student.first_name or student.last_name else account_name(student_id)
        if names:
            gb.update_or_create_student(student_id, first_name=names[0], last_name=names[1])


class NameStudent(NbGraderPreprocessor):
    """A step of autograde: the student whose notebook is graded gets their account's name where
    the gradebook holds them without one (``fill``)."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        info = resources.get("nbgrader", {})
        if info.get("student") and info.get("db_url"):
            with Gradebook(info["db_url"]) as gb:
                fill(gb, [info["student"]])
        return nb, resources
