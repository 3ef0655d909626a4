"""The flags' records in the gradebook, and the instructor's review list.

A flag is a row of the course's own table in nbgrader's gradebook database (``encdec_flag``: the
submission's student, assignment and notebook, the cell, the rule family's key and what the cell
used), beside nbgrader's tables and never in them: no comment carries it, so no page made from a
comment can show it. ``FlagIntegrity`` is its one writer (in the queue, the gradebook's single
writer replays it); the review list words it, last, from the message table."""

from __future__ import annotations

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy import Column, Integer, MetaData, String, Table, Text, delete, insert, inspect, select

from autograder import ROOT
from encdec.grading import language

from .scan import Flag

FIELDS = ["assignment", "student", "notebook", "reasons", "needs_manual_grade"]
COLUMNS = ("student", "assignment", "notebook", "cell", "key", "found")
TABLE = Table(
    "encdec_flag",
    MetaData(),
    Column("id", Integer, primary_key=True),
    *(Column(name, String(128)) for name in COLUMNS[:3]),
    Column("cell", Text),
    Column("key", String(32)),
    Column("found", Text),
)


def rows(gb: Gradebook, student: str | None = None, assignment: str | None = None) -> list[dict]:
    """The flag records of a gradebook (of one student's assignment where given), in order."""
    if not inspect(gb.db.connection()).has_table(TABLE.name):
        return []
    query = select(*(TABLE.c[name] for name in COLUMNS)).order_by(TABLE.c.id)
    if student is not None:
        query = query.where(TABLE.c.student == student, TABLE.c.assignment == assignment)
    return [dict(row._mapping) for row in gb.db.execute(query)]


def put(gb: Gradebook, student: str, assignment: str, records: list[dict], notebook: str | None = None) -> None:
    """The flag records of a student's assignment (of one notebook where given) are ``records``
    (the caller commits)."""
    TABLE.create(gb.db.connection(), checkfirst=True)
    where = [TABLE.c.student == student, TABLE.c.assignment == assignment]
    gb.db.execute(delete(TABLE).where(*where, *([TABLE.c.notebook == notebook] if notebook else [])))
    if records:
        gb.db.execute(insert(TABLE), [{name: r[name] for name in COLUMNS} for r in records])


def record(gb: Gradebook, ids: dict, flags: list[Flag]) -> None:
    """A notebook's flags replace what an earlier grading of it recorded (none: a clean regrade)."""
    student, assignment, notebook = ids["student"], ids["assignment"], ids["notebook"]
    made = [dict(student=student, assignment=assignment, notebook=notebook, **vars(f)) for f in flags]
    put(gb, student, assignment, made, notebook)


def flagged_submissions(db_url: str, lang: str = language.DEFAULT) -> list[dict]:
    """One row per flagged submitted notebook: assignment, student, notebook, reasons (worded in
    ``lang``), and whether it still needs manual grading (False once an instructor has scored every
    flagged cell). A submission the gradebook no longer has is not listed."""
    out: dict[tuple[str, str, str], dict] = {}
    with Gradebook(db_url) as gb, language.speaking(lang):
        for r in rows(gb):
            key = (r["assignment"], r["student"], r["notebook"])
            if key not in out:
                try:
                    sub = gb.find_submission_notebook(r["notebook"], r["assignment"], r["student"])
                except MissingEntry:
                    continue
                out[key] = dict(zip(FIELDS, key), reasons=[], needs_manual_grade=bool(sub.needs_manual_grade))
            out[key]["reasons"].append(f"{r['cell']}: {Flag(r['cell'], r['key'], r['found']).reason}")
    for row in out.values():
        row["reasons"] = "; ".join(row["reasons"])
    return [out[key] for key in sorted(out)]


def course_db_url() -> str:
    """The gradebook URL of the course configuration, read the way nbgrader reads it."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    return CourseDirectory(config=config).db_url
