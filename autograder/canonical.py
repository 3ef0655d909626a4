"""The course's own small schema of a notebook handed in: the parsed JSON of the file becomes one
canonical notebook, built fresh with ``nbformat.v4.new_*`` from the fields this schema checks, so
it always validates and nothing of the student's JSON reaches nbgrader or nbconvert unchecked.

What a notebook is, here (nbformat 4, or 3's worksheets):

- cells: a list; a cell is a dict with ``cell_type`` code, markdown or raw (3's ``heading`` becomes
  markdown), its ``source`` a str or a list of str (3's code ``input``);
- a cell's ``id``: nbformat 4.5's (1 to 64 of ``A-Za-z0-9-_``), unique; else a fresh one;
- a cell's metadata: only its nbgrader part is kept, typed: ``grade_id`` a str of at most
  ``GRADE_ID_CHARS``, the flags bools, ``points`` a finite number, ``schema_version`` an int,
  ``checksum`` and ``cell_type`` short strs; every str Unicode text (no lone surrogate); a part
  without a usable ``grade_id`` is dropped (an ordinary cell);
- outputs, execution counts, attachments and every other key: dropped (``ClearOutput``, in the
  course's autograde pipeline, clears the outputs before grading anyway);
- the notebook's metadata: the language of its release (``encdec.language``) only.

A field of the wrong type is dropped or replaced and recorded, one record per field: ``untyped``
(the field, how many cells, the first one's position). A missing id, outputs, unknown keys are not
recorded: honest tools write them so.
"""

from __future__ import annotations

import math
import re

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

from autograder.repairs import record
from encdec.grading.language import LANGUAGES

NEW = {"code": new_code_cell, "markdown": new_markdown_cell, "raw": new_raw_cell}
CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # nbformat 4.5's cell id
GRADE_ID_CHARS = 64  # the releases' longest grade id has 21
FLAGS = ("grade", "solution", "locked", "task")
SHORT = 64  # a checksum (nbgrader's: 32 hex digits), a cell type


class Refused(ValueError):
    """A notebook handed in that is not graded: the repair's key and parameters (``repairs.py``)."""

    def __init__(self, key: str, **params) -> None:
        super().__init__(key)
        self.key, self.params = key, params


def canonical(raw, max_cells: int):
    """The notebook ``raw`` (a file's parsed JSON) stands for, built from its checked fields, with
    the ``untyped`` records. ``Refused``: no notebook (no list of cells), or more than ``max_cells``
    cells (counted, none built)."""
    cells = raw.get("cells") if isinstance(raw, dict) else None
    if not isinstance(cells, list) and isinstance(raw, dict) and isinstance(raw.get("worksheets"), list):
        # nbformat 3: the cells of its worksheets
        cells = [
            c for w in raw["worksheets"] if isinstance(w, dict) and isinstance(w.get("cells"), list) for c in w["cells"]
        ]
    if not isinstance(cells, list):
        raise Refused("unreadable", error="no cells")
    if len(cells) > max_cells:
        raise Refused("too_many_cells", cells=len(cells), limit=max_cells)
    untyped: dict[str, list[int]] = {}  # field -> [cells, the first one's position]

    def note(field: str, at: int) -> None:
        untyped.setdefault(field, [0, at])[0] += 1

    kept = [(at, made) for at, cell in enumerate(cells, 1) if (made := _cell(cell, lambda f, at=at: note(f, at)))]
    _ids(kept, cells, note)
    nb = new_notebook(cells=[made for _, made in kept], metadata=_notebook_metadata(raw.get("metadata")))
    for field, (count, first) in untyped.items():
        record(nb, "untyped", field=field, cells=count, cell=first)
    return nb


def _cell(cell, note):
    """One cell, typed (None: not a cell this schema keeps)."""
    if not isinstance(cell, dict):
        note("cell")
        return None
    kind = cell.get("cell_type")
    source = cell.get("source")
    if kind == "heading":  # nbformat 3
        level = cell.get("level")
        kind, prefix = "markdown", "#" * (level if isinstance(level, int) and 1 <= level <= 6 else 1) + " "
    else:
        prefix = ""
        if kind == "code" and "source" not in cell:
            source = cell.get("input")  # nbformat 3
    if not isinstance(kind, str) or kind not in NEW:
        note("cell_type")
        return None
    text = _text(source)
    if text is None:
        note("source")
        text = ""
    meta = cell.get("metadata", {})
    if not isinstance(meta, dict):
        note("metadata")
        meta = {}
    grading = _nbgrader(meta["nbgrader"], note) if "nbgrader" in meta else None
    return NEW[kind](prefix + text, metadata=nbformat.from_dict({"nbgrader": grading} if grading else {}))


def _text(source) -> str | None:
    """A source: a str, or a list of str joined; None when it is neither or is no Unicode text (a lone
    surrogate, which JSON's escapes allow and UTF-8 cannot write)."""
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        source = "".join(source)
    return source if isinstance(source, str) and _utf8(source) else None


def _utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _nbgrader(meta, note) -> dict | None:
    """A cell's nbgrader metadata, typed; None without a usable grade id (an ordinary cell)."""
    if not isinstance(meta, dict):
        note("nbgrader")
        return None
    gid = meta.get("grade_id")
    if not (isinstance(gid, str) and 0 < len(gid) <= GRADE_ID_CHARS and _utf8(gid)):
        if gid is not None:
            note("nbgrader.grade_id")
        return None
    typed = {"grade_id": gid}
    for key, value in meta.items():
        if key in FLAGS:
            ok = isinstance(value, bool)
        elif key == "points":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        elif key == "schema_version":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif key in ("checksum", "cell_type"):
            ok = isinstance(value, str) and len(value) <= SHORT and _utf8(value)
        else:
            continue  # a key nbgrader's schema does not have
        if ok:
            typed[key] = value
        else:
            note(f"nbgrader.{key}")
    return typed


def _ids(kept: list, cells: list, note) -> None:
    """Each kept cell its own id, unique in the notebook: the file's where it is nbformat's, else fresh."""
    taken: set[str] = set()
    fresh = []
    for at, made in kept:
        given = cells[at - 1].get("id")
        if isinstance(given, str) and CELL_ID.fullmatch(given) and given not in taken:
            made.id = given
            taken.add(given)
        else:
            if given is not None and not (isinstance(given, str) and CELL_ID.fullmatch(given)):
                note("id", at)
            fresh.append(made)
    n = 0
    for made in fresh:
        while f"cell-{n}" in taken:
            n += 1
        made.id = f"cell-{n}"
        taken.add(made.id)


def _notebook_metadata(meta) -> dict:
    encdec = meta.get("encdec") if isinstance(meta, dict) else None
    lang = encdec.get("language") if isinstance(encdec, dict) else None
    out = {"language_info": {"name": "python"}}
    if isinstance(lang, str) and lang in LANGUAGES:
        out["encdec"] = {"language": lang}
    return nbformat.from_dict(out)
