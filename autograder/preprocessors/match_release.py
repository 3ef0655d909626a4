"""``MatchRelease`` (the sanitizing step, before nbgrader's own): a mangled notebook is put back in
the release's shape where the release says unambiguously what it was, and each repair is recorded
and stated at the top of the notebook, so the feedback says it. It sees the canonical notebook of
the intake (``autograder/canonical.py``): every field typed, so nothing here checks a type.

What nbgrader's own steps would stop on, and what this step does first (the release is the
gradebook's record of it: grade ids, flags, points, checksums):

- a cell whose nbgrader metadata has an older schema (copied from an older release):
  ``CheckCellMetadata`` raises ``SchemaTooOldError`` and nbgrader stops the whole batch. Its version
  is set to the current one: what nbgrader's upgrade would fill in (flags, points) comes from the
  release (its upgrade from version 0 deletes a cell's nbgrader metadata when no flag is set, which
  stopped this step), and the intake kept no other key;
- a cell's flags changed (a solution cell switched to ``grade: true``): ``OverwriteCells`` looks
  for a graded cell the release does not have (``MissingEntry``); or its type (an answer cell made
  markdown: ``CheckCellMetadata`` refuses a markdown solution cell that is not graded). The flags and
  the type come back from the release;
- a grade id used twice (a duplicated test cell): ``DeduplicateIds`` empties the copy's metadata and
  ``OverwriteCells.add_missing_task_cells`` stops on it (``KeyError``). One cell keeps the id: of a
  test cell, the first copy whose checksum is the release's (else the first); of an answer, the
  last copy that differs from the release (else the last: nbgrader's own choice). The others run as
  ordinary cells;
- a grade id the release does not have (a cell from another assignment): an ordinary cell.

Decisions are records in the notebook (``autograder/repairs.py``: a key and its parameters, those
of the exporter, ``autograder/handed_in.py``, among them); the words are made last, from
``encdec/grading/messages.py`` in the submission's language.
"""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_markdown_cell
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.nbgraderformat import SCHEMA_VERSION
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.repairs import INTAKE_KEY, NOTICE_ID, notice, record, repairs, reset


class MatchRelease(NbGraderPreprocessor):
    """Before nbgrader's sanitizing steps: the notebook's nbgrader cells matched to the release."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        from .trusted_verdict import submission_language

        reset(nb, resources.get(INTAKE_KEY, []))  # a record the file handed in brought with it is no repair of ours
        ids = resources["nbgrader"]
        with Gradebook(ids["db_url"]) as gb:
            release = gb.find_notebook(ids["notebook"], ids["assignment"])
            source = {c.name: (c.locked, c.checksum, c.cell_type) for c in release.source_cells}
            points = {c.name: float(c.max_score) for c in release.grade_cells}
            solutions = {c.name for c in release.solution_cells}
            tasks = {c.name for c in release.task_cells}
        for cell in nb.cells:
            self._match_cell(nb, cell, source, points, solutions, tasks)
        self._one_cell_per_id(nb, source, solutions)
        done = repairs(nb)
        nb.cells = [c for c in nb.cells if c.get("id") != NOTICE_ID]
        if done:
            cell = new_markdown_cell(notice(done, submission_language(nb)))
            cell.id = NOTICE_ID
            nb.cells.insert(0, cell)
            self.log.warning(
                "%s/%s/%s repaired: %s",
                ids["student"],
                ids["assignment"],
                ids["notebook"],
                "; ".join(r["key"] for r in done),
            )
        return nb, resources

    def _match_cell(self, nb, cell, source, points, solutions, tasks) -> None:
        meta = cell.metadata.get("nbgrader")  # typed at intake (autograder/canonical.py)
        if meta is None:
            return
        gid = meta.get("grade_id")
        if gid not in source:  # not the release's: an ordinary cell
            del cell.metadata["nbgrader"]
            if gid is not None:
                record(nb, "unknown_cell", cell=gid)
            return
        version = meta.get("schema_version", 0)
        if version != SCHEMA_VERSION:  # what nbgrader's upgrade would fill in comes from the release below
            meta["schema_version"] = SCHEMA_VERSION
            record(nb, "schema", cell=gid, version=version)
        flags = {"grade": gid in points, "solution": gid in solutions, "task": gid in tasks, "locked": source[gid][0]}
        changed = sorted(k for k, v in flags.items() if bool(meta.get(k, False)) != v)
        meta.update(flags)
        if cell.cell_type != source[gid][2]:  # Jupyter's M and Y keys: the release's type put back
            changed.append("cell_type")
            cell.cell_type = source[gid][2]
            for key, value in (("outputs", []), ("execution_count", None)):
                cell.update({key: value}) if cell.cell_type == "code" else cell.pop(key, None)
        if gid in points:
            meta["points"] = points[gid]
        else:
            meta.pop("points", None)
        if changed:
            record(nb, "flags", cell=gid, flags=", ".join(changed))

    def _one_cell_per_id(self, nb, source, solutions) -> None:
        by_id: dict[str, list[int]] = {}
        for i, cell in enumerate(nb.cells):
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid is not None:
                by_id.setdefault(gid, []).append(i)
        for gid, at in by_id.items():
            if len(at) < 2:
                continue
            released = [i for i in at if utils.compute_checksum(nb.cells[i]) == source[gid][1]]
            if gid in solutions and not source[gid][0]:  # an answer: the last one the student changed
                changed = [i for i in at if i not in released]
                keep = (changed or at)[-1]
            else:  # a test: the first copy that is the release's own
                keep = (released or at)[0]
            for i in at:
                if i != keep:
                    del nb.cells[i].metadata["nbgrader"]
            record(nb, "duplicate", cell=gid, copies=len(at) - 1)
