"""What a student handed in, read whatever its shape: every notebook of a submission is graded, with
a reason, and nothing handed in is changed.

Stock nbgrader stops one student's autograde, leaving no graded notebook and no reason, when the
notebook file has another name than the release's (``init_assignment``: "No notebooks found") or
cannot be read as a notebook (a truncated upload, an empty file: ``NotJSONError``). Through two
documented extension points of nbgrader's converters (``nbgrader_config.py``):

- ``renamed_hook``, ``Autograde.pre_convert_hook`` (called with the submission's notebooks before
  nbgrader picks the ones its gradebook knows): where the release has one notebook the folder
  lacks and the folder one notebook the release does not name (``decoder_block (1).ipynb``, a
  browser's second download), that notebook stands for it: the release's name is added to the
  notebooks to grade;
- ``HandedInExporter``, ``Autograde.exporter_class``: reads a notebook nbgrader asks for under the
  release's name from the file that stands for it, and a file that is no notebook as the release
  notebook with no answers (every test then scores 0).

Each is recorded in the notebook (``MatchRelease``'s records: ``renamed``, ``unreadable``) and
stated at the top of the graded notebook and of the feedback, with what the exchange's collect left
behind of the submission (``autograder/collected.py``: ``left_behind_<key>``, a link for instance).
The files handed in stay as they are.

Bounded at intake (``Intake``, one dataclass): a file larger than ``Intake.notebook_bytes`` is never
read (its size is the file system's), one with more than ``Intake.cells`` cells is counted, not
converted; either is graded as the release with no answers (``too_large``, ``too_many_cells``: the
limit and the size found). A 40 MiB comment took the autograded notebook to 46 MB, the feedback page
to 52 MB and ``generate_feedback`` to 1.25 GB; a notebook that is no regular file (a FIFO) is
unreadable, never waited on.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter

from autograder.collected import left_behind
from autograder.repairs import INTAKE_KEY, record


@dataclass(frozen=True)
class Intake:
    """What a notebook handed in may be, at most, to be read (nbformat never sees a larger one)."""

    notebook_bytes: int = 10_000_000  # the file's size; the course's largest honest notebook is under 1 MB
    cells: int = 1000  # cells of the notebook (the releases have 40 to 60)


LIMITS = Intake()


class Refused(ValueError):
    """A notebook handed in that is not read past the intake limits: the repair's key and parameters."""

    def __init__(self, key: str, **params) -> None:
        super().__init__(key)
        self.key, self.params = key, params


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f}"


def read_handed_in(path: Path, limits: Intake = LIMITS):
    """The notebook in ``path``, read within ``limits``: ``Refused`` past them (nothing more of the
    file read), ``OSError``/``ValueError`` when it is no notebook. A file that is not regular (a
    FIFO, a device) is refused unread, so nothing here blocks or reads without end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > limits.notebook_bytes:
            raise Refused("too_large", size_mb=_mb(info.st_size), limit_mb=_mb(limits.notebook_bytes))
        data = f.read(limits.notebook_bytes + 1)  # a file that grew since fstat is cut here
    if len(data) > limits.notebook_bytes:
        raise Refused("too_large", size_mb=_mb(len(data)), limit_mb=_mb(limits.notebook_bytes))
    text = data.decode("utf-8")
    raw = json.loads(text)  # counted before nbformat converts and validates each cell
    count = _cell_count(raw)
    if count > limits.cells:
        raise Refused("too_many_cells", cells=count, limit=limits.cells)
    nb = nbformat.reads(text, as_version=4)
    if not _readable(nb):
        raise ValueError("no notebook cells")
    return nb


def _cell_count(raw) -> int:
    """Cells of a notebook's JSON: v4's ``cells``, or the cells of v3's worksheets."""
    if not isinstance(raw, dict):
        return 0
    if isinstance(raw.get("cells"), list):
        return len(raw["cells"])
    sheets = raw.get("worksheets") if isinstance(raw.get("worksheets"), list) else []
    return sum(len(w["cells"]) for w in sheets if isinstance(w, dict) and isinstance(w.get("cells"), list))


def stands_for(path: Path, expected: set[str]) -> Path | None:
    """The notebook handed in under another name that stands for ``path`` (the release's name of a
    notebook the folder lacks), when that is unambiguous: it is the only notebook the folder lacks
    and the folder holds exactly one notebook the release does not name. Else None."""
    folder = path.parent
    if path.exists() or not folder.is_dir():
        return None
    missing = [s for s in expected if not (folder / f"{s}.ipynb").exists()]
    unknown = [p for p in sorted(folder.glob("*.ipynb")) if p.stem not in expected and p.is_file()]
    return unknown[0] if missing == [path.stem] and len(unknown) == 1 else None


def release_notebooks(source: Path, assignment: str) -> set[str]:
    """The names (without ``.ipynb``) of the assignment's notebooks, from its source folder."""
    return {p.stem for p in (source / assignment).glob("*.ipynb")}


def renamed_hook(source: Path):
    """``Autograde.pre_convert_hook``: a notebook handed in under another name is graded under the
    release's (``stands_for``). ``source``: the course's source folder (``solutions/``)."""
    def hook(assignment: str, student: str, notebooks: list[str]) -> None:
        for folder in sorted({Path(n).parent for n in notebooks}):
            expected = release_notebooks(source, folder.name)
            for name in sorted(expected):
                path = folder / f"{name}.ipynb"
                if str(path) not in notebooks and stands_for(path, expected) is not None:
                    notebooks.append(str(path))  # the list nbgrader grades next (its own, given to the hook)
    return hook


def _readable(nb) -> bool:
    return isinstance(nb.get("cells"), list) and all(isinstance(c, dict) and "cell_type" in c for c in nb.cells)


class HandedInExporter(NotebookExporter):
    """Autograde's exporter: a renamed notebook read from the file that stands for it, a file that
    is no notebook, or one past the intake limits, read as the release with no answers; each
    recorded in the notebook."""

    def from_filename(self, filename: str, resources: dict | None = None, **kw):
        cd = getattr(self.parent, "coursedir", None)
        path = Path(filename)
        if cd is None or path.exists():
            handed_in = path
        else:
            source = Path(cd.format_path(cd.source_directory, ".", ".")).resolve()
            handed_in = stands_for(path, release_notebooks(source, path.parent.name)) or path
        made = []
        try:
            nb = read_handed_in(handed_in)
        except Refused as refused:  # past the intake limits: the release with no answers, the limit stated
            nb = self._release(cd, path)
            made.append(record(nb, refused.key, file=handed_in.name, **refused.params))
        except (OSError, ValueError, UnicodeError, KeyError, TypeError, AttributeError, RecursionError) as error:
            nb = self._release(cd, path)
            made.append(record(nb, "unreadable", file=handed_in.name, error=type(error).__name__))
        if handed_in != path:
            made.append(record(nb, "renamed", file=handed_in.name, name=path.name))
        for said in left_behind(str(path.parent)):
            made.append(record(nb, **said))
        resources = {} if resources is None else resources
        resources[INTAKE_KEY] = made  # MatchRelease keeps these, not what the file says of itself
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
