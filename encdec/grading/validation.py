"""``nbgrader validate`` (the student's "does my notebook pass?") reports a test cell that is no
longer there: deleted, or turned into markdown or raw so that it is no test any more.

nbgrader's own validator checks the checksums of the test cells that are present, and a cell
whose type changed while it kept its metadata, but a deleted test cell leaves nothing to check:
the notebook then "passes all the tests" while the grader puts the cell back and scores it 0. So
the release records its test cells in the notebook's metadata (``encdec.test_cells``: grade id,
points, cell type; ``autograder/preprocessors/record_test_cells.py``), and validation compares
with it before the notebook runs: each missing one becomes a failing test cell in its place, so
the report lists it among the failed cells with what to do. This goes through nbclient's
documented ``on_notebook_start`` hook of nbgrader's ``Execute``, set for validation only
(``configure``; ``nbgrader_config.py`` of the course and of each exercise folder). A duplicated
test cell (the same grade id twice) is nbgrader's own: it stops with "Duplicate grade id".
Plain text only: no answer here.
"""

from __future__ import annotations

import json

from . import language

KEY = "test_cells"  # under the notebook's ``encdec`` metadata
WIDTH = 80  # nbgrader validate cuts longer lines of a failed cell's code and error


def record(cells) -> list[dict]:
    """The manifest of a notebook's test cells (nbgrader grade cells), in order."""
    out = []
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            out.append(
                {
                    "grade_id": meta["grade_id"],
                    "points": meta.get("points", 0),
                    "cell_type": meta.get("cell_type", cell.get("cell_type")),
                }
            )
    return out


def missing(nb) -> list[tuple[int, dict]]:
    """The recorded test cells the notebook no longer has as test cells, each with the index of
    the cell it belongs before (after the last recorded one still present)."""
    meta = nb.get("metadata", {}).get("encdec", {})
    recorded = meta.get(KEY) if isinstance(meta, dict) else None
    if not isinstance(recorded, list):
        return []
    where = {}
    for i, cell in enumerate(nb.cells):
        g = cell.get("metadata", {}).get("nbgrader", {})
        if g.get("grade") and g.get("grade_id") and cell.get("cell_type") == g.get("cell_type", cell.get("cell_type")):
            where.setdefault(g["grade_id"], i)
    out, at = [], 0
    for entry in recorded:
        if not isinstance(entry, dict) or "grade_id" not in entry:
            continue
        if entry["grade_id"] in where:
            at = where[entry["grade_id"]] + 1
        else:
            out.append((at, entry))
    return out


def failing_cell(grade_id: str, points: float, text: str) -> dict:
    """A failing test cell the report lists (its grade id is no other cell's): its code raises
    ``text``, wrapped to fit the report's lines."""
    lines = [line.strip() for line in language.fill(text, WIDTH - 12).splitlines()]
    source = (
        "raise AssertionError(\n"
        + "".join(f"    {json.dumps(line + chr(10), ensure_ascii=False)}\n" for line in lines)
        + ")"
    )
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": grade_id.replace("__", "-"),
        "outputs": [],
        "source": source,
        "metadata": {
            "nbgrader": {
                "grade": True,
                "grade_id": grade_id,
                "locked": True,
                "points": points,
                "solution": False,
                "task": False,
                "schema_version": 3,
            }
        },
    }


def missing_cell(entry: dict) -> dict:
    """The failing cell that stands for a missing test cell, in its place."""
    return failing_cell(
        f"{entry['grade_id']}__missing",
        entry.get("points", 0),
        language.text("validate_missing", grade_id=entry["grade_id"], points=entry.get("points", 0)),
    )


def undefined_before(nb) -> list[tuple[int, str]]:
    """Each object a test cell hands to its check that no code cell defines any more (its solution
    cell is missing), with the index of the first test cell that needs it."""
    from .cells import undefined

    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    out, seen = [], set()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
            name = undefined(sources, cell.source)
            if name and name not in seen:
                seen.add(name)
                out.append((i, name))
    return out


def report_missing(notebook, **_) -> None:
    """nbclient's ``on_notebook_start`` hook: put a failing test cell where each recorded test cell
    is missing, and before the first test cell whose object no cell defines any more (its solution
    cell is missing), worded in the notebook's language, before the notebook runs."""
    import nbformat

    meta = notebook.get("metadata", {}).get("encdec", {})
    lang = meta.get("language") if isinstance(meta, dict) else None
    with language.speaking(lang):
        inserts = [(at, missing_cell(entry)) for at, entry in missing(notebook)]
        inserts += [
            (at, failing_cell(f"{name}__not_defined", 0, language.text("validate_not_defined", name=name)))
            for at, name in undefined_before(notebook)
        ]
        for at, cell in sorted(inserts, key=lambda x: x[0], reverse=True):  # from the end: indices hold
            notebook.cells.insert(at, nbformat.from_dict(cell))


def configure(c) -> None:
    """Set validation's hook in an nbgrader config ``c`` (validation only: autograde's execution is
    another parent's)."""
    c.Validator.Execute.on_notebook_start = report_missing


# The exercise folder's own nbgrader config (written by autograder/make_references.py next to each
# source notebook; nbgrader copies it into the release): `nbgrader validate` run in that folder reads it.
FOLDER_CONFIG = """\
# nbgrader validate, run in this folder, also reports a test cell that was deleted or turned into
# another kind of cell (encdec/grading/validation.py). Generated: autograder/make_references.py.
try:
    from encdec.grading.validation import configure
except ImportError:  # the course package is not installed here: nbgrader's own validation only
    pass
else:
    configure(get_config())  # noqa: F821 (provided by traitlets when nbgrader loads this file)
"""
