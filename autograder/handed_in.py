"""What a student handed in, read whatever its shape: every notebook of a submission becomes one
canonical notebook in bounded time and memory before nbgrader or nbconvert sees it, and is graded,
with its score or with 0 and a reason; nothing handed in is changed.

The reader (``read_handed_in``, limits in ``Intake``): the file opened without following a link,
only if it is a regular file of at most ``notebook_bytes``; its JSON items counted before it is
parsed (``json_items``: strings, brackets, commas), so the parse, done once and within the
interpreter's recursion limit, makes at most a known number of objects; then the course's own small schema
(``autograder/canonical.py``) builds the canonical notebook fresh from the checked fields: outputs
dropped (nbgrader clears them before grading), ids and metadata typed. nbformat never validates
the student's JSON (on 30,000 invalid outputs its validation took 1.7 GB and 24 s). Counted on what
is graded: at most ``cells`` cells and ``source_bytes`` of sources. A file refused is graded as the
release with no answers, the reason recorded (``too_large``, ``too_many_values``, ``too_deep``,
``too_many_cells``, ``source_too_large``, ``unreadable``).

Through two documented extension points of nbgrader's converters (``nbgrader_config.py``):

- ``renamed`` (``renamed_hook`` for the course's ``solutions/``), ``Autograde.pre_convert_hook``: every release notebook is graded, handed in
  or not (one missing is graded as the release with no answers, record ``not_handed_in``); where
  the folder lacks a release notebook, the files handed in under other names (a browser's ``warmup (1).ipynb``, Jupyter's
  ``warmup-Copy1.ipynb``) that carry its locked cells (nbgrader's checksums) stand for it
  (``stands_for``): the release's name
  is added to the notebooks nbgrader grades. Of several, one is chosen: the one with the most
  answers (solution cells whose nbgrader checksum changed), on a tie the first by name;
- ``HandedInExporter``, ``Autograde.exporter_class``: reads each handed-in notebook (or the file
  chosen for it) through ``read_handed_in``; nbgrader's own sanitized file, in its second pass, as
  it is. Records: ``renamed``, ``copies`` (which file, among which), and the reader's.

Each record is stated at the top of the graded notebook and of the feedback, with what the
exchange's collect left behind of the submission (``autograder/collected.py``: ``left_behind_<key>``,
a link for instance). The files handed in stay as they are.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter
from nbgrader.utils import compute_checksum

from autograder import ROOT
from autograder.canonical import Refused, canonical
from autograder.collected import left_behind
from autograder.repairs import INTAKE_KEY, record, repairs


@dataclass(frozen=True)
class Intake:
    """What a notebook handed in may be, at most, to be read (past a limit it is graded as the release
    with no answers, the reason stated). The file's limits bound the reading; the others count what is
    graded (outputs are dropped first)."""

    notebook_bytes: int = 32_000_000  # the file; an honest notebook of 12 MB of printed outputs is graded
    json_items: int = 3_000_000  # strings, brackets and commas of its JSON: bounds the objects parsed
    cells: int = 1000  # cells of the notebook (the releases have 17 to 24)
    source_bytes: int = 2_000_000  # UTF-8 bytes of all cells' sources (the releases have 3 to 6 KB)
    copies: int = 4  # files under other names examined for a missing release notebook (by name order)


LIMITS = Intake()


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f}"


def _shown(path: Path) -> str:
    """A file's name as a record holds it: Unicode text (a name's undecodable bytes become '?')."""
    return path.name.encode("utf-8", "replace").decode()


def _bytes(path: Path, limits: Intake) -> bytes:
    """The file's bytes: a regular file (no link followed, nothing waited on) within the byte limit."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as error:
        raise Refused("unreadable", error=type(error).__name__) from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Refused("unreadable", error="not_a_file")
        if info.st_size > limits.notebook_bytes:
            raise Refused("too_large", size_mb=_mb(info.st_size), limit_mb=_mb(limits.notebook_bytes))
        data = f.read(limits.notebook_bytes + 1)  # a file that grew since fstat is cut here
    if len(data) > limits.notebook_bytes:
        raise Refused("too_large", size_mb=_mb(len(data)), limit_mb=_mb(limits.notebook_bytes))
    return data


def _parsed(data: bytes, limits: Intake):
    """The JSON of ``data``, parsed once, after its items were counted within the limit (each string,
    bracket and comma, strings' own included: an upper bound of the objects the parse makes). Its
    depth is the parser's: past the interpreter's recursion limit (1,000) it stops."""
    items = data.count(b'"') // 2 + data.count(b",") + data.count(b"[") + data.count(b"{")
    if items > limits.json_items:
        raise Refused("too_many_values", values=items, limit=limits.json_items)
    try:
        return json.loads(data.decode("utf-8-sig"))  # a byte order mark is allowed, as Windows tools write it
    except RecursionError:
        raise Refused("too_deep", limit=sys.getrecursionlimit()) from None
    except (UnicodeDecodeError, ValueError) as error:  # not UTF-8, not JSON, a 5,000-digit int
        raise Refused("unreadable", error=type(error).__name__) from None


def read_handed_in(path: Path, limits: Intake = LIMITS):
    """The canonical notebook of the file ``path`` (``autograder/canonical.py``), read within
    ``limits``; ``Refused`` (the repair's key and parameters) when it is not graded."""
    nb = canonical(_parsed(_bytes(path, limits), limits), limits.cells)
    size = sum(len(c.source.encode()) for c in nb.cells)
    if size > limits.source_bytes:
        raise Refused("source_too_large", size_mb=_mb(size), limit_mb=_mb(limits.source_bytes))
    return nb


def _checksum(cell) -> str | None:
    """nbgrader's checksum of a cell of a canonical notebook (None: a graded cell without points)."""
    meta = cell.metadata.get("nbgrader", {})
    return compute_checksum(cell) if meta and ("points" in meta or not meta.get("grade")) else None


def _locked(nb) -> frozenset[str]:
    """The checksums of a notebook's locked code cells (a copy of the release carries them unchanged)."""
    return frozenset(
        _checksum(c) for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("locked")
    )


def _answers(nb) -> int:
    """Solution cells whose source is not the release's (nbgrader's checksum of the cell changed)."""
    return sum(
        1
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution") and _checksum(c) != c.metadata.nbgrader.get("checksum")
    )


def stands_for(path: Path, expected: dict[str, frozenset[str]], limits: Intake = LIMITS) -> list[Path]:
    """The files handed in under other names that stand for the missing release notebook ``path``,
    the one to grade first (``[]``: none). ``expected``: each release notebook's name and the checksums
    of its locked code cells (``release_checksums``). A file stands for the release notebook whose
    locked cells it carries most (ties: the first by name) when that one is missing; where no file
    carries one (none could be read), the only file of the folder stands for the only missing
    notebook. Of several, the one with the most answers is chosen, on a tie the first by name."""
    folder = path.parent
    if os.path.lexists(path) or not folder.is_dir():
        return []
    missing = {s for s in expected if not os.path.lexists(folder / f"{s}.ipynb")}
    unknown = sorted(p for p in folder.glob("*.ipynb") if p.stem not in expected)[: limits.copies]
    found = []
    for order, candidate in enumerate(unknown):
        try:
            nb = read_handed_in(candidate, limits)
        except Refused:
            continue
        locked = _locked(nb)
        shared = {name: len(locked & checksums) for name, checksums in sorted(expected.items())}
        best = max(shared, key=shared.get) if shared else None
        if best == path.stem and shared[best] > 0:
            found.append((-_answers(nb), order, candidate))
    if found:
        return [candidate for *_, candidate in sorted(found)]
    return unknown if missing == {path.stem} and len(unknown) == 1 else []


def release_checksums(source: Path, assignment: str) -> dict[str, frozenset[str]]:
    """The assignment's notebooks (names without ``.ipynb``) and the checksums of their locked code
    cells, from its source folder (the instructor's notebooks: their visible locked cells are the
    release's)."""
    return {p.stem: _locked(nbformat.read(p, as_version=4)) for p in (source / assignment).glob("*.ipynb")}


def renamed_hook(source: Path):
    """``Autograde.pre_convert_hook``: a notebook handed in under other names is graded under the
    release's (``stands_for``). ``source``: the course's source folder (``solutions/``)."""

    def hook(assignment: str, student: str, notebooks: list[str]) -> None:
        for folder in sorted({Path(n).parent for n in notebooks}):
            expected = release_checksums(source, folder.name)
            for name in sorted(expected):
                path = folder / f"{name}.ipynb"
                if str(path) not in notebooks:  # renamed, or not handed in: graded either way (the exporter)
                    notebooks.append(str(path))  # the list nbgrader grades next (its own, given to the hook)

    return hook


# the course's own: ``c.Autograde.pre_convert_hook = "autograder.handed_in.renamed"``
renamed = renamed_hook(ROOT / "solutions")


class HandedInExporter(NotebookExporter):
    """Autograde's exporter: every handed-in notebook read as its canonical notebook (a missing one
    from the file chosen to stand for it); a file refused by the reader read as the release with no
    answers; each recorded in the notebook."""

    def from_filename(self, filename: str, resources: dict | None = None, **kw):
        build = getattr(getattr(self.parent, "writer", None), "build_directory", None)
        if build and os.path.abspath(os.path.dirname(filename)) == os.path.abspath(build):
            return super().from_filename(filename, resources, **kw)  # nbgrader's own file, its second pass
        cd = getattr(self.parent, "coursedir", None)
        path = Path(filename)
        chosen = []
        if cd is not None and not os.path.lexists(path):
            source = Path(cd.format_path(cd.source_directory, ".", ".")).resolve()
            chosen = stands_for(path, release_checksums(source, path.parent.name))
        handed_in = chosen[0] if chosen else path
        try:
            if not chosen and not os.path.lexists(path):  # one notebook of several not handed in
                raise Refused("not_handed_in")
            nb = read_handed_in(handed_in)
        except Refused as refused:  # the release with no answers, the reason stated
            nb = self._release(cd, path)
            record(nb, refused.key, file=_shown(handed_in), **refused.params)
        if len(chosen) > 1:
            record(
                nb,
                "copies",
                file=_shown(handed_in),
                name=path.name,
                copies=len(chosen),
                others=", ".join(_shown(p) for p in chosen[1:]),
            )
        elif chosen:
            record(nb, "renamed", file=_shown(handed_in), name=path.name)
        for said in left_behind(str(path.parent)):
            record(nb, **said)
        resources = {} if resources is None else resources
        resources[INTAKE_KEY] = repairs(
            nb
        )  # ours alone (the canonical notebook keeps none of the file's): MatchRelease starts from these
        if not resources.get("metadata"):
            resources["metadata"] = {}
        resources["metadata"].update(name=path.stem, path=str(path.parent))
        return self.from_notebook_node(nb, resources=resources, **kw)

    @staticmethod
    def _release(cd, path: Path):
        """The release notebook with no answers (an empty notebook without a release to read)."""
        if cd is not None:
            released = Path(cd.format_path(cd.release_directory, ".", path.parent.name)) / path.name
            if released.is_file():
                return nbformat.read(os.fspath(released), as_version=4)
        return nbformat.v4.new_notebook()
