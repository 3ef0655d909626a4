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
stated at the top of the graded notebook and of the feedback. The files handed in stay as they are.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter

from autograder.repairs import record


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
    is no notebook read as the release with no answers; each recorded in the notebook."""

    def from_filename(self, filename: str, resources: dict | None = None, **kw):
        cd = getattr(self.parent, "coursedir", None)
        path = Path(filename)
        if cd is None or path.exists():
            handed_in = path
        else:
            source = Path(cd.format_path(cd.source_directory, ".", ".")).resolve()
            handed_in = stands_for(path, release_notebooks(source, path.parent.name)) or path
        try:
            nb = nbformat.reads(handed_in.read_text(encoding="utf-8"), as_version=4)
            if not _readable(nb):
                raise ValueError("no notebook cells")
        except (OSError, ValueError, UnicodeError, KeyError, TypeError, AttributeError) as error:
            nb = self._release(cd, path)
            record(nb, "unreadable", file=handed_in.name, error=type(error).__name__)
        if handed_in != path:
            record(nb, "renamed", file=handed_in.name, name=path.name)
        resources = {} if resources is None else resources
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
